"""A run's failure the database does not take: waited for when waiting helps (a PostgreSQL
server restarting: tests/pg/test_cli_postgres.py), given up at once when it cannot (SQLite
writing nothing more for this process), in one log line that still says what failed the run."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from runtime.api import Runtime
from runtime.config import Config
from runtime.errors import DatabaseFull, ModelError
from runtime.models import RunState
from runtime.store.base import NewRun, Store
from runtime.store.sqlite import SqliteStore
from runtime.tools.base import ToolContext, ToolOutput
from runtime.tools.builtin import builtin_tools
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


class _GatedRead:
    """A read-only tool that finishes when its gate opens (to change the database meanwhile)."""

    name = "gated_read"
    read_only = True
    approval_default = "allow"
    description = "waits for a gate"
    input_schema: dict[str, Any] = {"type": "object", "properties": {}}

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.gate = asyncio.Event()

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        self.started.set()
        await self.gate.wait()
        return ToolOutput(content="read")

    def approval_detail(self, arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        return {}


async def test_a_run_whose_tool_calls_table_is_gone_fails_with_that_error_instead_of_retrying(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Found by review: every database error but a few named ones was treated as an outage,
    so a table dropped under a running run (as a revoked permission would on a server) made
    the execution try to record the run's failure for ever ("trying again until it works"),
    the run reading ``running``. Only a server away or a full disk is waited for now: the run
    fails at once, naming the missing table."""
    tool = _GatedRead()
    provider = ScriptedProvider([Turn("", [("gated_read", {})]), Turn("never")])
    db = tmp_path / "agent-tui.db"
    runtime = await Runtime.open(
        db_path=db,
        workspace=tmp_path,
        config=Config(),
        model="scripted:test",
        providers=lambda reference: provider,
        tools={**builtin_tools(), tool.name: tool},
    )
    try:
        run = await runtime.start("read it")
        async with asyncio.timeout(10):
            await tool.started.wait()
        with sqlite3.connect(db) as conn:
            conn.execute("DROP TABLE tool_calls")
        with caplog.at_level(logging.INFO, logger="runtime.engine"):
            tool.gate.set()
            boundary = await runtime.wait(run.id, timeout=10)
    finally:
        await runtime.close()
    assert boundary.run.state is RunState.FAILED
    assert boundary.run.failure is not None
    assert boundary.run.failure.code == "internal_error"
    assert "no such table: tool_calls" in boundary.run.failure.message
    assert "trying again" not in caplog.text


async def test_a_full_database_is_said_as_full_the_one_refusal_besides_an_outage_waited_for(
    tmp_path: Path,
) -> None:
    """Recording a failure is tried again on a full disk (freeing space mends it); so SQLite's
    "database or disk is full" must be told apart from the refusals that are not retried."""
    async with SqliteStore(tmp_path / "agent-tui.db") as store:
        with store._lock:
            assert store._conn is not None
            [(pages,)] = store._conn.execute("PRAGMA page_count").fetchall()
            store._conn.execute(f"PRAGMA max_page_count = {pages}")
        with pytest.raises(DatabaseFull, match="full"):
            await store.create_run(
                NewRun(agent="default", model="demo", input="x" * 200_000, workspace="/w")
            )
