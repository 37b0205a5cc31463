"""MCP servers over streamable HTTP, on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.config import HttpServerConfig
from runtime.mcp import McpManager
from tests.fakes.mcp_servers import serve_http, unused_port
from tests.mcp.helpers import Recorder, answering, tool_named

TOKEN = "Bearer sk-test-secret-token"


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    with serve_http("basic") as url:
        yield url


async def test_tools_are_listed_and_called_over_http_with_the_configured_headers(
    http_url: str, workspace: Path
) -> None:
    config = HttpServerConfig(url=http_url, headers={"Authorization": TOKEN}, timeout=10.0)
    recorder = Recorder(answer=answering({"action": "accept", "content": {"name": "Cy", "age": 9}}))
    async with McpManager({"remote": config}, workspace=workspace) as manager:
        ctx = recorder.context(workspace)
        echoed = await (await tool_named(manager, "remote__echo")).run({"text": "over http"}, ctx)
        header = await (await tool_named(manager, "remote__header")).run(
            {"name": "Authorization"}, ctx
        )
        counted = await (await tool_named(manager, "remote__progress")).run({"steps": 2}, ctx)
        asked = await (await tool_named(manager, "remote__ask")).run({}, ctx)
        [report] = await manager.check()

    assert echoed.content == "over http"
    assert header.content == TOKEN
    assert counted.content == "counted to 2"
    assert [done for done, _, _ in recorder.progress] == [1.0, 2.0]
    assert asked.content == "hello Cy, aged 9"
    assert report.ok and report.transport == "http" and "remote__echo" in report.tools


async def test_an_unreachable_http_server_is_reported_without_its_headers(workspace: Path) -> None:
    url = f"http://127.0.0.1:{unused_port()}/mcp"
    config = HttpServerConfig(url=url, headers={"Authorization": TOKEN})
    async with McpManager({"down": config}, workspace=workspace) as manager:
        [report] = await manager.check()
        tools = await manager.tools()

    assert tools == []
    assert report.ok is False
    assert report.error == f"could not connect to {url} (connection refused or host unreachable)"
    assert "secret" not in (report.error or "")
    assert manager.errors["down"] == report.error


async def test_a_401_says_so_and_how_to_fix_it(workspace: Path) -> None:
    with serve_http("basic", require_token="right") as url:
        config = HttpServerConfig(url=url, headers={"Authorization": "Bearer wrong"})
        async with McpManager({"guarded": config}, workspace=workspace) as manager:
            [report] = await manager.check()

    assert report.ok is False
    assert report.error == f"{url} answered 401 Unauthorized: set headers or OAuth"
    assert "wrong" not in report.error
