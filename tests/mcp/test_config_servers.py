"""A shared ``.mcp.json``: what agent-tui can use works, the rest is warned about."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime.config import load_config
from runtime.mcp import McpManager
from tests.cli.harness import Cli
from tests.fakes.mcp_servers import serve_http, stdio_config
from tests.mcp.helpers import Recorder, tool_named

pytestmark = pytest.mark.slow  # real servers over stdio, SSE and HTTP


async def test_good_and_sse_servers_work_while_a_disabled_entry_and_an_unset_variable_are_warned(
    workspace: Path, tmp_path: Path
) -> None:
    good = stdio_config("basic")
    with (
        serve_http("basic", transport="sse") as sse_url,
        serve_http("basic", require_token="s3cret") as guarded_url,
    ):
        servers = {
            "good": {"command": good.command, "args": good.args, "env": good.env, "cwd": good.cwd},
            "legacy": {"type": "sse", "url": sse_url},
            "off": {"command": "agent-tui-no-such-command", "disabled": True},
            "token": {
                "type": "http",
                "url": guarded_url,
                "headers": {"Authorization": "Bearer ${AGENT_TUI_TEST_UNSET_TOKEN}"},
            },
        }
        path = workspace / ".mcp.json"
        path.write_text(json.dumps({"mcpServers": servers}, indent=2))
        config = load_config(workspace, user_config=tmp_path / "none.toml", env={})

        async with McpManager(dict(config.mcp_servers), workspace=workspace) as manager:
            ctx = Recorder().context(workspace)
            good_echo = await tool_named(manager, "good__echo")
            legacy_echo = await tool_named(manager, "legacy__echo")
            from_good = await good_echo.run({"text": "over stdio"}, ctx)
            from_legacy = await legacy_echo.run({"text": "over sse"}, ctx)
            reports = {report.name: report for report in await manager.check()}

    assert (from_good.content, from_legacy.content) == ("over stdio", "over sse")
    assert set(config.mcp_servers) == {"good", "legacy", "token"}
    assert reports["legacy"].ok and reports["legacy"].transport == "sse"
    assert reports["token"].ok is False
    assert (
        reports["token"].error == f"{guarded_url} answered 401 Unauthorized: set headers or OAuth"
    )
    assert any("mcpServers.off.disabled: disabled; skipped" in w for w in config.warnings)
    assert any(
        "mcp_servers.token.headers.Authorization: environment variable "
        "AGENT_TUI_TEST_UNSET_TOKEN is not set" in w
        for w in config.warnings
    )


def test_run_is_not_refused_and_warns_on_stderr_about_the_entries_it_skips(
    tmp_path: Path, workspace: Path
) -> None:
    cli = Cli.create(tmp_path, workspace)
    good = stdio_config("basic")
    servers = {
        "good": {"command": good.command, "args": good.args, "env": good.env, "cwd": good.cwd},
        "legacy": {"type": "sse", "url": "http://127.0.0.1:9/sse"},
        "off": {"command": "agent-tui-no-such-command", "disabled": True},
        "token": {
            "type": "http",
            "url": "http://127.0.0.1:9/mcp",
            "headers": {"Authorization": "Bearer ${AGENT_TUI_TEST_UNSET_TOKEN}"},
        },
    }
    path = workspace / ".mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}, indent=2))

    result = cli.run("run", "hello", "--model", "demo:instant")

    assert result.returncode == 3, result.stderr  # ran, and stopped at the demo's question
    warnings = [line for line in result.stderr.splitlines() if line.startswith("agent-tui: warn")]
    assert any(
        f"{path}" in line and "mcpServers.off.disabled: disabled; skipped" in line
        for line in warnings
    ), result.stderr
    assert any(
        "environment variable AGENT_TUI_TEST_UNSET_TOKEN is not set" in line for line in warnings
    ), result.stderr
