"""Runs a kill or a crash left, from the command line (new-user trials).

Before anything recovers them, the commands that only read (`runs`, `show`, `doctor`) cannot
change them, but they can tell: the run's owner is provably gone (its pid is dead on this host,
or its lease ran out on another), as recovery decides it. Once recovered, such a run waits for
a retry, and `retry` / `follow-up` of its job say so instead of "is queued; wait for it".
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from runtime.api import Runtime
from runtime.clock import ManualClock
from runtime.config import Config
from runtime.models import Run, RunState
from runtime.store.sqlite import SqliteStore
from tests.cli.harness import Cli, LineStream, json_lines, kill_hard
from tests.store.helpers import new_run, running_run
from tui import cli as cli_module
from tui._cli.listing import OWNER_GONE
from tui._cli.parser import build_parser

pytestmark = pytest.mark.slow

GONE_LABEL = "running (process gone)"
"""In the tables; ``show`` explains it (``OWNER_GONE``)."""


def _contents(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table (the owners' leases too), read without writing. Not compared:
    the file's bytes and the search index (``messages_fts*``), which the runtime's store brings
    up to date and checkpoints when it closes, even opened read-only (derived data; no row of
    a run, job, message, owner or event changes)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        tables = [
            name
            for (name,) in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'"
                " AND name NOT LIKE 'messages_fts%' AND name NOT LIKE 'sqlite_%' ORDER BY name"
            )
        ]
        return {
            table: conn.execute(f'SELECT * FROM "{table}" ORDER BY 1').fetchall()
            for table in tables
        }
    finally:
        conn.close()


def _killed_while_running(cli: Cli) -> str:
    """``agent-tui run`` killed with SIGKILL while the demo model streams (its process reaped,
    so its pid is dead); the run's id."""
    proc = cli.spawn("run", "summarise this folder", "--model", "demo", "--json")
    stream = LineStream(proc)
    try:
        seen = stream.json_until(lambda item, lines: item["kind"] == "message_delta")
    finally:
        kill_hard(proc)
    run_id: str = seen[0]["run_id"]
    return run_id


