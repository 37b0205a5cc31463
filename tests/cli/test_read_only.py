"""Commands that only look (`runs`, `show`, `export`, `doctor`) never write (issue 12 point 1):
the database file keeps every byte and the owners table gains no row; where there is no
database, no command that needs one creates it (or its folder). So they read a database in a
read-only folder (a copy, a backup), where `run` refuses, and `doctor` says why it would."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from runtime.store.migrations import LATEST_VERSION, migrate
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


def _made_run(cli: Cli) -> tuple[str, str]:
    """A run (waiting for the demo's question) in ``cli.db``; its id and its job's."""
    ran = cli.run("run", "summarise this project", "--model", "demo:instant", "--json")
    assert ran.returncode == 3, ran.stderr
    first = json.loads(ran.stdout.splitlines()[0])
    return first["run_id"], first["job_id"]


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


def test_a_database_on_a_read_only_mount_is_listed_shown_exported_and_checked_untouched(
    cli: Cli,
) -> None:
    run_id, job_id = _made_run(cli)
    before = folder_state(cli.db.parent)
    assert "agent-tui.db-wal" not in before  # closed: nothing left in a write-ahead log
    prefix = read_only(cli, cli.db.parent, by="mount")

    listed = run_cli(cli, prefix, "runs", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [line["id"] for line in map(json.loads, listed.stdout.splitlines())] == [run_id]
    table = run_cli(cli, prefix, "runs")
    assert table.returncode == 0 and run_id in table.stdout, table.stderr
    interrupted = run_cli(cli, prefix, "runs", "--state", "interrupted")  # the runtime's path
    assert interrupted.returncode == 0, interrupted.stderr
    shown = run_cli(cli, prefix, "show", run_id, "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["run"]["id"] == run_id
    exported = run_cli(cli, prefix, "export", job_id, "--format", "json")
    assert exported.returncode == 0, exported.stderr
    assert json.loads(exported.stdout)["job"]["id"] == job_id
    events = run_cli(cli, prefix, "events")
    assert events.returncode == 0 and run_id in events.stdout, events.stderr
    # Read as a file that never changes (SQLite's immutable=1): following it would show
    # nothing new, and a commit made through another mount could read as corrupt.
    follow = run_cli(cli, prefix, "events", "--follow")
    assert_one_line_error(follow, "--follow", "read-only file system", "without --follow")

    # doctor reads and checks it, and fails on what stops `run` there.
    again = run_cli(cli, prefix, "run", "again", "--model", "demo:instant")
    assert_one_line_error(again, str(cli.db.parent), "not writable")
    doctor = run_cli(cli, prefix, "doctor")
    assert doctor.returncode == 1, doctor.stdout
    assert f"  error: {again.stderr.removeprefix('agent-tui: error: ')}" in doctor.stdout
    assert "  integrity check: ok\n  schema check: ok\n" in doctor.stdout
    assert "All fine." not in doctor.stdout
    assert folder_state(cli.db.parent) == before


def test_show_in_a_read_only_folder_says_answering_needs_a_writable_copy_not_respond(
    cli: Cli,
) -> None:
    """Found by a review: `show` of a run waiting for an answer suggested
    ``agent-tui --db … respond …``, which cannot work where the database cannot be written."""
    run_id, _ = _made_run(cli)
    writable = cli.run("show", run_id)
    assert f"respond {run_id} ANSWER" in writable.stdout, writable.stdout
    prefix = read_only(cli, cli.db.parent, by="mount")
    shown = run_cli(cli, prefix, "show", run_id)
    assert shown.returncode == 0, shown.stderr
    assert "respond" not in shown.stdout, shown.stdout
    [line] = [line for line in shown.stdout.splitlines() if "Answering" in line]
    assert f"Answering needs a writable copy: {cli.db.parent} is not writable here" in line


def test_a_closed_database_in_a_folder_this_user_may_not_write_is_one_line_naming_what_is_missing(
    cli: Cli,
) -> None:
    """Found by a review: a folder only this user may not write (another user's) was read
    ``immutable=1`` when no log was beside the database, though its owner may be writing it
    (SQLite then reads wrong or as corrupt). There it is read ``mode=ro`` only, which needs the
    -wal and -shm files SQLite cannot create there."""
    run_id, job_id = _made_run(cli)
    before = folder_state(cli.db.parent)
    prefix = read_only(cli, cli.db.parent, by="permissions")
    for args in (("runs",), ("runs", "--json"), ("show", run_id), ("export", job_id)):
        result = run_cli(cli, prefix, *args)
        assert_one_line_error(result, "agent-tui.db-wal and agent-tui.db-shm", "cannot create")
    doctor = run_cli(cli, prefix, "doctor")
    assert doctor.returncode == 1 and "agent-tui.db-shm" in doctor.stdout, doctor.stdout
    assert folder_state(cli.db.parent) == before


def test_a_database_its_owner_has_open_in_a_folder_this_user_may_not_write_is_read_with_its_log(
    cli: Cli,
) -> None:
    run_id, _ = _made_run(cli)
    writer = sqlite3.connect(cli.db, isolation_level=None)  # the owner's process, still open
    try:
        writer.execute("PRAGMA wal_autocheckpoint = 0")
        writer.execute("UPDATE jobs SET title = 'renamed by its owner'")
        prefix = read_only(cli, cli.db.parent, by="permissions")
        for args in (("runs", "--json"), ("show", run_id, "--json")):
            result = run_cli(cli, prefix, *args)
            assert result.returncode == 0, (args, result.stderr)
            assert "renamed by its owner" in result.stdout, args
        writer.execute("UPDATE jobs SET title = 'renamed again'")
        result = run_cli(cli, prefix, "runs", "--json")
        assert "renamed again" in result.stdout, result.stderr
    finally:
        writer.close()


def _copy_with_a_commit_in_its_log(cli: Cli, copy: Path, *, with_index: bool) -> None:
    """Copy ``cli.db`` into ``copy`` while a connection holds a commit (a job renamed) in the
    write-ahead log, not yet in the database file: with the log, and its index (``-shm``) or
    not."""
    copy.mkdir()
    writer = sqlite3.connect(cli.db, isolation_level=None)
    try:
        writer.execute("PRAGMA wal_autocheckpoint = 0")
        writer.execute("UPDATE jobs SET title = 'renamed in the log'")
        for suffix in ("", "-wal", *(["-shm"] if with_index else [])):
            shutil.copyfile(f"{cli.db}{suffix}", copy / f"agent-tui.db{suffix}")
    finally:
        writer.close()


@pytest.mark.parametrize("by", ["mount", "permissions"])
def test_a_read_only_copy_is_read_with_the_commits_in_its_write_ahead_log(
    cli: Cli, tmp_path: Path, by: str
) -> None:
    run_id, _ = _made_run(cli)
    copy = tmp_path / "copy"
    _copy_with_a_commit_in_its_log(cli, copy, with_index=True)
    before = folder_state(copy)
    cli.db = copy / "agent-tui.db"
    # SQLite would write a writable -shm.
    prefix = read_only(cli, copy, *copy.iterdir(), by=by)
    for args in (("runs", "--json"), ("show", run_id, "--json")):
        result = run_cli(cli, prefix, *args)
        assert result.returncode == 0, (args, result.stderr)
        assert "renamed in the log" in result.stdout, args
    assert folder_state(copy) == before


@pytest.mark.parametrize(
    ("by", "words"),
    [
        ("mount", ("agent-tui.db-wal", "copy the database with its -wal file")),
        ("permissions", ("agent-tui.db-shm file", "cannot create it", "copy it to a writable")),
    ],
)
def test_a_read_only_copy_whose_log_cannot_be_read_is_one_line_not_a_copy_without_it(
    cli: Cli, tmp_path: Path, by: str, words: tuple[str, ...]
) -> None:
    run_id, job_id = _made_run(cli)
    copy = tmp_path / "copy"
    _copy_with_a_commit_in_its_log(cli, copy, with_index=False)
    before = folder_state(copy)
    cli.db = copy / "agent-tui.db"
    prefix = read_only(cli, copy, *copy.iterdir(), by=by)
    for args in (("runs",), ("show", run_id), ("export", job_id)):
        result = run_cli(cli, prefix, *args)
        assert_one_line_error(result, *words)
    doctor = run_cli(cli, prefix, "doctor")
    assert doctor.returncode == 1 and words[0] in doctor.stdout, doctor.stdout
    assert folder_state(copy) == before


@pytest.mark.parametrize("by", ["mount", "permissions"])
@pytest.mark.parametrize("version", [0, LATEST_VERSION - 1])
def test_a_database_that_needs_setting_up_in_a_read_only_folder_is_one_line_naming_why(
    cli: Cli, version: int, by: str
) -> None:
    cli.db.parent.mkdir(parents=True)
    if version:
        conn = sqlite3.connect(cli.db, isolation_level=None)
        try:
            migrate(conn, path=str(cli.db), upto=version)
        finally:
            conn.close()
    else:
        cli.db.touch()  # an empty file: a database not set up yet
    before = folder_state(cli.db.parent)
    prefix = read_only(cli, cli.db.parent, by=by)
    for args in (("runs",), ("show", "3fa2"), ("export", "3fa2")):
        result = run_cli(cli, prefix, *args)
        assert_one_line_error(result, str(cli.db.parent), "not writable")
        if by == "mount":
            assert ("is empty" if version == 0 else f"schema version {version}") in result.stderr
        else:  # not read at all: a folder of another user may hold a database being written
            assert "agent-tui.db-shm" in result.stderr
    assert folder_state(cli.db.parent) == before
