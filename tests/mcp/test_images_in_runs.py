"""Images inside runs with Claude (the real SDK against the fake Messages server): a tool's image
reaches the model request as an image block, its bytes are stored once by hash, and the stored
messages only refer to them."""

from __future__ import annotations

import base64
import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from runtime.api import Runtime
from runtime.config import Config
from runtime.mcp import InMemoryServer, McpManager
from runtime.mcp.manager import ServerConfig
from runtime.models import Role, RunState, ToolCallState, ToolResultBlock
from tests.fakes.anthropic_server import (
    FakeAnthropicServer,
    message_delta,
    message_start,
    stream,
    text_response,
    tool_use_block,
)
from tests.fakes.mcp_servers import PNG_BYTES, build_server
from tests.mcp import published

WAIT = 60
ENCODED = base64.b64encode(PNG_BYTES).decode()


def call_tools(*calls: tuple[str, dict[str, Any]]) -> dict[str, object]:
    blocks = [
        event
        for index, (name, arguments) in enumerate(calls)
        for event in tool_use_block(index, f"toolu_{index}", name, [json.dumps(arguments)])
    ]
    return stream(
        [
            message_start(input_tokens=50),
            *blocks,
            message_delta("tool_use", output_tokens=10),
            {"event": "message_stop", "data": {"type": "message_stop"}},
        ]
    )


async def open_runtime(
    server: FakeAnthropicServer, db_path: Path, workspace: Path, servers: dict[str, ServerConfig]
) -> Runtime:
    return await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=Config(),
        model="anthropic:claude-sonnet-5",
        env={"ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": server.base_url},
        mcp=McpManager(servers, workspace=workspace) if servers else None,
    )


def sent_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        block
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]


