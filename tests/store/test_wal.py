"""The SQLite store's write-ahead log stays bounded while a run commits steps flat out."""

from __future__ import annotations

from pathlib import Path

import runtime.store.sqlite as sqlite_store
from runtime.clock import ManualClock
from runtime.store.sqlite import SqliteStore
from tests.store.helpers import assistant, running_run

ROUNDS = 10
STEP_WORK = 20_000
TEXT = "A step's answer, long enough to fill a few pages of the log. " * 40


async def test_the_wal_starts_over_after_each_checkpoint_instead_of_growing_with_every_commit(
    tmp_path: Path,
) -> None:
    """Commits that came while a passive checkpoint copied the WAL back (a run committing flat
    out always has some) kept SQLite from starting the WAL over, so it grew by every commit for
    as long as the store was open (230 MB after a benchmark run of 1,000 steps)."""
    path = tmp_path / "store.db"
    wal = Path(f"{path}-wal")
    store = SqliteStore(path, clock=ManualClock())
    await store.open()
    sizes: list[int] = []
    try:
        run, token = await running_run(store)
        for _ in range(ROUNDS):
            # No pause between rounds: the checkpoints run while the commits go on.
            for _ in range(sqlite_store.CHECKPOINT_EVERY):
                await store.commit_message(run.id, token=token, message=assistant(TEXT))
                sum(range(STEP_WORK))  # what a step computes between two of its commits
            sizes.append(wal.stat().st_size)
        messages = await store.list_messages(run.id, limit=ROUNDS * sqlite_store.CHECKPOINT_EVERY)
    finally:
        await store.close()
    assert len(messages) == ROUNDS * sqlite_store.CHECKPOINT_EVERY
    # The first round is in the log whole (no checkpoint before it ends). A log that starts
    # over after each checkpoint stays about that long (a restart missed, busy, adds a round
    # until the next); one that never does is ten rounds long by the end.
    assert max(sizes) <= 4 * sizes[0], sizes


async def test_a_peek_reads_what_a_crashed_writer_left_in_the_log_and_writes_nothing(
    tmp_path: Path,
) -> None:
    """``SqliteStore(peek=True)`` (the TUI's first page, read before its command line is
    checked) reads through SQLite's read-only mode: it sees the commits a killed process left
    in the write-ahead log, and its close copies none of them into the database, which an
    ordinary connection, the last to close, does."""
    import shutil
    import sqlite3

    source = tmp_path / "source.db"
    store = SqliteStore(source, clock=ManualClock())
    await store.open()
    await store.close()
    # A writer that commits and never checkpoints, copied mid-life: as a kill -9 leaves it.
    writer = sqlite3.connect(source, isolation_level=None)
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    writer.execute(
        "INSERT INTO jobs (id, title, workspace, agent, created_at, updated_at)"
        " VALUES ('job-in-the-log', 'left in the log', '/w', 'default', 1.0, 1.0)"
    )
    crashed = tmp_path / "crashed.db"
    for suffix in ("", "-wal"):
        shutil.copyfile(f"{source}{suffix}", f"{crashed}{suffix}")
    writer.close()
    database, log = crashed.read_bytes(), Path(f"{crashed}-wal").read_bytes()
    assert log  # the commit is in the log only

    peek = SqliteStore(crashed, peek=True)
    await peek.open()
    try:
        page = await peek.list_jobs(limit=10)
    finally:
        await peek.close()
    assert [job.title for job in page.items] == ["left in the log"]
    assert crashed.read_bytes() == database
    assert Path(f"{crashed}-wal").read_bytes() == log
