"""Ownership across processes (issue 12 point 1, DESIGN §4.4): only a process that executes
holds a lease; reading never writes; recovery requeues only runs whose owner is provably gone;
the lease renews even while the event loop is blocked."""

from __future__ import annotations

import asyncio
import os
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from subprocess import PIPE

import pytest

from runtime.api import Runtime
from runtime.clock import ManualClock
from runtime.config import Config
from runtime.errors import InvalidInput
from runtime.models import RunState
from runtime.owners import pid_alive, process_start, provably_gone
from runtime.store.base import NewRun
from runtime.store.sqlite import SqliteStore
from tests.fakes.scripted import ScriptedProvider, Turn

START = 1_800_000_000.0
HOST = socket.gethostname()


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=30)
    return child.pid


async def _seed_running_run(db: Path, workspace: Path, owner: str) -> str:
    """A running run of ``owner`` whose lease (10 s from START) is then left to run out."""
    store = SqliteStore(db, clock=ManualClock(START))
    await store.open()
    try:
        await store.register_owner(owner, lease_seconds=10)
        run = await store.create_run(
            NewRun(
                agent="default", model="demo", input="x", workspace=str(workspace), owner_id=owner
            )
        )
        await store.claim_run(run.id, owner_id=owner)
        return run.id
    finally:
        await store.close()


def _owners(db: Path) -> list[tuple[str, int, float]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT owner_id, released, lease_expires_at FROM owners ORDER BY owner_id"
        ).fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


async def _open(db: Path, workspace: Path, *, at: float, read_only: bool = False) -> Runtime:
    return await Runtime.open(
        db_path=db,
        workspace=workspace,
        config=Config(),
        model="scripted:test",
        providers=lambda ref: ScriptedProvider([Turn("done")]),
        clock=ManualClock(at),
        read_only=read_only,
    )


@pytest.mark.parametrize(
    ("who", "requeued"),
    [
        ("alive on this host", False),
        ("dead on this host", True),
        ("pid reused on this host", True),
    ],
)
async def test_a_run_is_requeued_only_when_its_owner_is_provably_gone(
    db_path: Path, workspace: Path, who: str, requeued: bool
) -> None:
    pid = _dead_pid() if who.startswith("dead") else __import__("os").getpid()
    start = process_start(pid) or "x"
    if who.startswith("pid reused"):
        start = "1"  # this pid now names a process that started long after the owner
    owner = f"{HOST}:{pid}:{start}-0wner000"
    run_id = await _seed_running_run(db_path, workspace, owner)
    runtime = await _open(db_path, workspace, at=START + 60)  # its lease ran out long ago
    try:
        run = await runtime.get_run(run_id)
    finally:
        await runtime.close()
    if requeued:
        assert (run.state, run.interrupted) == (RunState.QUEUED, True)
        assert runtime.recovery.requeued == [run_id]
    else:
        assert run.state is RunState.RUNNING and run.owner_id == owner
        assert runtime.recovery.requeued == []


def test_a_killed_owner_its_parent_has_not_collected_yet_is_gone(
    db_path: Path, workspace: Path
) -> None:
    # `kill -9` of an agent-tui whose parent does not reap it at once leaves a zombie: its pid
    # still answers signals, but it runs nothing. Recovery and the read-only commands took it
    # for alive.
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=PIPE)

    async def recovered(owner: str) -> list[str]:
        run_id = await _seed_running_run(db_path, workspace, owner)
        runtime = await _open(db_path, workspace, at=START + 60)
        try:
            assert runtime.recovery.requeued == [run_id]
            return runtime.recovery.requeued
        finally:
            await runtime.close()

    try:
        owner = f"{HOST}:{child.pid}:{process_start(child.pid) or 'x'}-0wner000"
        assert not provably_gone(owner, lease_live=True)
        child.kill()
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, not collected
        assert not pid_alive(child.pid)
        assert provably_gone(owner, lease_live=True)
        assert len(asyncio.run(recovered(owner))) == 1
    finally:
        child.kill()
        child.wait(timeout=30)
        assert child.stdin is not None
        child.stdin.close()


async def test_another_hosts_owner_is_recovered_once_its_lease_ran_out_not_before(
    db_path: Path, workspace: Path
) -> None:
    run_id = await _seed_running_run(db_path, workspace, "elsewhere:4242:x-0wner000")
    early = await _open(db_path, workspace, at=START + 5)
    try:
        assert (await early.get_run(run_id)).state is RunState.RUNNING
    finally:
        await early.close()
    late = await _open(db_path, workspace, at=START + 60)
    try:
        assert (await late.get_run(run_id)).state is RunState.QUEUED
    finally:
        await late.close()


