"""Commands that only look (`runs`, `show`, `export`, `doctor`) never write (issue 12 point 1):
the database file keeps every byte and the owners table gains no row."""

from __future__ import annotations

import json
import sqlite3

from tests.cli.harness import Cli


def _owners(cli: Cli) -> list[tuple[object, ...]]:
    with sqlite3.connect(cli.db) as conn:
        return conn.execute("SELECT * FROM owners ORDER BY owner_id").fetchall()


def test_looking_at_runs_jobs_and_exports_changes_no_byte_of_the_database(cli: Cli) -> None:
    ran = cli.run("run", "summarise this project", "--model", "demo:instant", "--json")
    assert ran.returncode == 3, ran.stderr  # waits for the demo's question
    run_id = json.loads(ran.stdout.splitlines()[0])["run_id"]
    job_id = json.loads(ran.stdout.splitlines()[0])["job_id"]
    before = cli.db.read_bytes()
    owners = _owners(cli)
    for args in (
        ("runs", "--json"),
        ("runs",),
        ("show", run_id),
        ("show", run_id, "--json"),
        ("export", job_id),
        ("doctor",),
    ):
        result = cli.run(*args)
        assert result.returncode == 0, (args, result.stderr)
        assert cli.db.read_bytes() == before, args
    assert _owners(cli) == owners
    shown = cli.run("runs", "--json")
    assert run_id in shown.stdout
