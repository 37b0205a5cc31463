"""Constant work per step (issue 13 point 1): a step of the engine makes the same store round
trips at step 5 as at step 200, whatever the length of the history; and the engine and the
facade hold no SQL (the store is the only place that speaks to the database)."""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from runtime.config import Config, Defaults
from runtime.models import Role, RunState, Usage
from runtime.providers.base import (
    ModelEvent,
    ModelRequest,
    StopReason,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageReport,
)
from runtime.runtime import Runtime
from runtime.store.sqlite import SqliteStore
from runtime.tools.builtin import builtin_tools

ROOT = Path(__file__).resolve().parents[2]
STEPS = 200
FILES = ["README.md", "notes.txt", "src/main.py"]


@dataclass
class Trips:
    """Round trips to the database thread made by the executions (tasks ``run-…``), split into
    write transactions and reads; and the SQL statements of all of them."""

    reads: int = 0
    writes: int = 0
    records: int = 0
    """Records (runs, messages, tool calls...) the reads returned: the work a read does."""
    by_operation: Counter[str] = field(default_factory=Counter)

    def snapshot(self) -> tuple[int, int, int]:
        return self.reads, self.writes, self.records


def _records(value: Any) -> int:
    if isinstance(value, list | tuple):
        return sum(_records(item) for item in value)
    return 0 if value is None else 1


def count_trips(store: SqliteStore) -> Trips:
    """Wrap the real store's three plumbing calls: every operation is one ``_read`` (a small
    read, on the caller's thread when the connection is free) or ``_call`` (a hop to the
    connection thread); a write transaction goes through ``_write`` first. A ``_read`` or a
    ``_write`` that falls back to ``_call`` counts once."""
    trips = Trips()
    call, read, write = store._call, store._read, store._write
    inside: set[asyncio.Task[Any]] = set()
    """Our tasks in a ``_read`` or ``_write``: their ``_call`` is that same operation."""

    def ours() -> asyncio.Task[Any] | None:
        task = asyncio.current_task()
        return task if task is not None and task.get_name().startswith("run-") else None

    def counted_read_of(plumbing: Any) -> Any:
        async def counted(fn: Any) -> Any:
            task = ours()
            if task is None or task in inside:
                return await plumbing(fn)
            inside.add(task)
            try:
                result = await plumbing(fn)
            finally:
                inside.discard(task)
            trips.reads += 1
            trips.records += _records(result)
            trips.by_operation[f"read {getattr(fn, '__qualname__', '?')}"] += 1
            return result

        return counted

    async def counted_write(fn: Any) -> Any:
        task = ours()
        if task is None:
            return await write(fn)
        trips.writes += 1
        trips.by_operation[f"write {getattr(fn, '__qualname__', '?')}"] += 1
        inside.add(task)
        try:
            return await write(fn)
        finally:
            inside.discard(task)

    store._call = counted_read_of(call)  # type: ignore[method-assign]
    store._read = counted_read_of(read)  # type: ignore[method-assign]
    store._write = counted_write  # type: ignore[method-assign]
    return trips


class InstantModel:
    """Answers at once with three read_file calls per step, then a final answer; notes the
    round trips so far at the start of each call (a step runs from one call to the next)."""

    def __init__(self, steps: int, now: Callable[[], tuple[int, int, int]]) -> None:
        self.steps = steps
        self.at_call: list[tuple[int, int, int]] = []
        self.history_lengths: list[int] = []
        self._now = now

    reference = "instant:test"
    context_window = 1_000_000

    def cost_usd(self, usage: Usage) -> float:
        return 0.0

    async def aclose(self) -> None:
        return None

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.at_call.append(self._now())
        self.history_lengths.append(len(request.messages))
        step = len(self.at_call)
        if step > self.steps:
            yield TextDelta(text="done")
            yield StopReason(reason="end_turn")
            return
        yield TextDelta(text=f"step {step}: reading three files")
        for index, name in enumerate(FILES):
            yield ToolCallStart(index=index, id=f"toolu_{step}_{index}", name="read_file")
            yield ToolCallDelta(index=index, json_fragment=json.dumps({"path": name}))
            yield ToolCallEnd(index=index)
        yield UsageReport(usage=Usage(input_tokens=100, output_tokens=20))
        yield StopReason(reason="tool_use")


