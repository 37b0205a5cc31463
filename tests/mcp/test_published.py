"""Against the published reference servers (``@modelcontextprotocol/server-everything`` and
``server-filesystem``, from npm) over stdio and streamable HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from runtime.config import HttpServerConfig
from runtime.mcp import McpManager
from runtime.mcp.manager import ServerConfig
from runtime.store.base import NewInputRequest
from tests.mcp import published
from tests.mcp.helpers import Recorder, tool_named

pytestmark = pytest.mark.slow  # Node server processes


async def _until_progress(recorder: Recorder, count: int, timeout: float = 60.0) -> None:
    async with asyncio.timeout(timeout):
        while len(recorder.progress) < count:
            await asyncio.sleep(0.01)


async def _long_operation_while_answering(manager: McpManager, workspace: Path) -> None:
    long_recorder = Recorder()
    ask_recorder = Recorder()

    async def answer(request: NewInputRequest) -> Any:
        await _until_progress(long_recorder, 2)  # answered while the operation goes on
        return {"action": "accept", "content": {"name": "Ada Lovelace", "check": True}}

    long_recorder.answer = ask_recorder.answer = answer
    long_tool = await tool_named(manager, "everything__trigger-long-running-operation")
    ask_tool = await tool_named(manager, "everything__trigger-elicitation-request")
    long_task = asyncio.create_task(
        long_tool.run(
            {"duration": 3, "steps": 3}, long_recorder.context(workspace, tool_call_id="long")
        )
    )
    await _until_progress(long_recorder, 1)
    asked = await ask_tool.run({}, ask_recorder.context(workspace, tool_call_id="ask"))
    async with asyncio.timeout(60):
        done = await long_task

    assert "Long running operation completed. Duration: 3 seconds, Steps: 3." in done.content
    assert [step for step, _, _ in long_recorder.progress] == [1.0, 2.0, 3.0]
    assert "User provided the requested information" in asked.content
    assert "- Name: Ada Lovelace" in asked.content
    [request] = long_recorder.requests + ask_recorder.requests
    assert request.detail["server"] == "everything"
    assert request.answer_schema["required"] == ["name"]


async def test_server_everything_over_stdio_runs_a_long_operation_while_a_question_is_answered(
    workspace: Path,
) -> None:
    servers: dict[str, ServerConfig] = {"everything": published.stdio("everything", "stdio")}
    async with McpManager(servers, workspace=workspace) as manager:
        await _long_operation_while_answering(manager, workspace)


@pytest.fixture
async def everything_http() -> AsyncIterator[published.HttpServer]:
    with published.http_server() as server:
        yield server


async def test_server_everything_over_http_runs_a_long_operation_while_a_question_is_answered(
    everything_http: published.HttpServer, workspace: Path
) -> None:
    servers: dict[str, ServerConfig] = {
        "everything": HttpServerConfig(url=everything_http.url, timeout=60.0)
    }
    async with McpManager(servers, workspace=workspace) as manager:
        await _long_operation_while_answering(manager, workspace)


async def test_a_restarted_http_server_gets_a_new_session_and_the_next_call_succeeds(
    everything_http: published.HttpServer, workspace: Path
) -> None:
    servers: dict[str, ServerConfig] = {
        "everything": HttpServerConfig(url=everything_http.url, timeout=30.0)
    }
    async with McpManager(servers, workspace=workspace) as manager:
        echo = await tool_named(manager, "everything__echo")
        ctx = Recorder().context(workspace)
        first = await echo.run({"message": "before"}, ctx)
        everything_http.stop()
        everything_http.start()  # same port, no sessions: ours is unknown now (404)
        second = await echo.run({"message": "after"}, ctx)

    assert first.content == "Echo: before"
    assert second.content == "Echo: after"


async def test_server_filesystem_text_is_sent_once_not_again_as_structured_json(
    workspace: Path,
) -> None:
    text = "".join(f"{number:04d} a line of the notes\n" for number in range(400))
    (workspace / "notes.txt").write_text(text)
    servers: dict[str, ServerConfig] = {"filesystem": published.stdio("filesystem", str(workspace))}
    async with McpManager(servers, workspace=workspace) as manager:
        read = await tool_named(manager, "filesystem__read_text_file")
        output = await read.run(
            {"path": str(workspace / "notes.txt")}, Recorder().context(workspace)
        )

    assert output.structured == {"content": text}
    assert output.content == text


async def test_published_servers_images_come_back_as_images_never_as_base64(
    workspace: Path,
) -> None:
    import base64

    from tests.fakes.mcp_servers import PNG_BYTES

    (workspace / "pixel.png").write_bytes(PNG_BYTES)
    servers: dict[str, ServerConfig] = {
        "everything": published.stdio("everything", "stdio"),
        "filesystem": published.stdio("filesystem", str(workspace)),
    }
    async with McpManager(servers, workspace=workspace) as manager:
        ctx = Recorder().context(workspace)
        tiny = await (await tool_named(manager, "everything__get-tiny-image")).run({}, ctx)
        media = await (await tool_named(manager, "filesystem__read_media_file")).run(
            {"path": str(workspace / "pixel.png")}, ctx
        )

    assert [image.media_type for image in tiny.images] == ["image/png"]
    assert "[image: png 20×20, " in tiny.content
    assert "Here's the image you requested:" in tiny.content
    # server-filesystem sends the image twice (content and structuredContent): once here.
    assert [image.data for image in media.images] == [PNG_BYTES]
    assert media.content == f"[image: png 1×1, {len(PNG_BYTES)} B]"
    encoded = base64.b64encode(PNG_BYTES).decode()
    assert encoded not in tiny.content + media.content
    assert encoded not in repr(media.structured)


async def test_resources_and_prompts_of_server_everything_for_the_composer(
    workspace: Path,
) -> None:
    from runtime.errors import ToolError
    from runtime.mcp.catalog import (
        bind_arguments,
        get_prompt,
        list_prompts,
        list_resources,
        parse_mention,
        parse_prompt_command,
        read_resource,
    )

    servers: dict[str, ServerConfig] = {"everything": published.stdio("everything", "stdio")}
    async with McpManager(servers, workspace=workspace) as manager:
        resources = await list_resources(manager)
        document = next(
            r for r in resources if r.uri.startswith("demo://resource/static/document/")
        )
        mention = parse_mention(document.mention)
        assert mention is not None
        attached = await read_resource(manager, *mention)
        prompts = {prompt.command: prompt for prompt in await list_prompts(manager)}
        command = parse_prompt_command('/everything:args-prompt "New York" state=NY')
        assert command is not None
        messages = await get_prompt(manager, *command)

    assert mention == ("everything", document.uri)
    assert attached.text.strip()
    args_prompt = prompts["/everything:args-prompt"]
    assert [(a.name, a.required) for a in args_prompt.arguments] == [
        ("city", True),
        ("state", False),
    ]
    assert [(m.role, m.text) for m in messages] == [("user", "What's weather in New York, NY?")]
    with pytest.raises(ToolError, match=r"/everything:args-prompt needs city"):
        bind_arguments(args_prompt, {"state": "NY"})