async def test_opening_read_only_changes_no_byte_and_cannot_run_agents(
    db_path: Path, workspace: Path
) -> None:
    run_id = await _seed_running_run(db_path, workspace, f"{HOST}:{_dead_pid()}:x-0wner000")
    before = db_path.read_bytes()
    owners = _owners(db_path)
    reader = await _open(db_path, workspace, at=START + 60, read_only=True)
    try:
        assert reader.read_only
        runs = await reader.list_runs()
        assert [r.id for r in runs.items] == [run_id]
        assert (await reader.get_run(run_id)).state is RunState.RUNNING  # not recovered here
        with pytest.raises(InvalidInput, match="read-only"):
            await reader.start("do something")
        with pytest.raises(InvalidInput, match="read-only"):
            await reader.cancel(run_id)
    finally:
        await reader.close()
    assert _owners(db_path) == owners
    assert db_path.read_bytes() == before


async def test_the_owner_lease_is_taken_on_the_first_execution_not_at_open(
    db_path: Path, workspace: Path
) -> None:
    runtime = await _open(db_path, workspace, at=START)
    try:
        assert _owners(db_path) == []
        run = await runtime.start("hello")
        assert (await runtime.wait(run.id, timeout=15)).state is RunState.COMPLETED
        assert [o[0] for o in _owners(db_path)] == [runtime.owner_id]
    finally:
        await runtime.close()
    assert [o[1] for o in _owners(db_path)] == [1]  # released on close


async def test_the_lease_renews_while_the_event_loop_is_blocked(
    db_path: Path, workspace: Path
) -> None:
    runtime = await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=Config(),
        model="scripted:test",
        providers=lambda ref: ScriptedProvider([Turn("done")]),
        lease_seconds=0.6,
    )
    try:
        run = await runtime.start("hello")
        await runtime.wait(run.id, timeout=15)
        [(_, _, first)] = _owners(db_path)
        # Block this event loop (as a long render or a busy store queue would) and watch the
        # lease move on from the renewal thread all the same.
        deadline = time.monotonic() + 20
        renewed = first
        while renewed <= first and time.monotonic() < deadline:
            [(_, _, renewed)] = _owners(db_path)
        assert renewed > first
    finally:
        await runtime.close()


def test_a_busy_database_is_a_retry_for_the_renewer_not_a_lost_lease(db_path: Path) -> None:
    import asyncio

    async def seed() -> SqliteStore:
        store = SqliteStore(db_path)
        await store.open()
        await store.register_owner("me:1:x-1", lease_seconds=10)
        return store

    store = asyncio.run(seed())
    renewer = store.lease_renewer("me:1:x-1")
    blocker = sqlite3.connect(db_path, isolation_level=None)
    try:
        blocker.execute("PRAGMA busy_timeout = 0")
        blocker.execute("BEGIN IMMEDIATE")
        assert renewer.renew(10) == "busy"
        blocker.execute("ROLLBACK")
        assert renewer.renew(10) == "renewed"
        blocker.execute("UPDATE owners SET released = 1")
        assert renewer.renew(10) == "lost"
    finally:
        blocker.close()
        renewer.close()
        asyncio.run(store.close())


async def test_a_deliberate_close_marks_the_runs_it_stopped_as_stopped_not_crashed(
    db_path: Path, workspace: Path
) -> None:
    from runtime.runtime import CLOSED_REASON

    gate = asyncio.Event()  # never set: the model is mid-stream when the app closes
    provider = ScriptedProvider([Turn("a long answer that never ends", gate=gate)])
    runtime = await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=Config(),
        model="scripted:test",
        providers=lambda reference: provider,
    )
    run = await runtime.start("hello")
    async with asyncio.timeout(15):
        await provider.started.wait()
    await runtime.close()
    reader = await _open(db_path, workspace, at=time.time(), read_only=True)
    try:
        stopped = await reader.get_run(run.id)
        changes = [e for e in await reader.events(run_id=run.id) if e.kind == "run_state_changed"]
    finally:
        await reader.close()
    assert (stopped.state, stopped.interrupted) == (RunState.QUEUED, True)
    last = changes[-1]
    assert last.to_state is RunState.QUEUED  # type: ignore[union-attr]
    assert last.reason == CLOSED_REASON  # type: ignore[union-attr]
