"""MCP tools inside runs: progress, approvals, elicitation round trips, restarts."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from runtime.api import Boundary, Runtime
from runtime.config import Config, Permissions
from runtime.events import RunStateChanged, ToolProgress
from runtime.mcp import InMemoryServer, McpManager
from runtime.models import (
    InputKind,
    InputRequestState,
    Run,
    RunState,
    ToolCallState,
    ToolResultBlock,
)
from runtime.tools.base import ToolContext
from runtime.tools.builtin import builtin_tools
from tests.fakes.mcp_servers import build_server, stdio_config
from tests.fakes.scripted import ScriptedProvider, Turn

WAIT = 20

Factory = Callable[[list[Any]], Awaitable[tuple[Runtime, ScriptedProvider]]]


@pytest.fixture
async def make_runtime(db_path: Path, workspace: Path) -> AsyncIterator[Factory]:
    opened: list[Runtime] = []

    async def factory(script: list[Any]) -> tuple[Runtime, ScriptedProvider]:
        provider = ScriptedProvider(script)
        manager = McpManager(
            {"basic": InMemoryServer(build_server("basic"), timeout=1.5)}, workspace=workspace
        )
        runtime = await Runtime.open(
            db_path=db_path,
            workspace=workspace,
            config=Config(),
            model="scripted:test",
            providers=lambda reference: provider,
            tools=dict(builtin_tools()),
            mcp=manager,
        )
        opened.append(runtime)
        return runtime, provider

    yield factory
    for runtime in opened:
        await runtime.close()


def results(provider: ScriptedProvider, call: int) -> list[ToolResultBlock]:
    return [
        block
        for message in provider.requests[call].messages
        for block in message.content
        if isinstance(block, ToolResultBlock)
    ]


async def test_server_progress_becomes_tool_progress_and_the_result_is_committed(
    make_runtime: Factory,
) -> None:
    runtime, model = await make_runtime(
        [Turn("", [("basic__progress", {"steps": 3})]), Turn("counted")]
    )
    progress: list[ToolProgress] = []

    async def collect() -> None:
        async for event in runtime.observe():
            if isinstance(event, ToolProgress):
                progress.append(event)

    watcher = asyncio.create_task(collect())
    await asyncio.sleep(0)
    run = await runtime.start("count")
    boundary = await runtime.wait(run.id, timeout=WAIT)
    watcher.cancel()
    assert boundary.state is RunState.COMPLETED
    assert [p.progress for p in progress] == [1, 2, 3]
    assert progress[-1].message == "step 3 of 3"
    [call] = await runtime.tool_calls(run.id)
    assert call.state is ToolCallState.COMPLETED and call.result == "counted to 3"
    # The model saw the tool among its tools, named server__tool.
    assert "basic__progress" in {t.name for t in model.requests[0].tools}


async def test_an_elicitation_makes_the_run_wait_and_the_answer_goes_back_to_the_server(
    make_runtime: Factory,
) -> None:
    runtime, model = await make_runtime([Turn("", [("basic__ask", {})]), Turn("greeted")])
    run = await runtime.start("who am I?")
    approval = await runtime.wait(run.id, timeout=WAIT)
    # A destructive tool asks for approval first.
    assert approval.request is not None and approval.request.kind is InputKind.APPROVAL
    await runtime.respond(run.id, approval.request.id, {"decision": "allow_once"})
    boundary = await runtime.wait(run.id, timeout=WAIT)
    request = boundary.request
    assert request is not None and request.kind is InputKind.ELICITATION
    assert request.prompt == "Who are you?"
    assert set(request.answer_schema["properties"]) == {"name", "age"}
    assert request.detail["server"] == "basic"
    await runtime.respond(
        run.id, request.id, {"action": "accept", "content": {"name": "Ada", "age": 36}}
    )
    final = await runtime.wait(run.id, timeout=WAIT)
    assert final.state is RunState.COMPLETED
    assert results(model, 1)[0].content == "hello Ada, aged 36"


async def test_a_declined_elicitation_reaches_the_server_as_a_decline(
    make_runtime: Factory,
) -> None:
    runtime, model = await make_runtime([Turn("", [("basic__ask", {})]), Turn("ok")])
    run = await runtime.start("who am I?")
    approval = await runtime.wait(run.id, timeout=WAIT)
    assert approval.request is not None
    await runtime.respond(run.id, approval.request.id, {"decision": "allow_once"})
    boundary = await runtime.wait(run.id, timeout=WAIT)
    assert boundary.request is not None
    await runtime.respond(run.id, boundary.request.id, {"action": "decline"})
    assert (await runtime.wait(run.id, timeout=WAIT)).state is RunState.COMPLETED
    assert results(model, 1)[0].content == "no answer: decline"


async def _a_form_open_as_its_process_ends(
    make_runtime: Factory,
) -> tuple[Run, Boundary, Boundary]:
    """A run whose ``basic__ask`` call (approved) waits on its MCP form when its process
    closes: the run, and its boundaries at the approval and at the form."""
    first, _ = await make_runtime([Turn("", [("basic__ask", {})])])
    run = await first.start("who am I?")
    approval = await first.wait(run.id, timeout=WAIT)
    assert approval.request is not None
    await first.respond(run.id, approval.request.id, {"decision": "allow_once"})
    waiting = await first.wait(run.id, timeout=WAIT)
    assert waiting.request is not None and waiting.request.kind is InputKind.ELICITATION
    await first.close()
    return run, approval, waiting


async def test_an_elicitation_open_at_restart_fails_its_call_and_the_run_naming_the_request(
    make_runtime: Factory,
) -> None:
    run, approval, waiting = await _a_form_open_as_its_process_ends(make_runtime)
    assert approval.request is not None and waiting.request is not None

    second, model = await make_runtime([Turn("I could not ask")])
    assert await second.inbox() == []
    [call] = await second.tool_calls(run.id)
    assert call.state is ToolCallState.FAILED
    assert "MCP server session" in (call.error or "")
    # input_required → failed in one transition (DESIGN §4.1): the call may have acted.
    reopened = await second.get_run(run.id)
    assert reopened.state is RunState.FAILED and reopened.failure is not None
    assert reopened.failure.code == "input_unanswerable"
    assert repr(waiting.request.prompt) in reopened.failure.message
    states = [
        (e.from_state, e.to_state)
        for e in await second.events(run_id=run.id)
        if isinstance(e, RunStateChanged)
    ]
    assert states[-1] == (RunState.INPUT_REQUIRED, RunState.FAILED)
    requests = {r.id: r.state for r in await second.store.list_input_requests(run.id)}
    assert requests == {
        approval.request.id: InputRequestState.ANSWERED,
        waiting.request.id: InputRequestState.CANCELLED,
    }
    retried = await second.retry(run.id)
    assert (await second.wait(retried.id, timeout=WAIT)).state is RunState.COMPLETED
    # The retry continues from the run's last checkpoint, from before the call that asked.
    assert results(model, 0) == [] and retried.retry_of_run_id == run.id


async def test_closing_fails_the_runs_whose_forms_its_sessions_held_at_once(
    make_runtime: Factory, db_path: Path, workspace: Path
) -> None:
    """Found by a trial: after quitting agent-tui with an MCP form open, `runs` and `show` read
    the run as waiting for input and offered `agent-tui respond` until some agent-tui opened the
    database again; the form had ended with its session."""
    run, approval, waiting = await _a_form_open_as_its_process_ends(make_runtime)
    assert approval.request is not None and waiting.request is not None

    # What a command that only reads sees now (it recovers nothing).
    reader = await Runtime.open(db_path=db_path, workspace=workspace, read_only=True)
    try:
        closed = await reader.get_run(run.id)
        assert closed.state is RunState.FAILED and closed.failure is not None
        assert closed.failure.code == "input_unanswerable"
        assert repr(waiting.request.prompt) in closed.failure.message
        assert await reader.inbox() == []
    finally:
        await reader.close()


async def test_a_hanging_read_only_tool_fails_the_call_without_hanging_the_run(
    make_runtime: Factory,
) -> None:
    runtime, model = await make_runtime([Turn("", [("basic__hang_readonly", {})]), Turn("gave up")])
    run = await runtime.start("wait forever")
    boundary = await runtime.wait(run.id, timeout=WAIT)
    assert boundary.state is RunState.COMPLETED
    [result] = results(model, 1)
    assert result.is_error and "did not answer" in result.content


async def test_a_hanging_tool_that_may_have_acted_fails_the_run_as_indeterminate(
    make_runtime: Factory,
) -> None:
    runtime, _ = await make_runtime([Turn("", [("basic__hang", {})])])
    run = await runtime.start("wait forever")
    approval = await runtime.wait(run.id, timeout=WAIT)
    assert approval.request is not None
    await runtime.respond(run.id, approval.request.id, {"decision": "allow_once"})
    boundary = await runtime.wait(run.id, timeout=WAIT)
    assert boundary.state is RunState.FAILED and boundary.run.failure is not None
    assert boundary.run.failure.code == "tool_indeterminate"
    [call] = await runtime.tool_calls(run.id)
    assert call.state is ToolCallState.INDETERMINATE


async def test_an_elicitation_answered_from_another_process_reaches_the_live_session(
    make_runtime: Factory, db_path: Path, workspace: Path
) -> None:
    holder, model = await make_runtime([Turn("", [("basic__ask", {})]), Turn("greeted")])
    run = await holder.start("who am I?")
    approval = await holder.wait(run.id, timeout=WAIT)
    assert approval.request is not None
    await holder.respond(run.id, approval.request.id, {"decision": "allow_once"})
    waiting = await holder.wait(run.id, timeout=WAIT)
    assert waiting.request is not None and waiting.request.kind is InputKind.ELICITATION

    # A second runtime on the same database, as `agent-tui respond` in another shell would be.
    other = await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=Config(),
        model="scripted:test",
        providers=lambda reference: ScriptedProvider([]),
        tools=dict(builtin_tools()),
    )
    try:
        await other.respond(
            run.id, waiting.request.id, {"action": "accept", "content": {"name": "Bo", "age": 7}}
        )
        final = await other.wait(run.id, timeout=WAIT)
    finally:
        await other.close()
    assert final.state is RunState.COMPLETED
    assert results(model, 1)[0].content == "hello Bo, aged 7"


async def test_a_session_that_dies_while_its_form_waits_does_not_leave_the_run_waiting(
    db_path: Path, workspace: Path
) -> None:
    # The server process dies while its form waits, ending the session the form belongs to:
    # the request is withdrawn and the run ends instead of waiting for good. (A call that only
    # runs long does not end it: every call of the server is paused while its form waits.)
    provider = ScriptedProvider([Turn("", [("basic__ask", {})])])
    manager = McpManager({"basic": stdio_config("basic", timeout=1.5)}, workspace=workspace)
    pid_tool = next(tool for tool in await manager.tools() if tool.name == "basic__pid")
    pid = int((await pid_tool.run({}, ToolContext(workspace=workspace))).content)
    runtime = await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=Config(permissions=Permissions(allow=["basic__*"])),
        model="scripted:test",
        providers=lambda reference: provider,
        tools=dict(builtin_tools()),
        mcp=manager,
    )
    try:
        run = await runtime.start("ask and hang")
        waiting = await runtime.wait(run.id, timeout=WAIT)
        assert waiting.request is not None and waiting.request.kind is InputKind.ELICITATION
        os.kill(pid, signal.SIGKILL)
        async with asyncio.timeout(WAIT):
            async for event in runtime.observe(run.id, after=0):
                if isinstance(event, RunStateChanged) and event.to_state.is_terminal:
                    break
        final = await runtime.wait(run.id, timeout=WAIT)
        assert final.state.is_terminal, final
        assert await runtime.inbox() == []
        withdrawn = await runtime.store.get_input_request(waiting.request.id)
        assert withdrawn.state.value == "cancelled"
    finally:
        await runtime.close()


async def test_a_call_to_a_server_that_could_not_start_says_so_not_that_the_tool_is_unknown(
    db_path: Path, workspace: Path
) -> None:
    # Found by a new-user trial: a call to a server that was down read "there is no tool named
    # 'web__echo'; available tools: …" (a hundred names), in the TUI and to the model.
    from runtime.config import StdioServerConfig

    provider = ScriptedProvider([Turn("", [("ghost__echo", {"text": "hi"})]), Turn("ok")])
    missing = StdioServerConfig(command="agent-tui-no-such-command-xyz")
    runtime = await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=Config(),
        model="scripted:test",
        providers=lambda reference: provider,
        mcp=McpManager({"ghost": missing}, workspace=workspace),
    )
    try:
        run = await runtime.start("echo hi")
        assert (await runtime.wait(run.id, timeout=WAIT)).state is RunState.COMPLETED
        [call] = await runtime.tool_calls(run.id)
    finally:
        await runtime.close()
    said = (
        "MCP server 'ghost' could not start: command not found: 'agent-tui-no-such-command-xyz';"
        " ghost__echo cannot be called until it starts"
    )
    assert (call.state, call.error) == (ToolCallState.FAILED, said)
    assert [result.content for result in results(provider, 1)] == [said]
