"""MCP results inside runs with Claude (the real SDK against the fake Messages server): what
reaches the model request, and what stays in the database."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runtime.api import Runtime
from runtime.config import Config
from runtime.mcp import InMemoryServer, McpManager
from runtime.models import Role, RunState, ToolCallState, ToolResultBlock
from runtime.results import DEFAULT_RESULT_LIMIT_TOKENS, estimate_tokens
from tests.fakes.anthropic_server import (
    FakeAnthropicServer,
    message_delta,
    message_start,
    stream,
    text_response,
    tool_use_block,
)
from tests.fakes.mcp_servers import build_server

WAIT = 30


@pytest.fixture
async def server() -> AsyncIterator[FakeAnthropicServer]:
    async with FakeAnthropicServer() as fake:
        yield fake


@pytest.fixture
async def runtime(
    server: FakeAnthropicServer, db_path: Path, workspace: Path
) -> AsyncIterator[Runtime]:
    manager = McpManager({"basic": InMemoryServer(build_server("basic"))}, workspace=workspace)
    opened = await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=Config(),
        model="anthropic:claude-sonnet-5",
        env={"ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": server.base_url},
        mcp=manager,
    )
    yield opened
    await opened.close()


def call_tool(name: str, arguments: dict[str, object]) -> dict[str, object]:
    return stream(
        [
            message_start(input_tokens=50),
            *tool_use_block(0, "toolu_big", name, [json.dumps(arguments)]),
            message_delta("tool_use", output_tokens=10),
            {"event": "message_stop", "data": {"type": "message_stop"}},
        ]
    )


async def test_a_million_character_result_is_cut_in_the_request_and_whole_in_the_database(
    server: FakeAnthropicServer, runtime: Runtime
) -> None:
    server.add(call_tool("basic__big", {"lines": 50_000}), text_response("done"))

    run = await runtime.start("read the big thing")
    boundary = await runtime.wait(run.id, timeout=WAIT)

    assert boundary.state is RunState.COMPLETED
    [call] = await runtime.tool_calls(run.id)
    assert call.state is ToolCallState.COMPLETED
    assert call.result is not None and len(call.result) == 1_000_000
    stored = [
        block
        for message in await runtime.messages(run.id)
        if message.role is Role.TOOL
        for block in message.content
        if isinstance(block, ToolResultBlock)
    ]
    assert [len(block.content) for block in stored] == [1_000_000]

    second = server.requests[1].body
    [sent] = [
        block
        for message in second["messages"]
        for block in message["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]
    text = sent["content"] if isinstance(sent["content"], str) else sent["content"][0]["text"]
    assert estimate_tokens(text) <= DEFAULT_RESULT_LIMIT_TOKENS
    assert text.startswith("line 00000000000000\n")
    assert text.endswith("line 00000000049999\n")
    assert "characters (about" in text and "left out here" in text
