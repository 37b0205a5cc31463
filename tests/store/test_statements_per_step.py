"""What one agent step costs the SQLite store in statements: the engine's two step
transactions, traced on a real file. A bound that can fail: a change that adds a statement to
every step shows here (each costs the step a few microseconds and often a page written)."""

from __future__ import annotations

from pathlib import Path

from runtime.events import ToolStateChanged
from runtime.models import Role, TextBlock, ToolCallState, ToolResultBlock, ToolUseBlock, Usage
from runtime.store.base import NewMessage, NewToolCall, ToolStateChange
from runtime.store.sqlite import SqliteStore
from tests.store.helpers import running_run

CALLS = 3


def _calls(step: int) -> list[NewToolCall]:
    return [
        NewToolCall(
            provider_id=f"toolu_{step}_{i}",
            name="read_file",
            arguments={"path": f"f{i}"},
            idempotent=True,
            start=True,
        )
        for i in range(CALLS)
    ]


async def _traced_step(store: SqliteStore, run_id: str, token: str, step: int) -> list[str]:
    """The statements of one step (an assistant message with CALLS started calls, then their
    results, the tool message and the checkpoint), as SQLite ran them."""
    statements: list[str] = []
    conn = store._conn
    assert conn is not None
    conn.set_trace_callback(statements.append)
    try:
        calls = _calls(step)
        message = NewMessage(
            role=Role.ASSISTANT,
            content=[TextBlock(text="Let me look.")]
            + [
                ToolUseBlock(id=c.provider_id, tool_call_id="", name=c.name, input=c.arguments)
                for c in calls
            ],
            usage=Usage(input_tokens=100, output_tokens=10),
        )
        first = await store.commit_assistant_message_with_calls(
            run_id, token=token, message=message, tool_calls=calls, step=step
        )
        await store.commit_step_results(
            run_id,
            token=token,
            tool_changes=[
                ToolStateChange(tool_call_id=c.id, to=ToolCallState.COMPLETED, result="ok")
                for c in first.tool_calls
            ],
            message=NewMessage(
                role=Role.TOOL,
                content=[
                    ToolResultBlock(tool_use_id=c.provider_id, tool_call_id=c.id, content="ok")
                    for c in first.tool_calls
                ],
            ),
            checkpoint_step=step,
        )
    finally:
        conn.set_trace_callback(None)
    return statements


async def test_a_step_with_three_tool_calls_runs_at_most_twenty_statements(
    tmp_path: Path,
) -> None:
    """Two transactions. The first: BEGIN, the run read with its next position, the run and
    job rows, the message, the calls (one INSERT of their rows), the events (one INSERT of
    theirs, its cursor giving the last event's number), COMMIT. The second: BEGIN, the run,
    the calls read, the run row, the tool message, the three calls updated, the pending calls,
    the checkpoint, the events (one INSERT), COMMIT. (A row of an executemany counts as a
    statement: SQLite steps each. An INSERT of several rows was one call into SQLite instead
    of one a row, and no ``SELECT last_insert_rowid()`` after the events: 5 against 9 us for
    six events, 4.58 against 4.69 million instructions a store_bench step.) The events still
    point at the calls they tell."""
    async with SqliteStore(tmp_path / "agent.db") as store:
        run, token = await running_run(store)
        await _traced_step(store, run.id, token, 1)  # the first step's first writes
        statements = await _traced_step(store, run.id, token, 2)
        events = await store.read_events(run_id=run.id)
        calls = await store.list_tool_calls(run.id)
    assert len(statements) <= 20, "\n".join(statements)
    started = [e for e in events if getattr(e, "to_state", None) is ToolCallState.RUNNING]
    assert [e.tool_call_id for e in started] == [c.id for c in calls]  # type: ignore[attr-defined]
    reserved = [e for e in events if isinstance(e, ToolStateChanged) and e.from_state is None]
    assert [e.arguments for e in reserved] == [c.arguments for c in calls]
    assert [e.seq for e in events] == sorted({e.seq for e in events})


async def test_a_message_with_more_calls_than_one_insert_holds_keeps_every_event_on_its_call(
    tmp_path: Path,
) -> None:
    """150 calls: their rows go in chunks of ``_ROWS_PER_INSERT``, their 301 events through
    ``executemany``; each event read back still tells its own call, in order."""
    async with SqliteStore(tmp_path / "agent.db") as store:
        run, token = await running_run(store)
        calls = [
            NewToolCall(provider_id=f"toolu_{i}", name="read_file", arguments={"path": f"f{i}"})
            for i in range(150)
        ]
        message = NewMessage(
            role=Role.ASSISTANT,
            content=[
                ToolUseBlock(id=c.provider_id, tool_call_id="", name=c.name, input=c.arguments)
                for c in calls
            ],
        )
        committed = await store.commit_assistant_message_with_calls(
            run.id, token=token, message=message, tool_calls=calls, step=1
        )
        events = await store.read_events(run_id=run.id)
        stored = await store.list_tool_calls(run.id)
    assert [c.id for c in stored] == [c.id for c in committed.tool_calls]
    told = [e for e in events if isinstance(e, ToolStateChanged)]
    assert [(e.tool_call_id, e.arguments) for e in told] == [
        (c.id, {"path": f"f{i}"}) for i, c in enumerate(stored)
    ]
    assert [e.seq for e in committed.events] == [e.seq for e in events[-151:]]
