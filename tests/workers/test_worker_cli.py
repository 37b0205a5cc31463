"""``agent-tui worker`` with clients in detach and attach mode (DESIGN §11, §15): clients
create and answer, workers execute; workspace roots; SIGTERM gives runs back at a step end."""

from __future__ import annotations

import contextlib
import json
import signal
import sqlite3
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli.harness import Cli, json_lines
from tests.fakes.anthropic_server import (
    message_delta,
    message_start,
    message_stop,
    spawn_fake_server,
    stream,
    text_block,
    text_response,
    tool_use_block,
)
from tests.workers.procs import Proc, ended_on_a_refusal, query, worker

TIMEOUT = 60.0


def _run_row(cli: Cli, run_id: str) -> dict[str, object]:
    columns = ("state", "owner_id", "detached", "interrupted", "step")
    [row] = query(cli.db, f"SELECT {', '.join(columns)} FROM runs WHERE id = ?", run_id)
    return dict(zip(columns, row, strict=True))


def _owners(cli: Cli) -> set[str]:
    return {row[0] for row in query(cli.db, "SELECT owner_id FROM owners")}


def _started(proc: Proc) -> str:
    return str(
        proc.items[proc.wait_for(lambda i: i["kind"] == "worker_started", timeout=TIMEOUT)][
            "owner_id"
        ]
    )


def test_run_detach_queues_the_run_for_a_worker_prints_its_id_and_holds_no_lease(
    cli: Cli,
) -> None:
    queued = cli.run("run", "--detach", "--model", "demo:instant", "look around")
    assert queued.returncode == 0, queued.stderr
    run_id = queued.stdout.strip()
    assert "for a worker" in queued.stderr
    assert _run_row(cli, run_id) == {
        "state": "queued",
        "owner_id": None,
        "detached": 1,
        "interrupted": 0,
        "step": 0,
    }
    assert _owners(cli) == set()

    as_json = cli.run("run", "--detach", "--json", "--model", "demo:instant", "again")
    [line] = json_lines(as_json.stdout)
    assert line["kind"] == "queued" and line["state"] == "queued"


def test_attach_mode_clients_create_and_answer_while_a_worker_executes(cli: Cli) -> None:
    cli.db.parent.mkdir(parents=True, exist_ok=True)
    executor = worker(cli, "worker")
    try:
        owner_id = _started(executor)
        started = cli.run("run", "--attach", "--json", "--model", "demo:instant", "look around")
        # Nobody at a terminal to answer: it stops at the question, exit 3, the run waits.
        assert started.returncode == 3, started.stderr
        lines = json_lines(started.stdout)
        boundary = lines[-1]
        assert boundary["kind"] == "boundary" and boundary["state"] == "input_required"
        run_id = boundary["run_id"]
        assert any(e["kind"] == "message_committed" for e in lines)  # it watched the worker

        asked = cli.run("respond", run_id, "1", "--json")
        assert asked.returncode == 3, asked.stderr  # then the approval to write the notes
        assert json_lines(asked.stdout)[-1]["request"]["kind"] == "approval"
        finished = cli.run("respond", run_id, "allow")
        assert finished.returncode == 0, finished.stderr
        assert "## Summary" in finished.stdout and "worker goes on" in finished.stderr

        claims = [i for i in executor.items if i["kind"] == "worker_claimed"]
        assert [i["run_id"] for i in claims] == [run_id] * 3
        assert _run_row(cli, run_id)["state"] == "completed"

        # A follow-up in a worker's job is the workers' too; `follow-up` watches it.
        [(job_id,)] = query(cli.db, "SELECT job_id FROM runs WHERE id = ?", run_id)
        more = cli.run("follow-up", job_id, "search for TODO", "--json")
        assert more.returncode == 0, more.stderr
        next_run = json_lines(more.stdout)[-1]["run_id"]
        assert next_run != run_id and _run_row(cli, next_run)["detached"] == 1
        claimed = [i["run_id"] for i in executor.items if i["kind"] == "worker_claimed"]
        assert claimed[-1] == next_run
        assert _owners(cli) == {owner_id}  # the clients never held a lease
        executor.signal(signal.SIGTERM)
        assert executor.finish(timeout=TIMEOUT) == 0
    finally:
        executor.kill()


