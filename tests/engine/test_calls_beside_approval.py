"""Calls the policy allows run while their batch waits for a person (DESIGN §8): a step that
asks to write a file and to read another starts the read at once, streams its progress and
commits its result while the approval waits; the step's tool message waits for both. Real
SQLite files and the scripted model."""

from __future__ import annotations

import asyncio
import io
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from runtime.api import Runtime
from runtime.config import Config
from runtime.events import Event, ToolProgress, ToolStateChanged
from runtime.models import InputKind, Role, RunState, ToolCallState, ToolResultBlock
from runtime.tools.base import Tool, ToolContext, ToolOutput
from runtime.tools.builtin import builtin_tools
from tests.fakes.scripted import ScriptedProvider, Turn

ROOT = Path(__file__).resolve().parents[2]
WAIT = 15
WRITE = ("write_file", {"path": "out.txt", "content": "hello"})  # asks first, by default


class Survey:
    """A read-only tool (allowed by default) that reports progress once ``tick`` is set, then
    waits for its gate."""

    name = "survey"
    read_only = True
    approval_default = "allow"
    description = "surveys the workspace"
    input_schema: dict[str, Any] = {"type": "object", "properties": {}}

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.tick = asyncio.Event()
        self.gate = asyncio.Event()
        self.runs = 0

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        self.runs += 1
        self.started.set()
        await self.tick.wait()
        ctx.progress(1, 2, "half the workspace surveyed")
        await self.gate.wait()
        return ToolOutput(content="surveyed")

    def approval_detail(self, arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        return {}


async def _open(db: Path, workspace: Path, provider: ScriptedProvider, tool: Survey) -> Runtime:
    tools: dict[str, Tool] = {**builtin_tools(), tool.name: tool}
    return await Runtime.open(
        db_path=db,
        workspace=workspace,
        config=Config(),
        model="scripted:test",
        providers=lambda reference: provider,
        tools=tools,
    )


async def _first(
    events: AsyncIterator[Event], wanted: type[Event], name: str, **fields: Any
) -> Any:
    async with asyncio.timeout(WAIT):
        async for event in events:
            if isinstance(event, wanted) and all(
                getattr(event, key) == value for key, value in fields.items()
            ):
                return event
    raise AssertionError(f"no {name}")


def _results(provider: ScriptedProvider) -> list[tuple[str, bool]]:
    blocks = [
        b
        for m in provider.requests[1].messages
        for b in m.content
        if isinstance(b, ToolResultBlock)
    ]
    return [(str(b.content), b.is_error) for b in blocks]


async def test_an_allowed_call_runs_and_commits_while_its_batchs_approval_waits(
    db_path: Path, workspace: Path
) -> None:
    """Found by a trial: a step that asked to write a file and to survey the workspace showed
    the survey idle until the write was approved; a serious tool reads while it asks."""
    survey = Survey()
    provider = ScriptedProvider([Turn("", [WRITE, ("survey", {})]), Turn("done")])
    runtime = await _open(db_path, workspace, provider, survey)
    try:
        run = await runtime.start("write and survey")
        events = runtime.observe(run.id, after=0)
        boundary = await runtime.wait(run.id, timeout=WAIT)
        assert boundary.request is not None and boundary.request.kind is InputKind.APPROVAL
        assert boundary.request.detail["tool"] == "write_file"
        async with asyncio.timeout(WAIT):
            await survey.started.wait()  # before anyone answered
        running = await _first(
            events, ToolStateChanged, "survey started", to_state=ToolCallState.RUNNING
        )
        assert running.name == "survey"
        survey.tick.set()  # the observer listens now: its progress streams to it
        progress = await _first(events, ToolProgress, "progress of the survey")
        assert progress.message == "half the workspace surveyed"

        survey.gate.set()
        done = await _first(
            events, ToolStateChanged, "survey result", to_state=ToolCallState.COMPLETED
        )
        assert done.name == "survey"
        # Its result is committed; the run still waits, and the step is not settled yet.
        assert (await runtime.get_run(run.id)).state is RunState.INPUT_REQUIRED
        calls = {c.name: c.state for c in await runtime.tool_calls(run.id)}
        assert calls == {"write_file": ToolCallState.PENDING, "survey": ToolCallState.COMPLETED}
        roles = [m.role for m in await runtime.messages(run.id)]
        assert roles == [Role.USER, Role.ASSISTANT]
        assert not (workspace / "out.txt").exists()

        await runtime.respond(run.id, boundary.request.id, {"decision": "allow_once"})
        assert (await runtime.wait(run.id, timeout=WAIT)).state is RunState.COMPLETED
        checkpoints = await runtime.checkpoints(run.id)
    finally:
        await runtime.close()
    assert survey.runs == 1
    assert (workspace / "out.txt").read_text() == "hello"
    results = _results(provider)
    assert [is_error for _, is_error in results] == [False, False]
    assert results[1][0] == "surveyed"  # in call order, in one tool message
    assert [c.step for c in checkpoints] == [1, 2]


async def test_an_approval_answered_while_the_allowed_call_runs_goes_on_once_it_ends(
    db_path: Path, workspace: Path
) -> None:
    survey = Survey()
    provider = ScriptedProvider([Turn("", [("survey", {}), WRITE]), Turn("done")])
    runtime = await _open(db_path, workspace, provider, survey)
    try:
        run = await runtime.start("survey and write")
        boundary = await runtime.wait(run.id, timeout=WAIT)
        assert boundary.request is not None
        async with asyncio.timeout(WAIT):
            await survey.started.wait()
        await runtime.respond(run.id, boundary.request.id, {"decision": "allow_once"})
        # The execution running the survey took the run back: nothing else executes it.
        assert (await runtime.get_run(run.id)).state is RunState.RUNNING
        survey.tick.set()
        survey.gate.set()
        final = await runtime.wait(run.id, timeout=WAIT)
        messages = await runtime.messages(run.id)
    finally:
        await runtime.close()
    assert final.state is RunState.COMPLETED
    assert survey.runs == 1
    assert (workspace / "out.txt").read_text() == "hello"
    assert [m.role for m in messages] == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]
    assert [error for _, error in _results(provider)] == [False, False]