def _full_path(cli: Cli, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``agent-tui ARGS`` through the runtime, opened read-only (not the fast ``runs``)."""
    parsed = build_parser().parse_args(["--db", str(cli.db), *args])
    code = asyncio.run(cli_module._run_command(parsed, cli.db, cli.workspace))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _line_of(table: str, run_id: str) -> str:
    [line] = [line for line in table.splitlines() if line.startswith(run_id)]
    return line


async def _open_and_close(cli: Cli) -> None:
    """What an agent-tui that may execute runs does on open: recover the runs of gone owners."""
    runtime = await Runtime.open(
        db_path=cli.db, workspace=cli.workspace, config=Config(), model="demo", env={}
    )
    await runtime.close()


def test_after_a_kill_the_read_only_commands_say_the_process_is_gone_and_write_nothing(
    cli: Cli, capsys: pytest.CaptureFixture[str]
) -> None:
    run_id = _killed_while_running(cli)
    before = _contents(cli.db)

    table = cli.run("runs")
    assert table.returncode == 0, table.stderr
    assert GONE_LABEL in _line_of(table.stdout, run_id)
    [listed] = json_lines(cli.run("runs", "--json").stdout)
    assert (listed["id"], listed["state"], listed["owner_gone"]) == (run_id, "running", True)
    # The fast path (no runtime) and the runtime's path say the same.
    assert _full_path(cli, capsys, "runs") == (0, table.stdout, "")
    assert _full_path(cli, capsys, "runs", "--json")[1] == cli.run("runs", "--json").stdout

    interrupted = cli.run("runs", "--state", "interrupted", "--json")
    assert [(r["id"], r["owner_gone"]) for r in json_lines(interrupted.stdout)] == [(run_id, True)]
    assert GONE_LABEL in cli.run("runs", "--state", "interrupted").stdout

    # A short state in the table (the whole sentence made every row over 200 wide).
    assert max(len(line) for line in table.stdout.splitlines()) <= 160
    shown = cli.run("show", run_id)
    assert shown.returncode == 0, shown.stderr
    assert f"  state:   running ({OWNER_GONE})\n" in shown.stdout
    data = json.loads(cli.run("show", run_id, "--json").stdout)
    assert (data["run"]["state"], data["owner_gone"]) == ("running", True)

    doctor = cli.run("doctor")
    assert doctor.returncode == 1, doctor.stdout + doctor.stderr
    assert f"  error: run {run_id} (running): {OWNER_GONE}; resume it with: " in doctor.stdout
    assert f" retry {run_id}\n" in doctor.stdout
    assert "All fine." not in doctor.stdout

    assert _contents(cli.db) == before  # nothing was recovered, nothing was written

    # An agent-tui that may execute runs recovers it on open: from then on it is interrupted,
    # and its process is no longer said to be gone (nothing names it any more).
    asyncio.run(_open_and_close(cli))
    [listed] = json_lines(cli.run("runs", "--json").stdout)
    assert (listed["state"], listed["interrupted"], listed["owner_gone"]) == ("queued", True, False)
    assert "interrupted (waits for retry)" in _line_of(cli.run("runs").stdout, run_id)
    assert json.loads(cli.run("show", run_id, "--json").stdout)["owner_gone"] is False
    assert cli.run("doctor").returncode == 0


async def _claimed_by_other_hosts(cli: Cli) -> tuple[Run, Run]:
    """Two runs running on another host: one whose owner's lease ran out an hour ago, one whose
    owner renews its lease (its pid cannot be checked from here)."""
    cli.db.parent.mkdir(parents=True, exist_ok=True)
    runs = []
    for owner, lease_from in (
        ("elsewhere:4242:x-expired", time.time() - 3600),
        ("elsewhere:4343:x-live", time.time()),
    ):
        store = SqliteStore(cli.db, clock=ManualClock(start=lease_from))
        await store.open()
        try:
            await store.register_owner(owner, lease_seconds=600)
            run, token = await running_run(store, owner_id=owner, workspace=str(cli.workspace))
            await store.save_draft(run.id, token=token, message_id="m", text="The answer so")
            runs.append(run)
        finally:
            await store.close()
    return runs[0], runs[1]


def test_a_run_whose_owner_on_another_host_let_its_lease_expire_is_shown_as_gone(
    cli: Cli,
) -> None:
    expired, live = asyncio.run(_claimed_by_other_hosts(cli))
    before = _contents(cli.db)

    listed = {row["id"]: row["owner_gone"] for row in json_lines(cli.run("runs", "--json").stdout)}
    assert listed == {expired.id: True, live.id: False}
    table = cli.run("runs").stdout
    assert GONE_LABEL in _line_of(table, expired.id)
    assert _line_of(table, live.id).split()[1] == "running"
    interrupted = cli.run("runs", "--state", "interrupted", "--json").stdout
    assert [row["id"] for row in json_lines(interrupted)] == [expired.id]
    assert json.loads(cli.run("show", expired.id, "--json").stdout)["owner_gone"] is True
    assert json.loads(cli.run("show", live.id, "--json").stdout)["owner_gone"] is False
    # What a gone process streamed is a partial answer, not an answer being streamed now
    # (found by a new-user trial: `show` said both "its process is gone" and "streaming").
    gone_shown, live_shown = (cli.run("show", run.id).stdout for run in (expired, live))
    assert "partial answer — the run was interrupted before it finished" in gone_shown
    assert "streaming it now" not in gone_shown
    assert "the answer so far — the run is streaming it now" in live_shown
    doctor = cli.run("doctor").stdout
    assert f"error: run {expired.id} (running)" in doctor and live.id not in doctor
    assert _contents(cli.db) == before


def test_export_keeps_what_a_gone_process_streamed_as_show_does(cli: Cli) -> None:
    """Found by a trial of several processes on one database: after `kill -9` of the process
    streaming an answer, `show` printed the answer cut short but `export` (Markdown and JSON)
    left it out, as if the run still streamed it, until another agent-tui recovered the run."""
    expired, live = asyncio.run(_claimed_by_other_hosts(cli))
    before = _contents(cli.db)

    exported = cli.run("export", expired.job_id)
    assert exported.returncode == 0, exported.stderr
    assert "### Assistant (partial)" in exported.stdout
    assert "the run was interrupted before it finished" in exported.stdout
    assert exported.stdout.rstrip().endswith("The answer so")
    data = json.loads(cli.run("export", expired.job_id, "--format", "json").stdout)
    [run] = data["runs"]
    assert (run["partial_answer"]["text"], run["partial_answer"]["streaming"]) == (
        "The answer so",
        False,
    )
    # A run its process still streams: its draft is live text, not a partial answer.
    assert "(partial)" not in cli.run("export", live.job_id).stdout
    [run] = json.loads(cli.run("export", live.job_id, "--format", "json").stdout)["runs"]
    assert run["partial_answer"] is None
    assert _contents(cli.db) == before


async def _cancelled_then_interrupted(cli: Cli) -> tuple[Run, Run]:
    """A job whose first run was cancelled and whose newer run a crash interrupted (queued by a
    process that died before running it, then recovered when agent-tui opened)."""
    cli.db.parent.mkdir(parents=True, exist_ok=True)
    runtime = await Runtime.open(
        db_path=cli.db, workspace=cli.workspace, config=Config(), model="demo:instant", env={}
    )
    try:
        first = await runtime.start("hello")
        await runtime.wait(first.id, timeout=60)  # the demo asks a question
        first = await runtime.cancel(first.id, reason="not now")
    finally:
        await runtime.close()
    store = SqliteStore(cli.db)
    await store.open()
    try:
        newer = await store.create_run(
            new_run(
                "and now?",
                job_id=first.job_id,
                workspace=str(cli.workspace),
                owner_id="elsewhere:1:x-crashed",
            )
        )
    finally:
        await store.close()
    await _open_and_close(cli)
    return first, newer


def _rows(db: Path) -> dict[str, Any]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return {
            table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("jobs", "runs", "messages", "events")
        }


def test_retrying_an_old_run_of_a_job_whose_newer_run_waits_for_retry_names_it_interrupted(
    cli: Cli,
) -> None:
    first, newer = asyncio.run(_cancelled_then_interrupted(cli))
    assert first.state is RunState.CANCELLED
    assert "interrupted (waits for retry)" in _line_of(cli.run("runs").stdout, newer.id)
    counts = _rows(cli.db)

    # The database is not the default one (--db): the command names it, or it opens another.
    command = f"agent-tui --db {cli.db.resolve()}"
    refusal = (
        f"agent-tui: error: run {newer.id} of job {first.job_id} was interrupted and waits for a"
        f" retry; retry that one ({command} retry {newer.id}) or cancel it first\n"
    )
    retried = cli.run("retry", first.id)
    assert (retried.returncode, retried.stdout, retried.stderr) == (2, "", refusal)
    followed = cli.run("follow-up", first.job_id, "and then?")
    assert (followed.returncode, followed.stdout, followed.stderr) == (2, "", refusal)
    assert _rows(cli.db) == counts  # nothing was created


def test_respond_and_archive_call_an_interrupted_run_interrupted_and_say_how_to_go_on(
    cli: Cli,
) -> None:
    """They said "it is queued" and "let it finish", which never happens to a run that waits
    for a retry (found by a new-user trial)."""
    first, newer = asyncio.run(_cancelled_then_interrupted(cli))
    counts, before = _rows(cli.db), _contents(cli.db)
    command = f"agent-tui --db {cli.db.resolve()}"  # not the default database
    go_on = f"retry it ({command} retry {newer.id}) or cancel it ({command} cancel {newer.id})"

    answered = cli.run("respond", newer.id, "yes")
    assert (answered.returncode, answered.stdout, answered.stderr) == (
        2,
        "",
        f"agent-tui: error: run {newer.id} is not waiting for input: it was interrupted and"
        f" waits for a retry, so there is nothing to answer; {go_on}\n",
    )
    archived = cli.run("archive", first.job_id)
    assert (archived.returncode, archived.stdout, archived.stderr) == (
        2,
        "",
        f"agent-tui: error: job {first.job_id} has a run that was interrupted and waits for a"
        f" retry ({newer.id}); {go_on} before archiving\n",
    )
    assert _rows(cli.db) == counts and _contents(cli.db) == before  # nothing was changed


def test_the_commands_a_refusal_names_open_the_database_given_with_db(cli: Cli) -> None:
    """The runtime's "retry it (agent-tui retry ID) or cancel it (agent-tui cancel ID)" said
    no --db: typed in a shell, it opened the default database and found no such run."""
    _, newer = asyncio.run(_cancelled_then_interrupted(cli))
    refused = cli.run("respond", newer.id, "yes")
    found = re.search(r"cancel it \((agent-tui [^()]*) cancel ([0-9a-f]+)\)", refused.stderr)
    assert found is not None, refused.stderr
    command = shlex.split(found.group(1))
    assert command == ["agent-tui", "--db", str(cli.db.resolve())]
    cancelled = cli.run(*command[1:], "cancel", found.group(2), global_options=False)
    assert cancelled.returncode == 0, cancelled.stderr
    with sqlite3.connect(f"file:{cli.db}?mode=ro", uri=True) as conn:
        [state] = conn.execute("SELECT state FROM runs WHERE id = ?", (newer.id,)).fetchone()
    assert state == RunState.CANCELLED.value


def test_runs_state_queued_lists_the_runs_about_to_start_and_interrupted_ones_only_as_interrupted(
    cli: Cli, capsys: pytest.CaptureFixture[str]
) -> None:
    """`runs --state queued` listed a run that waits for a retry, labelled interrupted; now
    `--state interrupted` lists it, and `--state queued` the runs about to start, through the
    fast path and the runtime's alike (which pages past the interrupted ones)."""
    detached = cli.run("run", "for a worker", "--detach", "--model", "demo:instant")
    assert detached.returncode == 0, detached.stderr
    waiting_for_a_worker = detached.stdout.strip()
    _, interrupted = asyncio.run(_cancelled_then_interrupted(cli))  # the newer one

    def listed(*args: str) -> tuple[list[str], list[str]]:
        """The ids ``runs ARGS --json`` lists: through the fast path, then the runtime's."""
        fast = cli.run("runs", *args, "--json")
        full = _full_path(cli, capsys, "runs", *args, "--json")
        assert (fast.returncode, full[0]) == (0, 0), fast.stderr + full[2]
        return [row["id"] for row in json_lines(fast.stdout)], [
            row["id"] for row in json_lines(full[1])
        ]

    for options in ([], ["--archived"], ["--limit", "1"]):
        queued = listed("--state", "queued", *options)
        assert queued == ([waiting_for_a_worker], [waiting_for_a_worker]), options
    assert listed("--state", "interrupted") == ([interrupted.id], [interrupted.id])
    table = cli.run("runs", "--state", "queued").stdout
    assert interrupted.id not in table and waiting_for_a_worker in table
    for everything in listed():
        assert interrupted.id in everything and waiting_for_a_worker in everything