def test_respond_detach_answers_and_returns_while_the_worker_goes_on(cli: Cli) -> None:
    cli.db.parent.mkdir(parents=True, exist_ok=True)
    executor = worker(cli, "worker")
    try:
        _started(executor)
        started = cli.run("run", "--attach", "--json", "--model", "demo:instant", "look")
        run_id = json_lines(started.stdout)[-1]["run_id"]
        answered = cli.run("respond", run_id, "2", "--detach", "--json")
        assert answered.returncode == 0, answered.stderr
        assert json_lines(answered.stdout) == [
            {"kind": "answered", "run_id": run_id, "state": "queued"}
        ]
        # Who goes on with it, not a bare "(queued)" (a trial's complaint).
        [said] = answered.stderr.splitlines()
        assert said.startswith(f"Answered run {run_id}; it is queued for the workers again,")
        assert "(queued)" not in said and f"show {run_id}" in said
        executor.wait_for(
            lambda i: i["kind"] == "worker_released" and i.get("state") == "input_required",
            timeout=TIMEOUT,
            start=len([i for i in executor.items if i["kind"] == "worker_released"]),
        )
    finally:
        executor.kill()


def test_a_worker_leaves_runs_outside_its_roots_for_another_and_says_so(
    cli: Cli, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "README.md").write_text("# elsewhere\n")
    queued = cli.run(
        "--workspace", str(elsewhere), "run", "--detach", "--model", "demo:instant", "/stream 1"
    )
    run_id = queued.stdout.strip()
    cli.db.parent.mkdir(parents=True, exist_ok=True)
    narrow = worker(cli, "narrow", "--root", str(cli.workspace))
    wide: Proc | None = None
    try:
        narrow_id = _started(narrow)
        skipped = narrow.items[
            narrow.wait_for(lambda i: i["kind"] == "worker_skipped", timeout=TIMEOUT)
        ]
        assert skipped["run_id"] == run_id
        assert "not under this worker's roots" in skipped["text"]
        assert _run_row(cli, run_id)["state"] == "queued"

        wide = worker(cli, "wide", "--root", str(elsewhere))
        wide.wait_for(
            lambda i: i["kind"] == "worker_released" and i.get("state") == "completed",
            timeout=TIMEOUT,
        )
        assert _run_row(cli, run_id)["state"] == "completed"
        assert not [i for i in narrow.items if i["kind"] == "worker_claimed"]
        assert narrow_id not in {
            row[0] for row in query(cli.db, "SELECT owner_id FROM runs WHERE id = ?", run_id)
        }
    finally:
        narrow.kill()
        if wide is not None:
            wide.kill()