async def test_an_answer_from_another_process_while_the_allowed_call_runs_goes_on_in_its_owner(
    db_path: Path, workspace: Path
) -> None:
    """The answering process leaves the run to the live process running its calls, which
    takes it back; had it gone on itself, it would have found the survey running elsewhere
    and failed the run with an unknown outcome."""
    survey = Survey()
    owner = await _open(
        db_path,
        workspace,
        ScriptedProvider([Turn("", [WRITE, ("survey", {})]), Turn("done")]),
        survey,
    )
    answerer = await _open(db_path, workspace, ScriptedProvider([]), Survey())
    try:
        run = await owner.start("write and survey")
        boundary = await owner.wait(run.id, timeout=WAIT)
        assert boundary.request is not None
        async with asyncio.timeout(WAIT):
            await survey.started.wait()
        answered = await answerer.respond(run.id, boundary.request.id, {"decision": "allow_once"})
        assert answered.owner_id == owner.owner_id
        survey.tick.set()
        survey.gate.set()
        final = await owner.wait(run.id, timeout=WAIT)
    finally:
        await answerer.close()
        await owner.close()
    assert final.state is RunState.COMPLETED, final.run.failure
    assert survey.runs == 1
    assert (workspace / "out.txt").read_text() == "hello"


CHILD = """
import asyncio, sys
from pathlib import Path
from runtime.api import Runtime
from runtime.config import Config, Permissions
from runtime.tools.base import ToolOutput
from runtime.tools.builtin import builtin_tools
from tests.fakes.scripted import ScriptedProvider, Turn

class Counted:
    name = "counted"
    description = "acts once per run"
    read_only = False  # it acts: it must never run twice
    approval_default = "allow"
    input_schema = {"type": "object", "properties": {}}

    def __init__(self, log):
        self.log = log

    async def run(self, arguments, ctx):
        with open(self.log, "a") as out:
            out.write("ran\\n")
        return ToolOutput(content="counted once")

    def approval_detail(self, arguments, ctx):
        return {}

async def main(db, workspace, log):
    write = ("write_file", {"path": "out.txt", "content": "hello"})
    provider = ScriptedProvider([Turn("", [write, ("counted", {})])])
    runtime = await Runtime.open(
        db_path=db, workspace=workspace, config=Config(permissions=Permissions(allow=["counted"])),
        model="scripted:test", providers=lambda reference: provider,
        tools={**builtin_tools(), "counted": Counted(log)},
    )
    run = await runtime.start("write and count")
    print(run.id, flush=True)
    await asyncio.Event().wait()

asyncio.run(main(*sys.argv[1:]))
"""


