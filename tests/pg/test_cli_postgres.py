"""The command line on PostgreSQL: ``--db postgresql://…`` and ``AGENT_TUI_DB`` choose the
store; a run started by one command is answered and finished by later ones."""

from __future__ import annotations

from pathlib import Path

import asyncpg
import pytest

from runtime.providers.demo import NOTES_FILE
from tests.cli.harness import Cli, boundary_of, json_lines

pytestmark = pytest.mark.slow


def _cli(tmp_path: Path) -> Cli:
    workspace = tmp_path / "project"
    workspace.mkdir()
    (workspace / "README.md").write_text("# A project\n\nIt parses things.\n")
    return Cli.create(tmp_path, workspace)


async def test_a_run_on_postgresql_stops_at_its_question_and_respond_finishes_it(
    pg_database: str, tmp_path: Path
) -> None:
    cli = _cli(tmp_path)
    where = ("--db", pg_database, "--workspace", str(cli.workspace))

    started = cli.run(
        *where,
        "run",
        "summarise this folder",
        "--json",
        "--model",
        "demo:instant",
        global_options=False,
    )
    assert started.returncode == 3, started.stderr
    run_id = boundary_of(json_lines(started.stdout))["run_id"]

    cli.env["AGENT_TUI_DB"] = pg_database  # the environment chooses it as well
    answered = cli.run(
        "--workspace", str(cli.workspace), "respond", run_id, "1", "--json", global_options=False
    )
    assert answered.returncode == 3, answered.stderr
    approved = cli.run(
        "--workspace",
        str(cli.workspace),
        "respond",
        run_id,
        "allow",
        "--json",
        global_options=False,
    )
    assert approved.returncode == 0, approved.stderr
    assert boundary_of(json_lines(approved.stdout))["state"] == "completed"
    assert (cli.workspace / NOTES_FILE).exists()
    assert not cli.db.exists()  # no SQLite file was created on the side

    conn = await asyncpg.connect(pg_database)
    try:
        state = await conn.fetchval("SELECT state FROM agent_tui.runs WHERE id = $1", run_id)
    finally:
        await conn.close()
    assert state == "completed"


def test_an_unreachable_postgresql_url_is_one_clear_line(tmp_path: Path) -> None:
    cli = _cli(tmp_path)
    url = "postgresql://someone:secret@127.0.0.1:1/nothing"
    result = cli.run("--db", url, "--workspace", str(cli.workspace), "runs", global_options=False)
    assert result.returncode != 0
    assert result.stderr.startswith("agent-tui: error:")
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr
    assert "secret" not in result.stderr