def _eventually(condition: Callable[[], object], *, timeout: float = TIMEOUT) -> None:
    """Until ``condition()`` holds (another process's file), bounded."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_sigterm_lets_the_step_finish_then_gives_the_run_back_to_another_worker(
    cli: Cli, tmp_path: Path, signum: signal.Signals
) -> None:
    """SIGHUP (the terminal the worker was started in closed) is as SIGTERM."""
    listing = json.dumps({"path": "."})
    script = [
        stream(
            [
                message_start(input_tokens=20),
                *text_block(0, ["Listing ", "first."]),
                {"gate": "step1"},  # the worker is inside step 1 until the test lets it go
                *tool_use_block(1, "toolu_1", "list_dir", [listing]),
                message_delta("tool_use", output_tokens=10),
                message_stop(),
            ]
        ),
        text_response("All done."),
    ]
    with spawn_fake_server(script, directory=tmp_path) as server:
        cli.env = {**cli.env, "ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": server.base_url}
        queued = cli.run("run", "--detach", "--model", "anthropic:claude-test", "look around")
        run_id = queued.stdout.strip()
        cli.db.parent.mkdir(parents=True, exist_ok=True)
        first = worker(cli, "first")
        second: Proc | None = None
        try:
            first.wait_for(lambda i: i["kind"] == "worker_claimed", timeout=TIMEOUT)
            _eventually(lambda: len(server.requests()) == 1)  # step 1's model call is open
            first.signal(signum)
            first.wait_for(lambda i: i["kind"] == "worker_stopping", timeout=TIMEOUT)
            urllib.request.urlopen(
                urllib.request.Request(f"{server.base_url}/_fake/release/step1", method="POST"),
                timeout=TIMEOUT,
            ).close()
            assert first.finish(timeout=TIMEOUT) == 0, first.stderr()
            released = [i for i in first.items if i["kind"] == "worker_released"]
            assert [(i["run_id"], i["state"]) for i in released] == [(run_id, "queued")]
            row = _run_row(cli, run_id)
            assert row["state"] == "queued" and row["interrupted"] == 1
            assert row["owner_id"] is None and row["step"] == 1
            # The step it was in finished (message, tool, results, checkpoint); no other began.
            assert query(cli.db, "SELECT count(*) FROM checkpoints WHERE run_id = ?", run_id) == [
                (1,)
            ]
            assert query(cli.db, "SELECT name, state FROM tool_calls WHERE run_id = ?", run_id) == [
                ("list_dir", "completed")
            ]
            assert len(server.requests()) == 1

            second = worker(cli, "second")
            second.wait_for(
                lambda i: i["kind"] == "worker_released" and i.get("state") == "completed",
                timeout=TIMEOUT,
            )
            assert len(server.requests()) == 2
            assert query(cli.db, "SELECT count(*) FROM tool_calls WHERE run_id = ?", run_id) == [
                (1,)
            ]  # continued from the checkpoint, not started over
            assert _run_row(cli, run_id)["state"] == "completed"
        finally:
            first.kill()
            if second is not None:
                second.kill()


def test_a_worker_with_a_root_that_is_not_a_folder_says_so_and_exits_2(
    cli: Cli, tmp_path: Path
) -> None:
    result = cli.run("worker", "--root", str(tmp_path / "missing"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"agent-tui: error: --root {tmp_path / 'missing'} is not a folder"
    ]


def test_a_worker_started_without_db_names_the_default_database_it_serves(cli: Cli) -> None:
    """Found by a new-user trial: a worker whose ``--db postgresql://…`` was left out served
    the default SQLite file, and its first line ("executing queued runs under FOLDER") did not
    say so: it waited for ever for runs queued on PostgreSQL."""
    default = Path(cli.env["XDG_DATA_HOME"]) / "agent-tui" / "agent-tui.db"
    executor = Proc(
        cli.argv("--workspace", str(cli.workspace), "worker", "--json", global_options=False),
        cli=cli,
        name="worker",
    )
    try:
        started = executor.items[
            executor.wait_for(lambda i: i["kind"] == "worker_started", timeout=TIMEOUT)
        ]
        assert started["database"] == str(default)
        assert f"executing queued runs of {default} under {cli.workspace}" in started["text"]
        executor.signal(signal.SIGTERM)
        assert executor.finish(timeout=TIMEOUT) == 0, executor.stderr()
    finally:
        executor.kill()


def test_a_worker_whose_database_loses_a_table_ends_with_one_line_naming_it(cli: Cli) -> None:
    """Found by review: a worker waited out any database error as an outage, "cannot reach
    the database (…: no such table: runs)" every 10 s, for ever. Only a server that cannot be
    reached is waited for; a database that refuses (here a table renamed under it: SQLite has
    no outage, its file stays open) ends the worker in one line, exit status 2."""
    cli.db.parent.mkdir(parents=True, exist_ok=True)
    executor = worker(cli, "worker")
    try:
        _started(executor)
        with contextlib.closing(sqlite3.connect(cli.db, timeout=10)) as conn:
            conn.execute("ALTER TABLE runs RENAME TO runs_elsewhere")
            conn.commit()
        ended_on_a_refusal(executor, "no such table: runs")
    finally:
        executor.kill()


def test_a_worker_started_with_nohup_outlives_the_hangup_and_goes_on_working(cli: Cli) -> None:
    """``nohup`` (or a service manager whose reload sends SIGHUP) asks for the process to
    outlive its terminal: SIGHUP set to be ignored stays ignored. A worker under ``nohup``
    stopped at the hangup, as one whose terminal closed does."""
    cli.db.parent.mkdir(parents=True, exist_ok=True)
    detached = Proc(["nohup", *cli.argv("worker", "--json")], cli=cli, name="nohup")
    try:
        detached.wait_for(lambda i: i["kind"] == "worker_started", timeout=TIMEOUT)
        detached.signal(signal.SIGHUP)
        queued = cli.run("run", "--detach", "--model", "demo:instant", "/stream 1")  # 1 KiB, done
        run_id = queued.stdout.strip()
        detached.wait_for(
            lambda i: i["kind"] == "worker_claimed" and i.get("run_id") == run_id,
            timeout=TIMEOUT,
        )
        _eventually(lambda: _run_row(cli, run_id)["state"] == "completed")
        assert not [i for i in detached.items if i["kind"] == "worker_stopping"]
        detached.signal(signal.SIGTERM)  # it stops when asked to, as before
        assert detached.finish(timeout=TIMEOUT) == 0, detached.stderr()
    finally:
        detached.kill()
