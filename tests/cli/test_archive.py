"""`agent-tui archive / unarchive / delete` and `runs --archived` (DESIGN §5: deletion is an
explicit action on an archived job; nothing else deletes)."""

from __future__ import annotations

import asyncio
import json
import sqlite3

import pytest

from runtime.store.sqlite import SqliteStore
from runtime.store.stored_content import register_functions
from tests.cli.harness import Cli, boundary_of, json_lines

pytestmark = pytest.mark.slow

PROMPT = "summarise this folder for the archive test"


def _job_waiting(cli: Cli) -> tuple[str, str]:
    """A job whose demo run stops at its question: (job id, run id)."""
    result = cli.run("run", PROMPT, "--json", "--model", "demo:instant")
    assert result.returncode == 3, result.stderr
    run_id = boundary_of(json_lines(result.stdout))["run_id"]
    shown = cli.run("show", run_id, "--json")
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)["job"]["id"], run_id


def _finished_job(cli: Cli) -> tuple[str, str]:
    job_id, run_id = _job_waiting(cli)
    cancelled = cli.run("cancel", run_id)
    assert cancelled.returncode == 0, cancelled.stderr
    return job_id, run_id


def _listed_run_ids(cli: Cli, *extra: str) -> set[str]:
    result = cli.run("runs", "--json", *extra)
    assert result.returncode == 0, result.stderr
    return {row["id"] for row in json_lines(result.stdout)}


def _count(cli: Cli, sql: str, *params: str) -> int:
    with sqlite3.connect(cli.db) as conn:
        register_functions(conn)  # the search index reads its text through the store's function
        return int(conn.execute(sql, params).fetchone()[0])


def _search(cli: Cli, text: str) -> list[str]:
    async def go() -> list[str]:
        async with SqliteStore(cli.db) as store:
            return [hit.job_id for hit in await store.search_messages(text)]

    return asyncio.run(go())


def test_the_unarchive_hint_names_the_database_of_the_archived_job(cli: Cli) -> None:
    """Found by a README audit: "agent-tui unarchive ID brings it back" left out `--db`, so
    the command as printed looked for the job in the default database."""
    job_id, _ = _finished_job(cli)
    archived = cli.run("archive", job_id)
    assert archived.returncode == 0, archived.stderr
    assert f"agent-tui --db {cli.db} unarchive {job_id} brings it back" in archived.stdout


def test_an_archived_job_is_hidden_from_runs_unless_archived_is_asked(cli: Cli) -> None:
    job_id, run_id = _finished_job(cli)
    assert run_id in _listed_run_ids(cli)

    archived = cli.run("archive", job_id)
    assert archived.returncode == 0, archived.stderr
    assert f"Archived job {job_id}" in archived.stdout
    assert run_id not in _listed_run_ids(cli)
    assert run_id in _listed_run_ids(cli, "--archived")

    restored = cli.run("unarchive", job_id)
    assert restored.returncode == 0, restored.stderr
    assert run_id in _listed_run_ids(cli)


def test_archiving_twice_or_unarchiving_a_job_not_archived_says_nothing_changed(cli: Cli) -> None:
    job_id, _ = _finished_job(cli)
    before = cli.db.read_bytes()
    result = cli.run("unarchive", job_id)
    assert result.returncode == 0, result.stderr
    assert "is not archived: nothing changed" in result.stdout
    assert "Unarchived" not in result.stdout
    assert cli.db.read_bytes() == before
    assert cli.run("archive", job_id).returncode == 0
    again = cli.run("archive", job_id)
    assert again.returncode == 0, again.stderr
    assert "already archived: nothing changed" in again.stdout


def test_a_job_waiting_for_input_cannot_be_archived(cli: Cli) -> None:
    job_id, _ = _job_waiting(cli)
    result = cli.run("archive", job_id)
    assert result.returncode == 2
    assert "input_required" in result.stderr and "cancel it" in result.stderr
    # The command line's own way to answer it (the TUI words its refusal with its keys).
    assert f"agent-tui --db {cli.db.resolve()} respond " in result.stderr  # this database
    assert "Traceback" not in result.stderr
    assert _count(cli, "SELECT archived FROM jobs WHERE id = ?", job_id) == 0


