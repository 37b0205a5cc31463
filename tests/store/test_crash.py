"""kill -9 a process that is committing steps, then reopen: nothing committed is lost and no
transaction is half there (DESIGN §5, §13 recovery)."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import sys
from pathlib import Path

import pytest

from runtime.events import CheckpointCreated, MessageCommitted, ToolStateChanged
from runtime.models import Role, RunState, ToolCallState
from runtime.store.sqlite import SqliteStore

WRITER = Path(__file__).with_name("crash_writer.py")
ROOT = Path(__file__).resolve().parents[2]


async def _run_writer_until(path: Path, steps: int) -> int:
    """Start the writer, wait (bounded) until it has committed ``steps`` steps, SIGKILL it."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(WRITER),
        str(path),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    seen = 0
    try:
        async with asyncio.timeout(60):
            while seen < steps:
                line = (await proc.stdout.readline()).decode()
                if not line:
                    err = await proc.stderr.read() if proc.stderr else b""
                    pytest.fail(f"writer exited early: {err.decode()[-2000:]}")
                if line.startswith("step "):
                    seen = int(line.split()[1])
    finally:
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    return seen


@pytest.mark.slow
async def test_kill_9_mid_stream_keeps_every_committed_step_whole(tmp_path: Path) -> None:
    path = tmp_path / "crash.db"
    acknowledged = await _run_writer_until(path, steps=15)

    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    reader = SqliteStore(path)
    await reader.open()
    try:
        [run] = (await reader.list_runs()).items
        messages = await reader.list_messages(run.id, limit=10_000)
        calls = await reader.list_tool_calls(run.id)
        for message in messages:
            if message.role is Role.ASSISTANT:
                mine = [c for c in calls if c.message_id == message.id]
                assert len(mine) == 3, "an assistant message always has its three tool calls"
        # Every message, tool call state and checkpoint has exactly its events.
        events = await reader.read_events(limit=100_000)
        committed = [e.message.id for e in events if isinstance(e, MessageCommitted)]
        assert committed == [m.id for m in messages]
        last_tool_state: dict[str, ToolCallState] = {}
        for e in events:
            if isinstance(e, ToolStateChanged):
                last_tool_state[e.tool_call_id] = e.to_state
        assert last_tool_state == {c.id: c.state for c in calls}
        checkpoints = [c.id for c in await reader.list_checkpoints(run.id)]
        assert checkpoints == [e.checkpoint_id for e in events if isinstance(e, CheckpointCreated)]
    finally:
        await reader.close()
    assert len(checkpoints) >= acknowledged, "no acknowledged step was lost"

    # The store opens the file again and recovers the run of the dead writer.
    store = SqliteStore(path)
    await store.open()
    try:
        await store.release_owner("writer")  # as if its lease ran out
        report = await store.recover_expired()
        [run_id] = report.requeued + report.failed
        run = await store.get_run(run_id)
        assert run.state in (RunState.QUEUED, RunState.FAILED)
        if run.state is RunState.FAILED:
            states = {c.state for c in await store.list_tool_calls(run_id)}
            assert ToolCallState.INDETERMINATE in states
    finally:
        await store.close()
