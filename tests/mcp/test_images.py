"""MCP images reach the model as images: from the server, stored once by hash, loaded for the
request, and sent to Claude (the real SDK against the fake Messages server) and to an
OpenAI-compatible server in their formats."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from runtime.images import RequestImages, store_images, with_image_data
from runtime.mcp import InMemoryServer, McpManager
from runtime.models import Role, TextBlock, ToolResultBlock, ToolUseBlock
from runtime.providers.anthropic import AnthropicProvider
from runtime.providers.openai import OpenAIProvider
from runtime.store.sqlite import SqliteStore, open_sqlite_store
from tests.fakes.anthropic_server import FakeAnthropicServer, text_response
from tests.fakes.mcp_servers import PNG_BYTES, build_server
from tests.fakes.openai_server import FakeOpenAIServer, openai_text_response
from tests.mcp.helpers import Recorder, tool_named
from tests.providers.helpers import API_KEY, collect, message, request, tool


@pytest.fixture
async def store(db_path: Path) -> AsyncIterator[SqliteStore]:
    opened = await open_sqlite_store(db_path)
    yield opened
    await opened.close()


async def _picture_history(store: SqliteStore, workspace: Path) -> list[Any]:
    """A run's history whose tool result holds the image a server returned (as the engine
    stores it: the bytes in blobs, the result referring to them by hash)."""
    async with McpManager(
        {"basic": InMemoryServer(build_server("basic"))}, workspace=workspace
    ) as manager:
        picture = await tool_named(manager, "basic__picture")
        output = await picture.run({}, Recorder().context(workspace))
    images = await store_images(store, output.images)
    result = ToolResultBlock(
        tool_use_id="toolu_P", tool_call_id="tc-1", content=output.content, images=images
    )
    assert "data" not in result.model_dump_json()  # what the store keeps: no bytes
    return [
        message(0, Role.USER, TextBlock(text="Show me the picture.")),
        message(
            1,
            Role.ASSISTANT,
            ToolUseBlock(id="toolu_P", tool_call_id="tc-1", name="basic__picture", input={}),
        ),
        message(2, Role.TOOL, result),
    ]


async def test_an_image_is_stored_once_by_hash(store: SqliteStore, workspace: Path) -> None:
    first = await store_images(store, (await _picture_tool_images(workspace)))
    second = await store_images(store, (await _picture_tool_images(workspace)))

    assert first == second
    [image] = first
    assert (image.media_type, image.size, image.width, image.height) == (
        "image/png",
        len(PNG_BYTES),
        1,
        1,
    )
    assert image.label == f"[image: png 1×1, {len(PNG_BYTES)} B]"
    assert await store.get_blob(image.sha256) == ("image/png", PNG_BYTES)


async def _picture_tool_images(workspace: Path) -> Any:
    async with McpManager(
        {"basic": InMemoryServer(build_server("basic"))}, workspace=workspace
    ) as manager:
        picture = await tool_named(manager, "basic__picture")
        return (await picture.run({}, Recorder().context(workspace))).images


async def test_an_image_result_reaches_claude_as_an_image_block(
    store: SqliteStore, workspace: Path
) -> None:
    history = await with_image_data(store, await _picture_history(store, workspace))
    async with FakeAnthropicServer() as server:
        server.add(text_response("A single transparent pixel."))
        provider = AnthropicProvider("claude-test", api_key=API_KEY, base_url=server.base_url)
        try:
            await collect(provider, request(history, tools=[tool("basic__picture")]))
        finally:
            await provider.aclose()
        body = server.requests[0].body

    [result] = [
        block
        for turn in body["messages"]
        for block in turn["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]
    text, image = result["content"]
    assert text["type"] == "text" and text["text"].startswith("[image: png 1×1")
    assert image["type"] == "image"
    assert image["source"]["type"] == "base64"
    assert image["source"]["media_type"] == "image/png"
    assert base64.b64decode(image["source"]["data"]) == PNG_BYTES


async def test_an_image_result_reaches_an_openai_compatible_model_as_an_image_part(
    store: SqliteStore, workspace: Path
) -> None:
    history = await with_image_data(store, await _picture_history(store, workspace))
    async with FakeOpenAIServer() as server:
        server.add(openai_text_response("A pixel."))
        provider = OpenAIProvider("llava", base_url=server.base_url, api_key=API_KEY)
        try:
            await collect(provider, request(history, model="llava", tools=[tool("basic__picture")]))
        finally:
            await provider.aclose()
        body = server.requests[0].body

    roles = [entry["role"] for entry in body["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "user"]
    assert body["messages"][3]["content"].startswith("[image: png 1×1")
    parts = body["messages"][4]["content"]
    [url] = [part["image_url"]["url"] for part in parts if part["type"] == "image_url"]
    assert url == "data:image/png;base64," + base64.b64encode(PNG_BYTES).decode()


async def test_an_execution_loads_each_image_once_and_attaches_it_to_every_later_request(
    store: SqliteStore, workspace: Path
) -> None:
    history = await _picture_history(store, workspace)
    images = RequestImages(store)
    reads: list[str] = []
    get_blob = store.get_blob

    async def counted(sha256: str) -> tuple[str, bytes]:
        reads.append(sha256)
        return await get_blob(sha256)

    store.get_blob = counted  # type: ignore[method-assign]

    def sent(request: list[Any]) -> list[str | None]:
        return [
            image.data
            for m in request
            for b in m.content
            if isinstance(b, ToolResultBlock)
            for image in b.images
        ]

    first = await images.attach(list(history))
    assert sent(first) == [base64.b64encode(PNG_BYTES).decode("ascii")]
    # Each request is a new list (the history with a compaction applied): later ones still
    # carry the image, and so does a new image result appended to the history.
    second_result = history[2].model_copy(update={"id": "m-3", "position": 3})
    history.append(second_result)
    second = await images.attach(list(history))
    assert sent(second) == sent(first) * 2
    third = await images.attach(list(history[1:]))
    assert sent(third) == sent(first) * 2
    assert len(reads) == 1  # one image, read once
