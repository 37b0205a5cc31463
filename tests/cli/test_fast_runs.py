"""``agent-tui runs`` on SQLite reads the database read-only with the standard library
(``tui._cli.fast_runs``, issue 17): it prints exactly what the full path (the runtime) prints,
refuses what the store refuses, and leaves a database held by a live runtime untouched."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runtime.api import Runtime
from runtime.clock import ManualClock
from runtime.config import Config
from runtime.models import Failure, Run
from runtime.owners import new_owner_id
from runtime.store.migrations import LATEST_VERSION, MIGRATIONS, migrate
from tests.cli.harness import Cli
from tui import cli as cli_module
from tui._cli import listing
from tui._cli.parser import build_parser

HEAVY = ("textual", "anthropic", "mcp", "jsonschema", "pydantic", "httpx", "openai", "rich")
SCRIPT = "import sys; from tui.cli import main; sys.exit(main())"


def _fast(cli: Cli, *args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """``agent-tui runs ARGS`` as the console script runs it, and the modules it imported."""
    result = subprocess.run(
        [
            *(sys.executable, "-X", "importtime", "-c", SCRIPT),
            *("--db", str(cli.db), "--workspace", str(cli.workspace), "runs", *args),
        ],
        capture_output=True,
        text=True,
        env=cli.env,
        cwd=cli.workspace,
        timeout=120,
        check=False,
    )
    modules = {
        line.rsplit("|", 1)[1].strip()
        for line in result.stderr.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }
    result.stderr = "".join(
        line for line in result.stderr.splitlines(keepends=True) if not line.startswith("import ")
    )
    return result, modules


def _full(cli: Cli, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """The same command through the full path: the runtime opened read-only, ``cmd_runs``."""
    parsed = build_parser().parse_args(["--db", str(cli.db), "runs", *args])
    code = asyncio.run(cli_module._run_command(parsed, cli.db, cli.workspace))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


async def _seed(db: Path, workspace: Path) -> list[Run]:
    """Runs made by the real runtime three days ago (so AGE reads the same on both paths)."""
    clock = ManualClock(start=time.time() - 3 * 86400 - 3600)
    runtime = await Runtime.open(
        db_path=db, workspace=workspace, config=Config(), model="demo:instant", clock=clock
    )
    runs = []
    try:
        for prompt in (
            "hello",
            "summarise   this\tproject",
            "a third, with a much longer title " * 3,
        ):
            run = await runtime.start(prompt)
            await runtime.wait(run.id, timeout=60)
            runs.append(await runtime.get_run(run.id))
            clock.advance(61)
    finally:
        await runtime.close()
    return runs


@pytest.fixture
def seeded(cli: Cli) -> list[Run]:
    cli.db.parent.mkdir(parents=True, exist_ok=True)
    runs = asyncio.run(_seed(cli.db, cli.workspace))
    # What three demo runs cannot show on their own: a failure, an interrupted run, a child, usage
    # and cost, an archived job (columns written as the store writes them). The interrupted run
    # runs again, in a process that is alive (this one) and holds its lease.
    failure = Failure(code="provider_error", message="the model said no").model_dump_json()
    owner, now = new_owner_id(), time.time()
    with sqlite3.connect(cli.db) as conn:
        conn.execute(
            "UPDATE runs SET state = 'failed', failure = ?, input_tokens = 1200,"
            " output_tokens = 345, cache_read_tokens = 5, cost_usd = 0.0042 WHERE id = ?",
            (failure, runs[0].id),
        )
        conn.execute(
            "INSERT INTO owners (owner_id, pid, lease_seconds, lease_expires_at, heartbeat_at)"
            " VALUES (?, ?, 3600, ?, ?)",
            (owner, os.getpid(), now + 3600, now),
        )
        conn.execute(
            "UPDATE runs SET interrupted = 1, state = 'running', cost_usd = 1.5,"
            " parent_run_id = ?, owner_id = ? WHERE id = ?",
            (runs[0].id, owner, runs[1].id),
        )
        conn.execute("UPDATE jobs SET archived = 1 WHERE id = ?", (runs[2].job_id,))
    return runs


CASES = [
    (),
    ("--json",),
    ("--state", "failed"),
    ("--state", "failed", "--json"),
    ("--state", "queued"),
    ("--state", "queued", "--json"),
    ("--archived",),
    ("--archived", "--json"),
    ("--limit", "1"),
    ("--limit", "1", "--archived", "--json"),
]


def test_fast_runs_prints_exactly_what_the_runtime_path_prints(
    cli: Cli, seeded: list[Run], capsys: pytest.CaptureFixture[str]
) -> None:
    for args in CASES:
        fast, modules = _fast(cli, *args)
        code, out, err = _full(cli, capsys, *args)
        assert (fast.returncode, fast.stdout, fast.stderr) == (code, out, err), args
        assert not {name.split(".")[0] for name in modules} & set(HEAVY), args
        assert "runtime.engine" not in modules and "runtime.store.sqlite" not in modules
    # The comparison compares something: the table shows the states, the child, the cost.
    table, _ = _fast(cli, "--archived")
    assert f"↳ child of {seeded[0].id[:8]}: " in table.stdout
    assert "running (interrupted)" in table.stdout and "failed" in table.stdout
    assert "$0.0042" in table.stdout and "1.6k" in table.stdout and "3d" in table.stdout
    # The archived job's runs say so (a new-user trial could not tell them apart).
    archived_lines = [line for line in table.stdout.splitlines() if seeded[2].id in line]
    assert archived_lines and all("[archived] " in line for line in archived_lines)
    assert "[archived]" not in _fast(cli)[0].stdout
    listed = [json.loads(line) for line in _fast(cli, "--json")[0].stdout.splitlines()]
    assert [item["id"] for item in listed] == [seeded[1].id, seeded[0].id]  # not the archived
    assert listed[1]["failure"] == {"code": "provider_error", "message": "the model said no"}


def test_the_json_of_a_run_has_the_fields_of_the_run_model_in_its_order() -> None:
    assert tuple(Run.model_fields) == listing.RUN_JSON_FIELDS
    conn = sqlite3.connect(":memory:")
    migrate(conn, path=":memory:")
    columns = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
    assert set(listing.RUN_COLUMNS) <= columns


def test_runs_on_a_database_held_by_a_live_runtime_leaves_its_rows_and_lease_alone(
    cli: Cli, seeded: list[Run]
) -> None:
    async def scenario() -> None:
        runtime = await Runtime.open(
            db_path=cli.db, workspace=cli.workspace, config=Config(), model="demo:instant"
        )
        try:
            # A run of this runtime's own, waiting for its answer: the runtime holds a lease.
            held = await runtime.start("summarise this project")
            boundary = await runtime.wait(held.id, timeout=60)
            assert boundary.run.state.value == "input_required"
            with sqlite3.connect(f"file:{cli.db}?mode=ro", uri=True) as conn:
                owners = conn.execute(
                    "SELECT owner_id, pid, released, recovered_at FROM owners ORDER BY owner_id"
                ).fetchall()
                rows = {
                    table: conn.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall()
                    for table in ("jobs", "runs", "messages", "input_requests", "events")
                }
            assert any(owner[2] == 0 for owner in owners)  # the live runtime's lease
            proc = await asyncio.create_subprocess_exec(
                *cli.argv("runs", "--archived"),
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=cli.env,
                cwd=cli.workspace,
            )
            async with asyncio.timeout(60):
                out, err = await proc.communicate()
            assert proc.returncode == 0, err
            assert seeded[2].id in out.decode() and held.id in out.decode()
            with sqlite3.connect(f"file:{cli.db}?mode=ro", uri=True) as conn:
                assert (
                    conn.execute(
                        "SELECT owner_id, pid, released, recovered_at FROM owners ORDER BY owner_id"
                    ).fetchall()
                    == owners
                )
                for table, before in rows.items():
                    after = conn.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall()
                    assert after == before, table
            # The runtime still holds its database and its run: it can still change it.
            cancelled = await runtime.cancel(held.id, reason="done looking")
            assert cancelled.state.value == "cancelled"
        finally:
            await runtime.close()

    asyncio.run(scenario())


def test_runs_where_there_is_no_database_yet_says_so_and_creates_nothing(cli: Cli) -> None:
    result, modules = _fast(cli)
    assert (result.returncode, result.stdout) == (0, "")
    assert result.stderr == f"No database yet at {cli.db.resolve()}.\n"
    assert not cli.db.parent.exists()
    assert "runtime.store.sqlite" not in modules  # nothing opened, nothing created


def test_runs_on_an_empty_database_file_makes_it_a_database_as_before(cli: Cli) -> None:
    # An empty file is a database SQLite has not written yet: the full path sets it up.
    cli.db.parent.mkdir(parents=True)
    cli.db.touch()
    result, modules = _fast(cli)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "No runs yet.\n")
    assert "runtime.store.sqlite" in modules
    with sqlite3.connect(cli.db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == LATEST_VERSION
    again, modules = _fast(cli)
    assert (again.returncode, again.stdout, again.stderr) == (0, "", "No runs yet.\n")
    assert "tui._cli.fast_runs" in modules and "runtime.store.sqlite" not in modules


def test_runs_on_a_file_that_is_not_a_database_is_one_line_and_exit_2(cli: Cli) -> None:
    cli.db.parent.mkdir(parents=True, exist_ok=True)
    cli.db.write_bytes(b"not a database at all\n" * 100)
    before = cli.db.read_bytes()
    result, _ = _fast(cli)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("agent-tui: error: ")
    assert "not an SQLite database" in result.stderr
    assert cli.db.read_bytes() == before


def test_runs_on_a_database_of_a_newer_schema_is_refused_untouched(cli: Cli) -> None:
    cli.db.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(cli.db) as conn:
        migrate(conn, path=str(cli.db))
        conn.execute(f"PRAGMA user_version = {LATEST_VERSION + 1}")
    before = cli.db.read_bytes()
    result, _ = _fast(cli, "--json")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "newer than this agent-tui supports" in result.stderr
    assert cli.db.read_bytes() == before


def test_runs_on_a_damaged_database_is_refused_like_the_store_refuses_it(cli: Cli) -> None:
    cli.db.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(cli.db) as conn:
        migrate(conn, path=str(cli.db))
        conn.execute("DROP TABLE draft_parts")
    result, _ = _fast(cli)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "damaged agent-tui database" in result.stderr and "draft_parts" in result.stderr


def test_runs_on_a_database_of_an_older_schema_migrates_it_through_the_runtime(
    cli: Cli,
) -> None:
    cli.db.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(cli.db) as conn:
        migrate(conn, path=str(cli.db), upto=MIGRATIONS[-2].version)
    result, modules = _fast(cli)
    assert (result.returncode, result.stderr) == (0, "No runs yet.\n")
    assert "runtime.store.sqlite" in modules  # the full path, which migrates
    with sqlite3.connect(cli.db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == LATEST_VERSION


def test_a_limit_over_the_runtimes_maximum_is_refused_as_before(cli: Cli) -> None:
    cli.make_database()
    result, _ = _fast(cli, "--limit", "1001")
    assert result.returncode == 2
    assert result.stderr == "agent-tui: error: limit must be between 1 and 1000\n"


def test_a_broken_configuration_does_not_stop_the_listing_but_still_stops_a_run(
    cli: Cli, seeded: list[Run]
) -> None:
    (cli.workspace / "agent-tui.toml").write_text("model = [unclosed\n")
    listed, _ = _fast(cli, "--json")
    assert listed.returncode == 0, listed.stderr
    assert {json.loads(line)["id"] for line in listed.stdout.splitlines()} == {
        seeded[0].id,
        seeded[1].id,
    }
    refused = cli.run("run", "hello", "--model", "demo:instant")
    assert refused.returncode == 2
    assert "agent-tui.toml" in refused.stderr and refused.stderr.count("\n") == 1


def test_show_and_export_read_the_database_despite_a_broken_configuration_and_say_so(
    cli: Cli, seeded: list[Run]
) -> None:
    """Found by a new-user trial: a broken agent-tui.toml stopped show and export (exit 2),
    which need nothing of it, while runs went on."""
    broken = cli.workspace / "agent-tui.toml"
    broken.write_text("model = [unclosed\n")
    for argv in (("show", seeded[0].id), ("export", seeded[0].job_id)):
        result = cli.run(*argv)
        assert result.returncode == 0, result.stderr
        assert seeded[0].id[:8] in result.stdout or seeded[0].input in result.stdout
        warning = [line for line in result.stderr.splitlines() if "agent-tui.toml" in line]
        assert len(warning) == 1 and warning[0].startswith("agent-tui: warning: ")
        assert "read without the configuration" in warning[0]
    assert broken.read_text() == "model = [unclosed\n"  # nothing modified
    assert cli.run("follow-up", seeded[0].job_id, "more").returncode == 2  # it does need it
