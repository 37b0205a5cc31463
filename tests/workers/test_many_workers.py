"""Three worker processes and two client processes on one database, SQLite or PostgreSQL
(issue 14, "must show"): every run is executed by exactly one worker at a time, clients execute
nothing, all runs complete, and a worker killed with ``kill -9`` mid-run loses its runs to the
others with no side-effect tool run twice. On PostgreSQL the clients queue 60 demo runs."""

from __future__ import annotations

import dataclasses
import json
import signal
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.cli.harness import Cli
from tests.workers.procs import Proc, client, query, worker

DEADLINE = 180.0
DEMO_RUNS = {"sqlite": 12, "postgresql": 30}
"""Demo runs per client (each asks a question and an approval, and writes a file)."""
STREAM_RUNS = 2
STREAM_KIB = 400
"""A long instant answer: the window in which a worker is killed mid-run (mid model call)."""


@pytest.fixture(params=sorted(DEMO_RUNS))
def database(request: pytest.FixtureRequest, cli: Cli) -> tuple[str, Cli]:
    """The backend's name and the CLI harness on it (``cli.db`` a file or a URL)."""
    if request.param == "postgresql":
        url: Any = request.getfixturevalue("pg_database")
        return request.param, dataclasses.replace(cli, db=url)
    cli.db.parent.mkdir(parents=True, exist_ok=True)
    return request.param, cli


def _project(root: Path, name: str) -> Path:
    folder = root / name
    (folder / "src").mkdir(parents=True)
    (folder / "README.md").write_text(f"# {name}\n\nTODO: write more.\n")
    (folder / "src" / "main.py").write_text("print('hello')\n")
    return folder


def _victim_held_safely(cli: Cli, owner_id: str) -> bool:
    """The (stopped) worker holds a running run, and none of its runs is inside a tool with
    side effects (whose outcome would become unknown, and the run fail, by design)."""
    running = query(
        cli.db, "SELECT id FROM runs WHERE owner_id = ? AND state = 'running'", owner_id
    )
    in_doubt = query(
        cli.db,
        "SELECT t.id FROM tool_calls AS t JOIN runs AS r ON r.id = t.run_id"
        " WHERE r.owner_id = ? AND r.state = 'running' AND t.state = 'running'"
        " AND NOT t.idempotent",
        owner_id,
    )
    return bool(running) and not in_doubt


def _kill_mid_run(cli: Cli, workers: dict[str, Proc]) -> tuple[str, list[str]]:
    """kill -9 a worker while it streams a long answer (whichever worker took one), or, once
    the long answers are done (a fast machine streams them before the kill begins), while it
    executes any other run outside a side-effect tool. Returns its owner id and the runs it
    held then."""
    deadline = time.monotonic() + DEADLINE
    while True:
        assert time.monotonic() < deadline, "no worker was seen executing a run"
        running = query(
            cli.db,
            "SELECT owner_id FROM runs WHERE state = 'running'"
            " ORDER BY input LIKE '/stream %' DESC",
        )
        if not running:
            time.sleep(0.01)  # another process's progress: look again, bounded by the deadline
            continue
        owner_id = str(running[0][0])
        victim = workers[owner_id]
        victim.signal(signal.SIGSTOP)
        if _victim_held_safely(cli, owner_id):
            held = [
                row[0]
                for row in query(
                    cli.db, "SELECT id FROM runs WHERE owner_id = ? AND state = 'running'", owner_id
                )
            ]
            victim.signal(signal.SIGKILL)
            victim.finish(timeout=10)
            return owner_id, held
        victim.signal(signal.SIGCONT)


def _events(cli: Cli) -> list[dict[str, Any]]:
    listed = cli.run("events", "--json", timeout=60)
    assert listed.returncode == 0, listed.stderr
    return [json.loads(line) for line in listed.stdout.splitlines()]


