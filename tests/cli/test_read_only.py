"""Commands that only look (`runs`, `show`, `export`, `doctor`) never write (issue 12 point 1):
the database file keeps every byte and the owners table gains no row; where there is no
database, no command that needs one creates it (or its folder); `doctor` says when the first
run could not create it."""

from __future__ import annotations

import json
import sqlite3

import pytest

from tests.cli.harness import Cli, assert_one_line_error, folder_state, read_only, run_cli


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


@pytest.mark.parametrize(
    "args",
    [
        ("runs",),
        ("runs", "--json"),
        ("events",),
        ("doctor",),
    ],
)
def test_looking_where_there_is_no_database_creates_neither_it_nor_its_folder(
    cli: Cli, args: tuple[str, ...]
) -> None:
    db = cli.root / "no" / "such" / "folder" / "x.db"
    result = cli.run("--db", str(db), *args)
    assert result.returncode == 0, result.stderr
    if args[0] != "doctor":
        assert result.stdout == ""
        assert result.stderr == f"No database yet at {db.resolve()}.\n"
    else:
        assert "not created yet" in result.stdout
    assert not db.exists()
    assert not (cli.root / "no").exists()


@pytest.mark.parametrize(
    "args",
    [
        ("show", "3fa2"),
        ("show", "3fa2", "--json"),
        ("export", "3fa2"),
        ("respond", "3fa2", "allow"),
        ("follow-up", "3fa2", "more"),
        ("retry", "3fa2"),
        ("fork", "3fa2"),
        ("cancel", "3fa2"),
        ("archive", "3fa2"),
        ("unarchive", "3fa2"),
        ("delete", "3fa2", "--yes"),
        ("rewind", "3fa2"),
        ("events", "--follow"),
    ],
)
def test_an_id_where_there_is_no_database_is_one_line_naming_it_and_creates_nothing(
    cli: Cli, args: tuple[str, ...]
) -> None:
    db = cli.root / "no" / "such" / "folder" / "x.db"
    result = cli.run("--db", str(db), *args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == (
        f"agent-tui: error: there is no database at {db.resolve()} (check --db or AGENT_TUI_DB)\n"
    )
    assert not (cli.root / "no").exists()


def test_a_relative_db_that_does_not_exist_is_named_in_full(cli: Cli) -> None:
    result = cli.run("--db", "typo/x.db", "show", "3fa2")
    assert result.returncode == 2
    assert f"no database at {(cli.workspace / 'typo' / 'x.db').resolve()} " in result.stderr
    assert not (cli.workspace / "typo").exists()


def test_doctor_fails_with_runs_line_where_the_first_run_could_not_create_the_database(
    cli: Cli,
) -> None:
    cli.db.parent.mkdir(parents=True)
    prefix = read_only(cli, cli.db.parent)
    ran = run_cli(cli, prefix, "run", "hello", "--model", "demo:instant")
    assert_one_line_error(ran, str(cli.db.parent), "not writable")
    doctor = run_cli(cli, prefix, "doctor")
    assert doctor.returncode == 1, doctor.stdout
    problem = ran.stderr.removeprefix("agent-tui: error: ")
    assert f"  not created yet\n  error: {problem}" in doctor.stdout
    assert "All fine." not in doctor.stdout
    assert "Some checks failed" in doctor.stdout
    assert folder_state(cli.db.parent) == {}
