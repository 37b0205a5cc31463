"""Rewinding files to a checkpoint: snapshots before every approved write, restored byte for
byte; files changed outside agent-tui since are reported and left alone unless included."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest

from runtime.api import Runtime
from runtime.config import Config
from runtime.errors import AgentTuiError
from runtime.models import Checkpoint, InputKind, RunState, ToolCallState
from runtime.rewind import apply_rewind, plan_rewind, plan_rewind_to_start
from runtime.store.base import FileContent, ToolStateChange
from runtime.store.sqlite import SqliteStore
from runtime.tools.base import Tool, ToolContext, ToolOutput
from runtime.tools.builtin import builtin_tools
from tests.fakes.scripted import ScriptedProvider, Turn

ORIGINAL = "Notes — café\nthe answer is 42\n".encode()


def _edit(old: str, new: str) -> tuple[str, dict[str, str]]:
    return ("edit_file", {"path": "notes.txt", "old_string": old, "new_string": new})


SCRIPT = [
    Turn("Step one.", [_edit("42", "43")]),
    Turn(
        "Step two.", [_edit("43", "44"), ("write_file", {"path": "new/other.txt", "content": "b"})]
    ),
    Turn("Step three.", [_edit("44", "45")]),
    Turn("Done."),
]


@pytest.fixture
async def runtime(db_path: Path, workspace: Path) -> AsyncIterator[Runtime]:
    """A runtime with the built-in tools, as the app opens it (file history is the engine's)."""
    (workspace / "notes.txt").write_bytes(ORIGINAL)
    provider = ScriptedProvider(list(SCRIPT))
    store = SqliteStore(db_path)

    async def no_sleep(seconds: float) -> None:
        return None

    opened = await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=Config(),
        model="scripted:test",
        providers=lambda reference: provider,
        store=store,
        sleep=no_sleep,
    )
    try:
        yield opened
    finally:
        await opened.close()


async def _three_approved_steps(
    runtime: Runtime, workspace: Path
) -> tuple[list[Checkpoint], dict[int, bytes]]:
    """Run the script, approving every call once; the file's bytes after each step."""
    run = await runtime.start("edit the notes three times")
    after_step: dict[int, bytes] = {0: ORIGINAL}
    while True:
        boundary = await runtime.wait(run.id, timeout=20)
        current = await runtime.get_run(run.id)
        after_step[current.step] = (workspace / "notes.txt").read_bytes()
        if boundary.request is None:
            break
        assert boundary.request.kind is InputKind.APPROVAL
        await runtime.respond(
            run.id, boundary.request.id, {"decision": "allow_once", "reason": None}
        )
    assert boundary.run.state is RunState.COMPLETED
    checkpoints = await runtime.checkpoints(run.id)
    return checkpoints, after_step


def _content_at(checkpoint: Checkpoint, steps: int) -> bytes:
    text = ORIGINAL.decode()
    for n in range(min(checkpoint.step, steps)):
        text = text.replace(str(42 + n), str(43 + n))
    return text.encode()


async def test_three_approved_edits_rewound_to_the_first_checkpoint_are_byte_identical(
    runtime: Runtime, workspace: Path, db_path: Path
) -> None:
    checkpoints, _ = await _three_approved_steps(runtime, workspace)
    assert (workspace / "notes.txt").read_bytes() == ORIGINAL.replace(b"42", b"45")
    first = checkpoints[0]
    assert first.step == 1  # made after the first step's edit
    expected = _content_at(first, 3)
    assert expected == ORIGINAL.replace(b"42", b"43")

    plan = await plan_rewind(runtime.store, first.id)
    by_path = {change.path: change for change in plan.changes}
    assert set(by_path) == {"notes.txt", "new/other.txt"}
    notes = by_path["notes.txt"]
    assert notes.writes == 2 and not notes.changed_outside and notes.action == "restore"
    assert "-the answer is 45" in notes.diff() and "+the answer is 43" in notes.diff()
    assert by_path["new/other.txt"].action == "remove"
    done = apply_rewind(plan)
    assert {change.path for change in done} == {"notes.txt", "new/other.txt"}
    assert (workspace / "notes.txt").read_bytes() == expected
    assert not (workspace / "new" / "other.txt").exists()

    # Each content is stored once, whatever number of snapshots name it.
    with sqlite3.connect(db_path) as conn:
        shas = [row[0] for row in conn.execute("SELECT sha256 FROM blobs")]
        assert len(shas) == len(set(shas))
        assert hashlib.sha256(ORIGINAL).hexdigest() in shas
        assert conn.execute("SELECT count(*) FROM file_snapshots").fetchone()[0] == 4


