"""A run's failure the database does not take: waited for when waiting helps (a PostgreSQL
server restarting: tests/pg/test_cli_postgres.py), given up at once when it cannot (SQLite
writing nothing more for this process), in one log line that still says what failed the run."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from pathlib import Path

import pytest

from runtime.api import Runtime
from runtime.config import Config
from runtime.errors import ModelError
from runtime.store.base import Store
from runtime.store.sqlite import SqliteStore
from tests.fakes.scripted import ScriptedProvider, Turn


def _refuse_writes(store: Store) -> None:
    """From now on SQLite refuses this store's writes as it does on a file it opened read-only
    (its mode, a read-only mount): "attempt to write a readonly database". ``query_only`` is
    SQLite's own switch for that, on the store's connection."""
    assert isinstance(store, SqliteStore)
    with store._lock:
        assert store._conn is not None
        store._conn.execute("PRAGMA query_only = ON")


async def test_a_failure_a_read_only_database_refuses_is_logged_once_with_its_cause_not_retried(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Found by review: recording a run's failure was retried until the database answered,
    which a database SQLite opened read-only never does: the execution retried for ever,
    its log saying "trying again until it works", and what failed the run (here the model's
    refusal) was logged nowhere."""
    gate = asyncio.Event()
    refusal = ModelError("the model refused the request", retryable=False, code="invalid_request")
    provider = ScriptedProvider([Turn("thinking it over", gate=gate, error=refusal)])
    db = tmp_path / "agent-tui.db"
    runtime = await Runtime.open(
        db_path=db,
        workspace=tmp_path,
        config=Config(),
        model="scripted:test",
        providers=lambda reference: provider,
    )
    try:
        run = await runtime.start("hello")
        async with asyncio.timeout(10):
            await provider.started.wait()
        [execution] = [task for task in asyncio.all_tasks() if task.get_name() == f"run-{run.id}"]
        _refuse_writes(runtime.store)
        with caplog.at_level(logging.INFO, logger="runtime.engine"):
            gate.set()
            async with asyncio.timeout(10):
                await asyncio.wait({execution})
    finally:
        await runtime.close()
    lines = [r for r in caplog.records if r.name == "runtime.engine" and r.levelno >= logging.ERROR]
    assert [r.getMessage() for r in lines] == [
        f"run {run.id} failed (invalid_request: the model refused the request), and that is not "
        f"recorded: {db}: attempt to write a readonly database"
    ]
    assert "trying again" not in caplog.text
    with sqlite3.connect(db) as conn:  # nothing was written: the next writer recovers it
        [(state,)] = conn.execute("SELECT state FROM runs WHERE id = ?", (run.id,)).fetchall()
    assert state == "running"
