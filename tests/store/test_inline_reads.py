"""Small reads of the SQLite store run on the caller's thread when the connection is free.

On the store's worker thread every row SQLite steps through gives the GIL up and has to win it
back; while the event loop's thread is busy (a run streaming flat out), each of those waits for
the interpreter's switch interval, and a page of a run took half a second to open. These tests
count how often a task that keeps the loop busy ran while a read was in flight: a read that
went to the worker lets it run again and again (tens of thousands of times for these three),
one done on the caller's thread once, at the one suspension point every store call keeps."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from runtime.clock import ManualClock
from runtime.store.sqlite import SqliteStore
from tests.store.helpers import assistant, running_run

MESSAGES = 100


async def _store_with_messages(tmp_path: Path) -> tuple[SqliteStore, str]:
    store = SqliteStore(tmp_path / "store.db", clock=ManualClock())
    await store.open()
    run, token = await running_run(store)
    for index in range(MESSAGES):
        await store.commit_message(run.id, token=token, message=assistant(f"Message {index}."))
    # Every CHECKPOINT_EVERY commits the worker indexes and checkpoints, holding the connection
    # (a read meanwhile rightly waits for it): let it finish, so the connection is free.
    await store._call(lambda conn: None)
    return store, run.id


async def test_a_page_of_a_run_is_read_without_waiting_for_a_task_that_keeps_the_loop_busy(
    tmp_path: Path,
) -> None:
    store, run_id = await _store_with_messages(tmp_path)
    spins = 0
    reading = asyncio.Event()
    done = False

    async def busy() -> None:
        # What a run streaming flat out does to the loop: Python work, yielding between pieces.
        nonlocal spins
        while not done:
            if reading.is_set():
                spins += 1
            sum(range(2_000))
            await asyncio.sleep(0)

    spinner = asyncio.create_task(busy())
    try:
        await asyncio.sleep(0)
        reading.set()
        messages = await store.list_messages(run_id, limit=MESSAGES + 1)
        run = await store.get_run(run_id)
        tool_calls = await store.list_tool_calls(run_id)
        reading.clear()
    finally:
        done = True
        await asyncio.wait_for(spinner, timeout=10)
        await store.close()
    # The run's task first, then what the assistant said.
    assert [m.content[0].text for m in messages[1:]] == [  # type: ignore[union-attr]
        f"Message {index}." for index in range(MESSAGES)
    ]
    assert run.id == run_id and tool_calls == []
    assert spins <= 3  # one per read


async def test_a_read_while_the_connection_is_in_use_waits_for_it_on_the_worker(
    tmp_path: Path,
) -> None:
    store, run_id = await _store_with_messages(tmp_path)
    holding = threading.Event()
    release = threading.Event()

    def hold_the_connection() -> None:
        # Another operation running on the connection (the worker's maintenance, say).
        with store._lock:
            holding.set()
            release.wait(timeout=30)

    holder = threading.Thread(target=hold_the_connection)
    holder.start()
    try:
        assert await asyncio.to_thread(holding.wait, 30)
        read = asyncio.create_task(store.list_messages(run_id, limit=MESSAGES + 1))
        await asyncio.sleep(0)
        assert not read.done()  # it waits for the connection instead of using it meanwhile
        release.set()
        messages = await asyncio.wait_for(read, timeout=30)
    finally:
        release.set()
        await asyncio.to_thread(holder.join, 30)
        await store.close()
    assert len(messages) == MESSAGES + 1


async def test_an_operation_on_the_worker_does_not_wait_for_a_checkpoint_in_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The WAL checkpoint (a copy and a sync, 10-20 ms every 50 steps of a run) runs on its
    own thread: a write that went to the worker meanwhile does not queue behind it."""
    import runtime.store.sqlite as sqlite_store

    checkpointing = threading.Event()
    release = threading.Event()
    checkpointed = threading.Event()
    real = sqlite_store._checkpoint_wal

    def slow_checkpoint(conn: object) -> None:
        checkpointing.set()
        release.wait(timeout=60)  # a checkpoint that takes as long as the test needs
        real(conn)  # type: ignore[arg-type]
        checkpointed.set()

    monkeypatch.setattr(sqlite_store, "_checkpoint_wal", slow_checkpoint)
    store = SqliteStore(tmp_path / "store.db", clock=ManualClock())
    await store.open()
    try:
        run, token = await running_run(store)
        commits = 0
        while not checkpointing.is_set() and commits < 2 * sqlite_store.CHECKPOINT_EVERY:
            await store.commit_message(run.id, token=token, message=assistant("More."))
            commits += 1
        assert await asyncio.to_thread(checkpointing.wait, 30)
        # On the worker, as a write goes when another process holds the lock.
        written = store._call(lambda conn: conn.execute("SELECT count(*) FROM messages").fetchone())
        row = await asyncio.wait_for(written, timeout=20)  # behind it: 60 s
        assert not checkpointed.is_set() and row[0] == commits + 1
    finally:
        release.set()
        await store.close()


async def test_a_write_behind_the_workers_own_work_waits_for_it_then_runs_on_the_callers_thread(
    tmp_path: Path,
) -> None:
    """While the worker holds the connection (its search indexing, say), a write waits for the
    worker to finish and then runs on the caller's thread: on the worker each statement would
    give the GIL up and wait to win it back from a busy event loop."""
    store, _ = await _store_with_messages(tmp_path)
    _, worker = store._connection()
    holding = threading.Event()
    release = threading.Event()

    def indexing() -> None:
        with store._lock:  # as the worker's maintenance holds it
            holding.set()
            release.wait(timeout=30)

    busy = asyncio.get_running_loop().run_in_executor(worker, indexing)
    ran_on: list[str] = []

    def write(_conn: object) -> int:
        ran_on.append(threading.current_thread().name)
        return 1

    try:
        assert await asyncio.to_thread(holding.wait, 30)
        written = asyncio.create_task(store._write(write))
        await asyncio.sleep(0)
        assert not written.done() and ran_on == []  # it waits for the worker's work
        release.set()
        assert await asyncio.wait_for(written, timeout=30) == 1
        await asyncio.wait_for(busy, timeout=30)
    finally:
        release.set()
        await store.close()
    assert ran_on == [threading.main_thread().name]