def parts(result: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    content = result["content"]
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if kind == "text" else []
    return [part for part in content if part["type"] == kind]


@pytest.fixture
async def server() -> AsyncIterator[FakeAnthropicServer]:
    async with FakeAnthropicServer() as fake:
        yield fake


async def test_an_mcp_image_reaches_claude_as_an_image_block_and_is_stored_once_by_hash(
    server: FakeAnthropicServer, db_path: Path, workspace: Path
) -> None:
    server.add(
        call_tools(("basic__picture", {}), ("basic__picture", {})),
        text_response("Two transparent pixels."),
        text_response("Still two pixels."),
    )
    runtime = await open_runtime(
        server, db_path, workspace, {"basic": InMemoryServer(build_server("basic"))}
    )
    try:
        run = await runtime.start("show me the picture twice")
        boundary = await runtime.wait(run.id, timeout=WAIT)
        assert boundary.state is RunState.COMPLETED
        # A follow-up reads the job's history back from the database: the images go again.
        follow_up = await runtime.follow_up(run.job_id, "and now?")
        assert (await runtime.wait(follow_up.id, timeout=WAIT)).state is RunState.COMPLETED
        calls = await runtime.tool_calls(run.id)
        stored = [
            block
            for message in await runtime.messages(run.id)
            if message.role is Role.TOOL
            for block in message.content
            if isinstance(block, ToolResultBlock)
        ]
    finally:
        await runtime.close()

    assert [call.state for call in calls] == [ToolCallState.COMPLETED] * 2
    results = sent_results(server.requests[1].body)
    assert len(results) == 2
    again = sent_results(server.requests[2].body)
    assert [parts(result, "image") for result in again] == [
        parts(result, "image") for result in results
    ]
    for result in results:
        [text] = parts(result, "text")
        [image] = parts(result, "image")
        assert text["text"].startswith("[image: png 1×1, ")
        assert image["source"] == {"type": "base64", "media_type": "image/png", "data": ENCODED}
        assert ENCODED not in text["text"]
    # The database: the result refers to the image by hash; its bytes are in blobs, once.
    assert [len(block.images) for block in stored] == [1, 1]
    assert stored[0].images[0].sha256 == stored[1].images[0].sha256
    assert stored[0].images[0].label == f"[image: png 1×1, {len(PNG_BYTES)} B]"
    with sqlite3.connect(db_path) as conn:
        blobs = conn.execute("SELECT sha256, data FROM blobs").fetchall()
        rows = [
            str(row[0])
            for table, column in [("messages", "content"), ("events", "payload")]
            for row in conn.execute(f"SELECT {column} FROM {table}")
        ]
    assert blobs == [(stored[0].images[0].sha256, PNG_BYTES)]
    assert any(stored[0].images[0].sha256 in row for row in rows)
    assert not any(ENCODED in row for row in rows)


async def test_read_file_on_a_png_reaches_claude_as_an_image_block(
    server: FakeAnthropicServer, db_path: Path, workspace: Path
) -> None:
    (workspace / "pixel.png").write_bytes(PNG_BYTES)
    server.add(call_tools(("read_file", {"path": "pixel.png"})), text_response("A pixel."))
    runtime = await open_runtime(server, db_path, workspace, {})
    try:
        run = await runtime.start("look at pixel.png")
        assert (await runtime.wait(run.id, timeout=WAIT)).state is RunState.COMPLETED
    finally:
        await runtime.close()

    [result] = sent_results(server.requests[1].body)
    [image] = parts(result, "image")
    assert image["source"]["media_type"] == "image/png"
    assert base64.b64decode(image["source"]["data"]) == PNG_BYTES
    assert all(ENCODED not in part["text"] for part in parts(result, "text"))


@pytest.mark.slow  # a Node server process
async def test_server_filesystems_read_media_file_reaches_claude_as_one_image_block(
    server: FakeAnthropicServer, db_path: Path, workspace: Path
) -> None:
    (workspace / "pixel.png").write_bytes(PNG_BYTES)
    arguments = {"path": str(workspace / "pixel.png")}
    server.add(call_tools(("filesystem__read_media_file", arguments)), text_response("A pixel."))
    runtime = await open_runtime(
        server,
        db_path,
        workspace,
        {"filesystem": published.stdio("filesystem", str(workspace))},
    )
    try:
        run = await runtime.start("look at pixel.png")
        assert (await runtime.wait(run.id, timeout=WAIT)).state is RunState.COMPLETED
    finally:
        await runtime.close()

    body = server.requests[1].body
    [result] = sent_results(body)
    # server-filesystem sends the image in content and in structuredContent: one image here.
    [image] = parts(result, "image")
    assert image["source"] == {"type": "base64", "media_type": "image/png", "data": ENCODED}
    assert [part["text"] for part in parts(result, "text")] == [
        f"[image: png 1×1, {len(PNG_BYTES)} B]"
    ]
    assert json.dumps(body).count(ENCODED) == 1  # never also as text


async def test_an_mcp_image_reaches_an_openai_compatible_model_as_an_image_part_in_a_run(
    db_path: Path, workspace: Path
) -> None:
    from tests.fakes.openai_server import (
        FakeOpenAIServer,
        openai_text_response,
        openai_tool_calls_response,
    )

    async with FakeOpenAIServer() as server:
        server.add(
            openai_tool_calls_response([("call_1", "basic__picture", {})]),
            openai_text_response("A pixel."),
        )
        runtime = await Runtime.open(
            db_path=db_path,
            workspace=workspace,
            config=Config(),
            model="openai:llava",
            env={"OPENAI_BASE_URL": server.base_url},
            mcp=McpManager({"basic": InMemoryServer(build_server("basic"))}, workspace=workspace),
        )
        try:
            run = await runtime.start("show me the picture")
            assert (await runtime.wait(run.id, timeout=WAIT)).state is RunState.COMPLETED
        finally:
            await runtime.close()
        body = server.requests[1].body

    [tool] = [entry for entry in body["messages"] if entry["role"] == "tool"]
    assert tool["content"].startswith("[image: png 1×1, ")
    after = body["messages"][body["messages"].index(tool) + 1]
    assert after["role"] == "user"
    urls = [part["image_url"]["url"] for part in after["content"] if part["type"] == "image_url"]
    assert urls == [f"data:image/png;base64,{ENCODED}"]
