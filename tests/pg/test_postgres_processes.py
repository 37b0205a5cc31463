"""Several processes on one PostgreSQL database: migrations applied once, and commits in one
process wake observers in another (LISTEN/NOTIFY) without waiting for a poll."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import asyncpg
import pytest

from runtime.events import RunStateChanged
from runtime.store.base import NewRun
from runtime.store.pg_schema import LATEST_VERSION
from runtime.store.postgres import PostgresStore

CHILD = Path(__file__).with_name("child.py")
ROOT = Path(__file__).resolve().parents[2]


async def _spawn(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        str(CHILD),
        *args,
        cwd=ROOT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def _line(proc: asyncio.subprocess.Process) -> str:
    assert proc.stdout is not None
    line = (await proc.stdout.readline()).decode()
    if not line:
        err = await proc.stderr.read() if proc.stderr else b""
        pytest.fail(f"child exited early: {err.decode()[-2000:]}")
    return line


async def _go(proc: asyncio.subprocess.Process) -> None:
    assert proc.stdin is not None
    proc.stdin.write(b"go\n")
    await proc.stdin.drain()


async def test_two_processes_starting_at_once_on_a_fresh_database_migrate_it_once(
    pg_database: str,
) -> None:
    async with asyncio.timeout(120):
        first, second = await _spawn("open", pg_database), await _spawn("open", pg_database)
        # Both are up (interpreters loaded) before either opens: then they open together.
        await asyncio.gather(_go(first), _go(second))
        outputs = [json.loads(await _line(proc)) for proc in (first, second)]
        codes = [await proc.wait() for proc in (first, second)]

    assert codes == [0, 0]
    applied = sorted((o["applied"] for o in outputs), key=len)
    assert applied == [[], list(range(1, LATEST_VERSION + 1))]
    conn = await asyncpg.connect(pg_database)
    try:
        rows = await conn.fetch("SELECT version FROM agent_tui.agent_tui_migrations")
        tables = await conn.fetchval(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'agent_tui'"
        )
    finally:
        await conn.close()
    assert [r["version"] for r in rows] == list(range(1, LATEST_VERSION + 1))
    assert tables > 10
    # The database works for both afterwards: a third opener migrates nothing.
    store = PostgresStore(pg_database)
    await store.open()
    try:
        assert store.applied_migrations == []
        assert await store.last_seq() == 0
    finally:
        await store.close()


async def test_a_commit_in_another_process_wakes_a_listening_store(pg_database: str) -> None:
    woken: asyncio.Queue[int] = asyncio.Queue()
    store = PostgresStore(pg_database)
    store.on_remote_commit(woken.put_nowait)  # before open: listening once open returns
    await store.open()
    try:
        async with asyncio.timeout(120):
            child = await _spawn("create", pg_database)
            assert await _line(child) == "ready\n"
            await _go(child)
            created = json.loads(await _line(child))
            assert await child.wait() == 0
            seq = await woken.get()
        assert seq == created["seq"] == await store.last_seq()
        [first, *_] = await store.read_events(after=0)
        assert first.run_id == created["run_id"]
    finally:
        await store.close()


async def test_an_observer_hears_another_process_commit_without_polling(
    pg_database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the poll interval at an hour, only the notice can wake the event pump."""
    from runtime import api
    from runtime.engine import pump

    monkeypatch.setattr(pump, "POLL_INTERVAL", 3600.0)
    runtime = await api.Runtime.open(
        db_path=pg_database, workspace=tmp_path, env={"HOME": str(tmp_path)}
    )
    try:
        async with asyncio.timeout(120):
            child = await _spawn("create", pg_database)
            assert await _line(child) == "ready\n"
            events = runtime.observe(after=await runtime.last_seq())
            # A run created here first: once the observer yields it, it is subscribed and
            # past its replay, so what comes next comes through the pump.
            local = await runtime.store.create_run(
                NewRun(agent="default", model="demo", input="here", workspace=str(tmp_path))
            )
            while (await anext(events)).run_id != local.id:
                pass
            await _go(child)
            created = json.loads(await _line(child))
            event = await anext(events)
            while event.run_id == local.id:  # the rest of the local run's events
                event = await anext(events)
            assert await child.wait() == 0
        assert isinstance(event, RunStateChanged)
        assert event.run_id == created["run_id"]
        await events.aclose()
    finally:
        await runtime.close()