async def counted_runtime(
    db_path: Path, workspace: Path, steps: int
) -> tuple[Runtime, SqliteStore, Trips, InstantModel]:
    """A runtime on a real SQLite store whose round trips are counted, its model answering
    ``steps`` steps of three ``read_file`` calls, then a final answer."""
    store = SqliteStore(db_path)
    trips = count_trips(store)
    model = InstantModel(steps, trips.snapshot)
    runtime = await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=Config(defaults=Defaults(max_steps=steps + 5, job_step_budget=steps + 5)),
        model="instant:test",
        providers=lambda reference: model,
        tools=builtin_tools(),
        store=store,
    )
    return runtime, store, trips, model


def step_cost(model: InstantModel, step: int) -> tuple[int, int, int]:
    """(reads, writes, records read) of step ``step`` (1-based)."""
    before, after = model.at_call[step - 1], model.at_call[step]
    reads, writes, records = (a - b for a, b in zip(after, before, strict=True))
    return reads, writes, records


@pytest.mark.timeout(300)
async def test_a_step_costs_the_same_store_round_trips_at_step_200_as_at_step_5(
    db_path: Path, workspace: Path
) -> None:
    runtime, _, trips, model = await counted_runtime(db_path, workspace, STEPS)
    try:
        run = await runtime.start("read the three files, many times")
        boundary = await runtime.wait(run.id, timeout=240)
        assert boundary.state is RunState.COMPLETED
        messages = await runtime.all_messages(run.id)
    finally:
        await runtime.close()
    # The run really went through 200 tool steps with a growing history.
    assert [m.role for m in messages[-3:]] == [Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]
    assert len(messages) == 1 + 2 * STEPS + 1
    assert model.history_lengths[4] == 1 + 2 * 4
    assert model.history_lengths[STEPS - 1] == 1 + 2 * (STEPS - 1)
    assert all("3 lines" not in m.text for m in messages)  # results are the files, not errors
    early_reads, early_writes, early_records = step_cost(model, 5)
    late_reads, late_writes, late_records = step_cost(model, STEPS)
    # The same work early and late: no read grows with the history.
    assert late_records == early_records, trips.by_operation
    assert late_reads == early_reads, trips.by_operation
    # And no read at all once the execution runs (history, calls, requests are in memory).
    assert (early_reads, late_reads) == (0, 0), trips.by_operation
    # Writes: the assistant message with its calls started, the results with the tool message
    # and checkpoint; a result that is ready while a slower call still runs may commit on its
    # own (never more than one commit per call).
    assert 2 <= early_writes <= 1 + len(FILES)
    assert 2 <= late_writes <= 1 + len(FILES)
    every_step = [step_cost(model, step) for step in range(2, STEPS + 1)]
    assert max(reads + records for reads, _, records in every_step) == 0
    assert max(writes for _, writes, _ in every_step) <= 1 + len(FILES)


async def test_the_last_step_of_a_completed_run_is_one_write(
    db_path: Path, workspace: Path
) -> None:
    """The answer that ends a run, its checkpoint and the run's completion commit together:
    one write where there were three, and observers get the last words and the end at once."""
    runtime, store, trips, model = await counted_runtime(db_path, workspace, 2)
    try:
        run = await runtime.start("read the three files twice")
        boundary = await runtime.wait(run.id, timeout=60)
        assert boundary.state is RunState.COMPLETED
        events = await store.read_events(run_id=run.id)
    finally:
        await runtime.close()
    reads, writes, _ = (a - b for a, b in zip(trips.snapshot(), model.at_call[-1], strict=True))
    assert (reads, writes) == (0, 1), trips.by_operation
    kinds = [type(e).__name__ for e in events[-3:]]
    assert kinds == ["MessageCommitted", "CheckpointCreated", "RunStateChanged"]
    assert [e.seq for e in events[-3:]] == list(
        range(events[-3].seq or 0, (events[-1].seq or 0) + 1)
    )


SQL_WORDS = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE)\b|execute\(")


def test_the_engine_and_the_facade_hold_no_sql_and_execute_no_statement() -> None:
    files = [*sorted((ROOT / "runtime" / "engine").glob("*.py")), ROOT / "runtime" / "runtime.py"]
    files.append(ROOT / "runtime" / "history.py")
    offenders = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in files
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if SQL_WORDS.search(line)
    ]
    assert len(files) > 5
    assert offenders == []