async def test_the_jobs_start_undoes_the_first_steps_writes_which_no_checkpoint_precedes(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a trial: /rewind right after the first answer could go back no further than
    the end of the first step (a checkpoint ends a step; none comes before the first), so
    what the first step wrote could not be undone. The job's start can be rewound to."""
    checkpoints, _ = await _three_approved_steps(runtime, workspace)
    first = await plan_rewind(runtime.store, checkpoints[0].id)
    assert {c.path for c in first.changes} == {"notes.txt", "new/other.txt"}
    assert [c.target for c in first.changes if c.path == "notes.txt"] != [ORIGINAL]

    plan = await plan_rewind_to_start(runtime.store, checkpoints[0].job_id)
    assert plan.checkpoint_id is None and plan.job_id == checkpoints[0].job_id
    by_path = {change.path: change for change in plan.changes}
    assert set(by_path) == {"notes.txt", "new/other.txt"}
    assert by_path["notes.txt"].writes == 3 and by_path["notes.txt"].action == "restore"
    assert "(at the job's start)" in by_path["notes.txt"].diff()
    done = apply_rewind(plan)
    assert {change.path for change in done} == {"notes.txt", "new/other.txt"}
    assert (workspace / "notes.txt").read_bytes() == ORIGINAL
    assert not (workspace / "new" / "other.txt").exists()
    again = await plan_rewind_to_start(runtime.store, checkpoints[0].job_id)
    assert again.changes == []


async def test_a_file_edited_by_hand_is_reported_and_not_overwritten_without_confirmation(
    runtime: Runtime, workspace: Path
) -> None:
    checkpoints, _ = await _three_approved_steps(runtime, workspace)
    first = checkpoints[0]
    hand = workspace / "new" / "other.txt"
    hand.write_text("my own words\n")

    plan = await plan_rewind(runtime.store, first.id)
    assert [c.path for c in plan.changed_outside] == ["new/other.txt"]
    assert [c.path for c in plan.safe] == ["notes.txt"]
    done = apply_rewind(plan)
    assert [c.path for c in done] == ["notes.txt"]
    assert hand.read_text() == "my own words\n"
    assert (workspace / "notes.txt").read_bytes() == ORIGINAL.replace(b"42", b"43")

    again = await plan_rewind(runtime.store, first.id)
    assert [c.path for c in again.changes] == ["new/other.txt"]
    done = apply_rewind(again, include_changed_outside=True)
    assert [c.path for c in done] == ["new/other.txt"]
    assert not hand.exists()


async def test_nothing_to_rewind_after_the_last_checkpoint(
    runtime: Runtime, workspace: Path
) -> None:
    checkpoints, _ = await _three_approved_steps(runtime, workspace)
    plan = await plan_rewind(runtime.store, checkpoints[-1].id)
    assert plan.changes == []


class _GatedWrite:
    """The built-in write_file, held at its start until the test lets it write."""

    def __init__(self, tool: Tool) -> None:
        self._tool = tool
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tool, name)

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        self.entered.set()
        await self.release.wait()
        return await self._tool.run(arguments, ctx)


async def test_a_write_is_recorded_running_only_with_the_snapshot_of_its_file(
    db_path: Path, workspace: Path
) -> None:
    (workspace / "notes.txt").write_bytes(ORIGINAL)
    tools = dict(builtin_tools())
    gated = _GatedWrite(tools["write_file"])
    tools["write_file"] = cast(Tool, gated)
    provider = ScriptedProvider(
        [Turn("Writing.", [("write_file", {"path": "notes.txt", "content": "new\n"})]), Turn("Ok")]
    )
    runtime = await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=Config(),
        model="scripted:test",
        providers=lambda reference: provider,
        tools=tools,
    )
    try:
        run = await runtime.start("rewrite the notes")
        boundary = await runtime.wait(run.id, timeout=20)
        assert boundary.request is not None and boundary.request.kind is InputKind.APPROVAL
        await runtime.respond(
            run.id, boundary.request.id, {"decision": "allow_once", "reason": None}
        )
        async with asyncio.timeout(20):
            await gated.entered.wait()
        # The tool has not written yet; another connection sees the call running AND the
        # file's previous bytes: they were committed together.
        with contextlib.closing(sqlite3.connect(db_path)) as conn:
            state, call_id = conn.execute(
                "SELECT state, id FROM tool_calls WHERE name = 'write_file'"
            ).fetchone()
            snapshot = conn.execute(
                "SELECT b.data, s.after_recorded FROM file_snapshots AS s"
                " JOIN blobs AS b ON b.sha256 = s.before_sha256 WHERE s.tool_call_id = ?",
                (call_id,),
            ).fetchone()
        assert state == "running"
        assert snapshot == (ORIGINAL, 0)
        gated.release.set()
        final = await runtime.wait(run.id, timeout=20)
        assert final.run.state is RunState.COMPLETED
        with contextlib.closing(sqlite3.connect(db_path)) as conn:
            after = conn.execute(
                "SELECT b.data FROM file_snapshots AS s"
                " JOIN blobs AS b ON b.sha256 = s.after_sha256 WHERE s.tool_call_id = ?",
                (call_id,),
            ).fetchone()
        assert after == (b"new\n",)

        # A transition that is refused takes its snapshot with it.
        with pytest.raises(AgentTuiError):
            await runtime.store.set_tool_states(
                run.id,
                token="not-the-token",
                changes=[
                    ToolStateChange(
                        tool_call_id=call_id,
                        to=ToolCallState.RUNNING,
                        file_before=FileContent(path="elsewhere.txt", data=b"x"),
                    )
                ],
            )
        snapshots = await runtime.store.list_file_snapshots(run.job_id)
        assert [s.path for s in snapshots] == ["notes.txt"]
    finally:
        gated.release.set()
        await runtime.close()