def _state(db: Path, run_id: str) -> tuple[str, dict[str, str]]:
    with sqlite3.connect(db) as conn:
        [(run_state,)] = conn.execute("SELECT state FROM runs WHERE id = ?", (run_id,)).fetchall()
        calls = conn.execute("SELECT name, state FROM tool_calls WHERE run_id = ?", (run_id,))
        return run_state, dict(calls.fetchall())


def test_a_kill_9_while_the_approval_waits_never_runs_the_finished_allowed_call_again(
    db_path: Path, workspace: Path, tmp_path: Path
) -> None:
    log = tmp_path / "counted.log"
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(db_path), str(workspace), str(log)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert proc.stdout is not None
        run_id = proc.stdout.readline().strip()
        deadline = time.monotonic() + 30
        while _state(db_path, run_id) != (
            "input_required",
            {"write_file": "pending", "counted": "completed"},
        ):
            assert time.monotonic() < deadline, _state(db_path, run_id)
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)

    async def answer_after_restart() -> tuple[RunState, list[tuple[str, bool]]]:
        provider = ScriptedProvider([Turn("all done")])
        runtime = await Runtime.open(
            db_path=db_path,
            workspace=workspace,
            config=Config(),
            model="scripted:test",
            providers=lambda reference: provider,
        )
        try:
            [request] = await runtime.store.pending_input_requests(run_id=run_id, limit=5)
            await runtime.respond(run_id, request.id, {"decision": "allow_once"})
            final = await runtime.wait(run_id, timeout=WAIT)
        finally:
            await runtime.close()
        blocks = [
            b
            for m in provider.requests[0].messages
            for b in m.content
            if isinstance(b, ToolResultBlock)
        ]
        return final.state, [(str(b.content), b.is_error) for b in blocks]

    state, results = asyncio.run(answer_after_restart())
    assert state is RunState.COMPLETED
    assert log.read_text() == "ran\n"  # once, before the kill
    assert results[1] == ("counted once", False)
    assert not results[0][1] and (workspace / "out.txt").read_text() == "hello"


class _Said(io.StringIO):
    """stderr of the headless driver; ``said`` is set once it told how to answer."""

    def __init__(self) -> None:
        super().__init__()
        self.said = asyncio.Event()

    def write(self, text: str) -> int:
        if "respond" in text:
            self.said.set()
        return super().write(text)


async def test_a_headless_run_stopping_for_an_approval_first_lets_the_allowed_calls_end(
    db_path: Path, workspace: Path
) -> None:
    """`agent-tui run` with nobody to answer exits 3 at the approval; exiting while the calls
    beside it ran would have cut them short (their outcome unknown: the run failed later)."""
    from tui._cli.driver import EventPrinter, Observer, drive

    survey = Survey()
    provider = ScriptedProvider([Turn("", [WRITE, ("survey", {})])])
    runtime = await _open(db_path, workspace, provider, survey)
    try:
        run = await runtime.start("write and survey")
        async with asyncio.timeout(WAIT):
            await survey.started.wait()
        err = _Said()
        printer = EventPrinter(io.StringIO(), err, json_mode=False, main_run_id=run.id)
        observer = Observer(runtime, run.job_id, after=0, printer=printer)
        observer.start()
        driving = asyncio.create_task(drive(runtime, run.id, observer, None))
        async with asyncio.timeout(WAIT):
            await err.said.wait()
        assert not driving.done()  # it waits for the survey
        survey.tick.set()
        survey.gate.set()
        async with asyncio.timeout(WAIT):
            code = await driving
        await observer.stop()
        calls = {c.name: c.state for c in await runtime.tool_calls(run.id)}
    finally:
        await runtime.close()
    assert code == 3
    assert calls == {"write_file": ToolCallState.PENDING, "survey": ToolCallState.COMPLETED}
