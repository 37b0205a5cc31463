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