def test_delete_is_refused_on_a_job_that_is_not_archived(cli: Cli) -> None:
    job_id, _ = _finished_job(cli)
    before = _count(cli, "SELECT count(*) FROM messages WHERE job_id = ?", job_id)
    result = cli.run("delete", job_id, "--yes")
    assert result.returncode == 2
    assert (
        "not archived" in result.stderr
        and f"agent-tui --db {cli.db.resolve()} archive {job_id}" in result.stderr
    )
    assert "Traceback" not in result.stderr
    assert _count(cli, "SELECT count(*) FROM messages WHERE job_id = ?", job_id) == before > 0


def test_delete_without_yes_off_a_terminal_refuses_and_keeps_the_job(cli: Cli) -> None:
    job_id, _ = _finished_job(cli)
    assert cli.run("archive", job_id).returncode == 0
    result = cli.run("delete", job_id, input="y\n")
    assert result.returncode == 2
    assert "--yes" in result.stderr
    assert _count(cli, "SELECT count(*) FROM jobs WHERE id = ?", job_id) == 1


def test_delete_removes_every_row_of_the_job_and_its_search_hits_only(cli: Cli) -> None:
    kept_job, kept_run = _finished_job(cli)
    job_id, run_id = _finished_job(cli)
    assert job_id != kept_job
    word = "folder"
    assert {job_id, kept_job} <= set(_search(cli, word))
    assert cli.run("archive", job_id).returncode == 0

    with sqlite3.connect(cli.db) as conn:
        run_ns = [r[0] for r in conn.execute("SELECT n FROM runs WHERE job_id = ?", (job_id,))]
    marks = ",".join("?" * len(run_ns))
    events_of_job = f"SELECT count(*) FROM events WHERE run_n IN ({marks})"
    assert _count(cli, events_of_job, *map(str, run_ns)) > 0

    result = cli.run("delete", job_id, "--yes")
    assert result.returncode == 0, result.stderr
    assert f"Deleted job {job_id}" in result.stdout
    assert "1 run" in result.stdout and "messages" in result.stdout

    assert _count(cli, events_of_job, *map(str, run_ns)) == 0
    for table in ("runs", "messages", "tool_calls", "input_requests", "checkpoints"):
        assert _count(cli, f"SELECT count(*) FROM {table} WHERE job_id = ?", job_id) == 0, table
    assert _count(cli, "SELECT count(*) FROM jobs WHERE id = ?", job_id) == 0
    assert _count(cli, "SELECT count(*) FROM draft_parts WHERE run_id = ?", run_id) == 0
    hits = _search(cli, word)
    assert job_id not in hits and kept_job in hits
    # The search index holds exactly one row per remaining message.
    assert _count(cli, "SELECT count(*) FROM messages_fts") == _count(
        cli, "SELECT count(*) FROM messages"
    )
    with sqlite3.connect(cli.db) as conn:
        register_functions(conn)  # the index reads its text through the store's function
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        conn.execute("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')")
    assert kept_run in _listed_run_ids(cli)
    assert cli.run("show", run_id).returncode == 2


def test_archive_of_an_unknown_job_is_one_clear_line(cli: Cli) -> None:
    cli.make_database()
    result = cli.run("archive", "job_nope")
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "job_nope" in result.stderr


def test_archiving_and_bringing_back_a_job_are_in_the_event_log(cli: Cli) -> None:
    job_id, run_id = _finished_job(cli)
    assert cli.run("archive", job_id).returncode == 0
    assert cli.run("unarchive", job_id).returncode == 0
    plain = cli.run("events")
    assert plain.returncode == 0, plain.stderr
    lines = [line for line in plain.stdout.splitlines() if "job_archived" in line]
    assert [line.split(" ", 1)[1] for line in lines] == [
        f"job_archived job {job_id} archived",
        f"job_archived job {job_id} brought back (unarchived)",
    ]
    as_json = [
        e for e in json_lines(cli.run("events", "--json").stdout) if e["kind"] == "job_archived"
    ]
    assert [(e["job_id"], e["run_id"], e["archived"]) for e in as_json] == [
        (job_id, run_id, True),
        (job_id, run_id, False),
    ]
