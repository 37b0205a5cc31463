"""What a person should see about servers: start-up failures and server warnings, as notices."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from runtime.config import StdioServerConfig
from runtime.mcp import InMemoryServer, McpManager, McpNotice
from tests.fakes.mcp_servers import build_server, stdio_config
from tests.mcp.helpers import Recorder, tool_named


@pytest.mark.slow
async def test_a_server_that_cannot_start_gives_a_notice_with_its_reason_and_stderr_and_a_log_line(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    servers = {
        "broken": stdio_config("broken"),
        "missing": StdioServerConfig(command="agent-tui-no-such-command-xyz"),
    }
    with caplog.at_level(logging.WARNING, logger="runtime.mcp"):
        async with McpManager(servers, workspace=workspace) as manager:
            assert await manager.tools() == []
            notices = manager.take_notices()
            again = manager.take_notices()

    by_server = {notice.server: notice for notice in notices}
    assert set(by_server) == {"broken", "missing"}
    broken = by_server["broken"]
    assert broken.level == "warning"
    assert broken.text.startswith("MCP server 'broken' could not start: exited with code 3")
    assert "fatal: the broken server refuses to start" in broken.text
    assert by_server["missing"].text == (
        "MCP server 'missing' could not start: command not found: "
        "'agent-tui-no-such-command-xyz'; its tools are not available (tried again when next"
        " used after 5 s, or at once if its configuration changes)"
    )
    assert again == []
    assert "fatal: the broken server refuses to start" in caplog.text
    assert "could not start: command not found" in caplog.text


# Server logging is deprecated in the 2026-07-28 protocol; servers on older versions still log.
@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
async def test_server_log_messages_go_to_the_log_and_warnings_become_notices(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    servers = {"basic": InMemoryServer(build_server("basic"))}
    with caplog.at_level(logging.DEBUG, logger="runtime.mcp"):
        async with McpManager(servers, workspace=workspace) as manager:
            chatty = await tool_named(manager, "basic__chatty")
            output = await chatty.run({}, Recorder().context(workspace))
            notices = manager.take_notices()

    assert output.content == "said my piece"
    assert "MCP server basic: starting up the flux capacitor" in caplog.text
    assert "MCP server basic/storage: disk almost full" in caplog.text
    assert notices == [
        McpNotice(
            server="basic", level="warning", text="MCP server 'basic' warning: disk almost full"
        ),
        McpNotice(
            server="basic",
            level="error",
            text='MCP server \'basic\' error: {"error": "quota exceeded"}',
        ),
    ]


async def test_a_server_that_cannot_start_is_said_once_until_its_configuration_changes(
    workspace: Path,
) -> None:
    """Found by a new-user trial: a missing server was a notice on every run."""
    missing = StdioServerConfig(command="agent-tui-no-such-command-xyz")
    async with McpManager(
        {"ghost": missing}, workspace=workspace, retry_failed_after=0.0
    ) as manager:
        assert await manager.tools() == []
        first = manager.take_notices()
        assert await manager.tools() == []  # tried again (in the background) …
        await manager.settle()  # … failed again: nothing new to say
        again = manager.take_notices()
        manager.reconfigure({"ghost": StdioServerConfig(command="agent-tui-still-missing-xyz")})
        assert await manager.tools() == []
        changed = [notice.text for notice in manager.take_notices()]

    assert [notice.text for notice in first] == [
        "MCP server 'ghost' could not start: command not found: "
        "'agent-tui-no-such-command-xyz'; its tools are not available (tried again when next"
        " used)"
    ]
    assert again == []
    assert changed == [
        "MCP server 'ghost': its new configuration is used",
        "MCP server 'ghost' could not start: command not found: "
        "'agent-tui-still-missing-xyz'; its tools are not available (tried again when next"
        " used)",
    ]


async def test_a_server_added_to_the_configuration_is_said_to_be_added_not_changed(
    workspace: Path,
) -> None:
    """Found by a new-user trial: a server added to .mcp.json while agent-tui ran was said
    as "its new configuration is used", as if it had been there before."""
    before = StdioServerConfig(command="agent-tui-before-xyz")
    added = StdioServerConfig(command="agent-tui-added-xyz")
    async with McpManager({"old": before}, workspace=workspace) as manager:
        manager.reconfigure({"old": before, "web": added})
        on_add = [notice.text for notice in manager.take_notices()]
        manager.reconfigure({"old": StdioServerConfig(command="agent-tui-after-xyz")})
        on_change = [notice.text for notice in manager.take_notices()]
    assert on_add == ["MCP server 'web': added"]
    assert on_change == [
        "MCP server 'old': its new configuration is used",
        "MCP server 'web': removed",
    ]
