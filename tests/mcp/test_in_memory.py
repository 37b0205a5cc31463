"""MCP servers as tools, against real SDK servers running in this process."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from runtime.errors import ToolError, ToolOutcomeUnknown
from runtime.mcp import InMemoryServer, McpManager
from runtime.models import InputKind
from runtime.store.base import NewInputRequest
from tests.fakes.mcp_servers import PNG_BYTES, build_server
from tests.mcp.helpers import Recorder, answering, tool_named


@pytest.fixture
async def manager(workspace: Path) -> AsyncIterator[McpManager]:
    servers = {"basic": InMemoryServer(build_server("basic"), timeout=5.0)}
    async with McpManager(servers, workspace=workspace) as manager:
        yield manager


async def test_tools_are_named_server__tool_with_the_servers_schema_and_description(
    manager: McpManager,
) -> None:
    tools = {tool.name: tool for tool in await manager.tools()}

    assert {"basic__echo", "basic__add", "basic__ask", "basic__progress"} <= set(tools)
    add = tools["basic__add"]
    assert add.description == "Add two integers."
    assert add.input_schema["type"] == "object"
    assert set(add.input_schema["properties"]) == {"a", "b"}
    assert add.input_schema["required"] == ["a", "b"]
    assert (add.server, add.remote_name) == ("basic", "add")
    assert manager.errors == {}


async def test_read_only_tools_are_allowed_by_default_and_others_ask(manager: McpManager) -> None:
    tools = {tool.name: tool for tool in await manager.tools()}

    assert (tools["basic__echo"].read_only, tools["basic__echo"].approval_default) == (
        True,
        "allow",
    )
    assert (tools["basic__crash"].read_only, tools["basic__crash"].approval_default) == (
        False,
        "ask",
    )
    # No annotations at all: unknown, so it asks.
    assert (tools["basic__add"].read_only, tools["basic__add"].approval_default) == (False, "ask")


async def test_a_call_returns_the_servers_text_and_structured_content(
    manager: McpManager, workspace: Path
) -> None:
    ctx = Recorder().context(workspace)

    echoed = await (await tool_named(manager, "basic__echo")).run({"text": "hi there"}, ctx)
    added = await (await tool_named(manager, "basic__add")).run({"a": 2, "b": 40}, ctx)

    assert echoed.content == "hi there"
    assert added.content == "42"
    assert added.structured == {"result": 42}
    assert not added.is_error


async def test_an_error_result_becomes_a_tool_error_carrying_the_servers_text(
    manager: McpManager, workspace: Path
) -> None:
    fail = await tool_named(manager, "basic__fail")

    with pytest.raises(ToolError) as raised:
        await fail.run({"reason": "the disk is full"}, Recorder().context(workspace))

    assert not isinstance(raised.value, ToolOutcomeUnknown)
    assert "the disk is full" in str(raised.value)


async def test_progress_notifications_reach_the_tool_context(
    manager: McpManager, workspace: Path
) -> None:
    recorder = Recorder()
    progress = await tool_named(manager, "basic__progress")

    output = await progress.run({"steps": 3}, recorder.context(workspace))

    assert output.content == "counted to 3"
    assert recorder.progress == [
        (1.0, 3.0, "step 1 of 3"),
        (2.0, 3.0, "step 2 of 3"),
        (3.0, 3.0, "step 3 of 3"),
    ]


async def test_an_image_comes_back_as_an_image_and_is_described_in_the_text(
    manager: McpManager, workspace: Path
) -> None:
    picture = await tool_named(manager, "basic__picture")

    output = await picture.run({}, Recorder().context(workspace))

    assert output.content == f"[image: png 1×1, {len(PNG_BYTES)} B]"
    assert [(image.data, image.media_type) for image in output.images] == [(PNG_BYTES, "image/png")]
    assert "iVBOR" not in output.content


async def test_an_elicitation_becomes_an_input_request_and_the_answer_returns_to_the_server(
    manager: McpManager, workspace: Path
) -> None:
    recorder = Recorder(
        answer=answering({"action": "accept", "content": {"name": "Ada", "age": 36}})
    )
    ask = await tool_named(manager, "basic__ask")

    output = await ask.run({}, recorder.context(workspace, tool_call_id="tc-7"))

    assert output.content == "hello Ada, aged 36"
    [request] = recorder.requests
    assert request.kind is InputKind.ELICITATION
    assert request.prompt == "Who are you?"
    assert request.answer_schema["type"] == "object"
    assert set(request.answer_schema["properties"]) == {"name", "age"}
    assert request.tool_call_id == "tc-7"
    assert request.detail == {"server": "basic", "tool": "ask", "calls": ["ask"]}


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_a_declined_or_cancelled_elicitation_reaches_the_server_as_such(
    manager: McpManager, workspace: Path, action: str
) -> None:
    recorder = Recorder(answer=answering({"action": action}))
    ask = await tool_named(manager, "basic__ask")

    output = await ask.run({}, recorder.context(workspace))

    assert output.content == f"no answer: {action}"


async def test_an_elicitation_that_cannot_be_asked_is_cancelled(
    manager: McpManager, workspace: Path
) -> None:
    recorder = Recorder(answer=None)  # request_input raises
    ask = await tool_named(manager, "basic__ask")

    output = await ask.run({}, recorder.context(workspace))

    assert output.content == "no answer: cancel"
    assert len(recorder.requests) == 1


async def test_time_spent_waiting_for_a_person_does_not_count_against_the_timeout(
    workspace: Path,
) -> None:
    servers = {"basic": InMemoryServer(build_server("basic"), timeout=0.3)}

    async def slow_person(request: NewInputRequest) -> Any:
        await asyncio.sleep(0.6)  # the person takes longer than the server's call timeout
        return {"action": "accept", "content": {"name": "Bo", "age": 5}}

    async with McpManager(servers, workspace=workspace) as manager:
        ask = await tool_named(manager, "basic__ask")
        output = await ask.run({}, Recorder(answer=slow_person).context(workspace))

    assert output.content == "hello Bo, aged 5"


async def test_a_server_that_stops_answering_fails_the_call_after_its_timeout_and_recovers(
    workspace: Path,
) -> None:
    servers = {"basic": InMemoryServer(build_server("basic"), timeout=0.3)}
    async with McpManager(servers, workspace=workspace) as manager:
        ctx = Recorder().context(workspace)
        hang = await tool_named(manager, "basic__hang")
        hang_readonly = await tool_named(manager, "basic__hang_readonly")

        with pytest.raises(ToolOutcomeUnknown) as unknown:
            await hang.run({}, ctx)
        with pytest.raises(ToolError) as failed:
            await hang_readonly.run({}, ctx)
        echoed = await (await tool_named(manager, "basic__echo")).run({"text": "back"}, ctx)

    assert "MCP server 'basic' did not answer within 0.3 s while running 'hang'" in str(
        unknown.value
    )
    assert not isinstance(failed.value, ToolOutcomeUnknown)
    assert "did not answer within 0.3 s while running 'hang_readonly'" in str(failed.value)
    assert echoed.content == "back"


async def test_a_tool_that_requires_mcp_tasks_is_not_offered_and_doctor_says_why(
    manager: McpManager,
) -> None:
    names = {tool.name for tool in await manager.tools()}
    [report] = await manager.check()

    assert "basic__background" not in names
    assert "basic__echo" in names
    assert "basic__background" not in report.tools
    assert report.unsupported == ["basic__background (requires MCP tasks)"]


async def test_context_counts_the_tools_offered_as_doctor_does_and_names_the_rest(
    manager: McpManager,
) -> None:
    """Found by a trial: `/context` read "basic: running, 17 tools" where `doctor` listed 16
    and the model was offered 16 (the 17th requires MCP tasks)."""
    offered = [tool for tool in await manager.tools() if tool.name.startswith("basic__")]
    assert manager.status()["basic"] == (
        f"running, {len(offered)} tools (1 more not offered: it requires MCP tasks)"
    )
