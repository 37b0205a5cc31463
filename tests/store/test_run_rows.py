"""A run read back by the SQLite store is the run its row holds, on real files: the store
takes the run it wrote itself instead of validating the same row again, and that must never
hide a change made by anyone else."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from runtime.models import Usage
from runtime.store import sqlite as sqlite_store
from runtime.store.sqlite import SqliteStore
from tests.store.helpers import assistant, running_run


async def test_a_run_row_changed_by_another_connection_without_its_revision_reads_changed(
    tmp_path: Path,
) -> None:
    """``delete_job`` clears a run's references without a new revision: a run known by its id
    and revision would come back stale."""
    path = tmp_path / "agent.db"
    async with SqliteStore(path) as store:
        run, token = await running_run(store)
        committed = await store.commit_assistant_message_with_calls(
            run.id, token=token, message=assistant("one"), tool_calls=[], step=1
        )
        other = sqlite3.connect(path, isolation_level=None)
        try:
            other.execute("UPDATE runs SET model = 'another-model' WHERE id = ?", (run.id,))
        finally:
            other.close()
        read = await store.get_run(run.id)
        assert read.revision == committed.run.revision
        assert read.model == "another-model"
        again = await store.commit_assistant_message_with_calls(
            run.id,
            token=token,
            message=assistant("two", usage=Usage(input_tokens=5)),
            tool_calls=[],
            step=2,
        )
        assert again.run.model == "another-model"
        assert again.run.usage.input_tokens == 5


async def test_the_run_a_commit_returns_is_the_run_its_row_reads_back_as(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    async with SqliteStore(path) as store:
        run, token = await running_run(store)
        committed = await store.commit_assistant_message_with_calls(
            run.id,
            token=token,
            message=assistant("one", usage=Usage(input_tokens=7, output_tokens=3), cost=0.25),
            tool_calls=[],
            step=1,
        )
    sqlite_store._known_runs.clear()  # as in a new process: the run validated from its row
    async with SqliteStore(path) as reopened:
        assert await reopened.get_run(run.id) == committed.run
