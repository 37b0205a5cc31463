"""What a person should see about MCP servers during a run: a server that cannot start, and a
server's warnings, become notices of the run (the TUI shows them, ``run`` prints them on
stderr) and log lines."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runtime.api import Runtime
from runtime.config import Config, Permissions, StdioServerConfig
from runtime.events import Notice, RunStateChanged
from runtime.mcp import InMemoryServer, McpManager
from runtime.mcp.manager import ServerConfig
from runtime.models import RunState
from tests.cli.harness import Cli
from tests.fakes.mcp_servers import build_server, stdio_config
from tests.fakes.scripted import ScriptedProvider, Turn

WAIT = 60


async def run_collecting_notices(
    db_path: Path,
    workspace: Path,
    servers: dict[str, ServerConfig],
    script: list[Turn],
) -> tuple[RunState, list[Notice], ScriptedProvider]:
    provider = ScriptedProvider(list(script))
    runtime = await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=Config(permissions=Permissions(allow=["basic__*"])),
        model="scripted:test",
        providers=lambda reference: provider,
        mcp=McpManager(servers, workspace=workspace),
    )
    notices: list[Notice] = []
    ended = asyncio.Event()

    async def collect(events: AsyncIterator[object]) -> None:
        async for event in events:
            if isinstance(event, Notice):
                notices.append(event)
            elif isinstance(event, RunStateChanged) and event.to_state.is_terminal:
                ended.set()
                return

    try:
        watcher = asyncio.create_task(collect(runtime.observe()))
        await asyncio.sleep(0)  # subscribed before the run starts
        run = await runtime.start("hello")
        boundary = await runtime.wait(run.id, timeout=WAIT)
        async with asyncio.timeout(WAIT):
            await ended.wait()
        await watcher
    finally:
        await runtime.close()
    assert all(notice.run_id == run.id for notice in notices)
    return boundary.state, notices, provider


@pytest.mark.slow  # server subprocesses
async def test_servers_that_cannot_start_during_a_run_give_notices_with_reason_and_stderr(
    db_path: Path, workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    servers: dict[str, ServerConfig] = {
        "broken": stdio_config("broken"),
        "missing": StdioServerConfig(command="agent-tui-no-such-command-xyz"),
        "basic": InMemoryServer(build_server("basic")),
    }
    with caplog.at_level(logging.WARNING, logger="runtime.mcp"):
        state, notices, provider = await run_collecting_notices(
            db_path, workspace, servers, [Turn("the others are down")]
        )

    assert state is RunState.COMPLETED
    texts = sorted(notice.text for notice in notices)
    assert [notice.level for notice in notices] == ["warning", "warning"]
    assert texts[0].startswith("MCP server 'broken' could not start: exited with code 3")
    assert "fatal: the broken server refuses to start" in texts[0]
    assert texts[1] == (
        "MCP server 'missing' could not start: command not found: "
        "'agent-tui-no-such-command-xyz'; its tools are not available (tried again when next"
        " used after 5 s, or at once if its configuration changes)"
    )
    # The good server's tools are offered all the same.
    offered = {tool.name for tool in provider.requests[0].tools}
    assert "basic__echo" in offered and not any(n.startswith("broken__") for n in offered)
    assert "fatal: the broken server refuses to start" in caplog.text
    assert "could not start: command not found" in caplog.text


# Server logging is deprecated in the 2026-07-28 protocol; servers on older versions still log.
@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
async def test_a_servers_warnings_during_a_call_become_notices_of_the_run(
    db_path: Path, workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    servers: dict[str, ServerConfig] = {"basic": InMemoryServer(build_server("basic"))}
    with caplog.at_level(logging.DEBUG, logger="runtime.mcp"):
        state, notices, _ = await run_collecting_notices(
            db_path, workspace, servers, [Turn("", [("basic__chatty", {})]), Turn("heard it")]
        )

    assert state is RunState.COMPLETED
    assert [(notice.level, notice.text) for notice in notices] == [
        ("warning", "MCP server 'basic' warning: disk almost full"),
        ("error", 'MCP server \'basic\' error: {"error": "quota exceeded"}'),
    ]
    assert "MCP server basic: starting up the flux capacitor" in caplog.text  # info: log only


@pytest.mark.slow  # the agent-tui command
def test_run_prints_a_server_that_cannot_start_on_stderr(tmp_path: Path, workspace: Path) -> None:
    cli = Cli.create(tmp_path, workspace)
    (cli.workspace / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"missing": {"command": "agent-tui-no-such-command-xyz"}}})
    )

    result = cli.run("run", "hello", "--model", "demo:instant")

    assert result.returncode == 3, result.stderr  # the demo stops at its question
    assert (
        "agent-tui: warning: MCP server 'missing' could not start: command not found: "
        "'agent-tui-no-such-command-xyz'; its tools are not available"
    ) in result.stderr
    assert "could not start" not in result.stdout


@pytest.mark.slow  # a server subprocess
async def _collect_notices(runtime: Runtime, notices: list[str]) -> None:
    async for event in runtime.observe():
        if isinstance(event, Notice):
            notices.append(event.text)


async def _completed(runtime: Runtime, task: str) -> None:
    run = await runtime.start(task)
    assert (await runtime.wait(run.id, timeout=WAIT)).state is RunState.COMPLETED


async def test_a_server_fixed_in_mcp_json_is_used_by_the_next_run_without_a_restart(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: with agent-tui open, a typo'd command in .mcp.json was
    fixed; the next run still tried the old command, and said so, until a restart."""
    (workspace / "agent-tui.toml").write_text('[permissions]\nallow = ["basic__*"]\n')
    mcp_json = workspace / ".mcp.json"
    mcp_json.write_text(
        json.dumps({"mcpServers": {"basic": {"command": "agent-tui-no-such-command-xyz"}}})
    )
    provider = ScriptedProvider([Turn("first"), Turn("second")])
    runtime = await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        model="scripted:test",
        providers=lambda reference: provider,
    )
    notices: list[str] = []
    watcher = asyncio.create_task(_collect_notices(runtime, notices))
    try:
        await asyncio.sleep(0)  # subscribed before the runs start

        await _completed(runtime, "one")
        assert any("could not start: command not found" in text for text in notices)
        assert not any(t.name.startswith("basic__") for t in provider.requests[0].tools)

        fixed = stdio_config("basic")
        server = {"command": fixed.command, "args": fixed.args, "env": fixed.env}
        mcp_json.write_text(json.dumps({"mcpServers": {"basic": server}}))
        notices.clear()
        await _completed(runtime, "two")
        assert "basic__echo" in {t.name for t in provider.requests[1].tools}
        assert "MCP server 'basic': its new configuration is used" in notices
        assert not any("could not start" in text for text in notices)
    finally:
        watcher.cancel()
        await runtime.close()


async def test_a_configuration_file_edited_into_an_error_is_said_once_and_the_old_settings_stay(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: a typo put in agent-tui.toml while agent-tui ran changed
    nothing and said nothing (only the log knew)."""
    config_file = workspace / "agent-tui.toml"
    config_file.write_text('[permissions]\nallow = ["read_file"]\n')
    provider = ScriptedProvider([Turn("one"), Turn("two"), Turn("three")])
    runtime = await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        model="scripted:test",
        providers=lambda reference: provider,
    )
    notices: list[str] = []
    watcher = asyncio.create_task(_collect_notices(runtime, notices))
    try:
        await asyncio.sleep(0)  # subscribed before the runs start

        await _completed(runtime, "one")
        config_file.write_text("[defaults]\nmax_stpes = 3\n")
        await _completed(runtime, "two")
        [said] = [text for text in notices if "not applied" in text]
        assert "max_stpes" in said and "agent-tui.toml" in said
        await _completed(runtime, "three")  # said once per edit, not at every step
        assert len([text for text in notices if "not applied" in text]) == 1
    finally:
        watcher.cancel()
        await runtime.close()