@pytest.mark.timeout(480)
async def test_three_workers_and_two_clients_execute_every_run_once_at_a_time(
    database: tuple[str, Cli], tmp_path: Path
) -> None:
    backend, cli = database
    demo_runs = DEMO_RUNS[backend]
    root = tmp_path / "projects"
    workspaces = [_project(root, "alpha"), _project(root, "beta")]
    procs: list[Proc] = []
    try:
        workers = [
            worker(cli, f"worker{n}", "--concurrency", "3", "--root", str(root)) for n in range(3)
        ]
        procs += workers
        clients = [
            client(cli, f"client{n}", workspaces[n], demo_runs, STREAM_RUNS, STREAM_KIB)
            for n in range(2)
        ]
        procs += clients
        owners = {
            w.items[w.wait_for(lambda i: i["kind"] == "worker_started", timeout=60)]["owner_id"]: w
            for w in workers
        }
        total = 2 * (demo_runs + STREAM_RUNS)
        for c in clients:  # every run created (the long answers first): the kill starts now
            index = -1
            for _ in range(demo_runs + STREAM_RUNS):
                index = c.wait_for(lambda i: i["kind"] == "created", timeout=60, start=index + 1)

        def created() -> list[dict[str, Any]]:
            return [i for c in clients for i in c.items if i["kind"] == "created"]

        assert len(created()) == total
        victim_id, held_at_kill = _kill_mid_run(cli, owners)
        victim = owners[victim_id]
        assert held_at_kill

        for c in clients:
            done = c.items[c.wait_for(lambda i: i["kind"] == "done", timeout=DEADLINE)]
            assert done["states"] == ["completed"], c.stderr()[-3000:]
            assert c.finish(timeout=30) == 0
        survivors = [w for w in workers if w is not victim]
        for w in survivors:
            w.signal(signal.SIGTERM)
        for w in survivors:
            assert w.finish(timeout=60) == 0, w.stderr()[-2000:]
            assert w.items[-1]["kind"] == "worker_stopped"
    finally:
        for proc in procs:
            proc.kill()
            # Shown by pytest only when the test fails: what each process said.
            print(f"--- {proc.name} stderr ---\n{proc.stderr()[-3000:]}")
            print(f"--- {proc.name} last lines ---\n{proc.items[-5:]}")

    run_ids = {i["run_id"] for i in created()}
    states = dict(query(cli.db, "SELECT id, state FROM runs WHERE parent_run_id IS NULL"))
    assert set(states) == run_ids and set(states.values()) == {"completed"}

    # Only the workers ever held an owner lease: the clients created and answered, nothing more.
    assert {row[0] for row in query(cli.db, "SELECT owner_id FROM owners")} == set(owners)

    # Every claim in the log is one a worker reported; between two claims of a run its holder
    # let go of it (or was recovered): one execution at a time, each by exactly one worker.
    claimed_by = {
        i["seq"]: owner
        for owner, w in owners.items()
        for i in w.items
        if i["kind"] == "worker_claimed"
    }
    released_by = {
        i["seq"]: owner
        for owner, w in owners.items()
        for i in w.items
        if i["kind"] == "worker_released" and "seq" in i
    }
    events = _events(cli)
    # The victim may have been stopped between committing a claim and printing it: a claim
    # no worker reported is the victim's only if it is of a run the victim held at the kill,
    # and that run's execution then ended in the recovery (put back in the queue, interrupted).
    recovered_at = {
        e["run_id"]: e["seq"]
        for e in events
        if e["kind"] == "run_state_changed"
        and (e["from"], e["to"]) == ("running", "queued")
        and e.get("interrupted")
        and e["run_id"] in held_at_kill
    }
    holders: dict[str, str | None] = defaultdict(lambda: None)
    executions: Counter[str] = Counter()
    executed_by: dict[str, set[str]] = defaultdict(set)
    for event in events:
        if event["kind"] != "run_state_changed":
            continue
        run_id = event["run_id"]
        if event["to"] == "running":
            assert holders[run_id] is None, f"run {run_id} claimed while held"
            claimer = claimed_by.get(event["seq"])
            if claimer is None:
                unreported_by_victim = event["seq"] < recovered_at.get(run_id, -1)
                assert unreported_by_victim, f"claim {event['seq']} of run {run_id} by no worker"
                claimer = victim_id
            holders[run_id] = claimer
            executions[run_id] += 1
            executed_by[run_id].add(claimer)
        elif event["from"] == "running":
            assert holders[run_id] is not None
            if event["seq"] in released_by:
                assert released_by[event["seq"]] == holders[run_id]
            holders[run_id] = None
    assert all(holder is None for holder in holders.values())
    assert set(executions) == run_ids
    assert len({owner for owners_of in executed_by.values() for owner in owners_of}) == 3

    # The runs the victim held when it was killed finished on another worker.
    for run_id in held_at_kill:
        assert executed_by[run_id] - {victim_id}, f"run {run_id} never moved off the victim"
    # ...after recovery put them back in the queue (by whichever process noticed first).
    requeued = {
        e["run_id"]
        for e in events
        if e["kind"] == "run_state_changed"
        and (e["from"], e["to"]) == ("running", "queued")
        and e.get("interrupted")
        and e.get("reason") is None
    }
    assert requeued >= set(held_at_kill)

    # No tool with side effects ran twice: each write_file call started once, one per demo run.
    started = Counter(
        e["tool_call_id"]
        for e in events
        if e["kind"] == "tool_state_changed" and e["name"] == "write_file" and e["to"] == "running"
    )
    assert set(started.values()) == {1}
    writes = query(
        cli.db,
        "SELECT run_id, count(*) FROM tool_calls WHERE name = 'write_file' AND state = 'completed'"
        " GROUP BY run_id",
    )
    assert len(writes) == 2 * demo_runs and {count for _, count in writes} == {1}
