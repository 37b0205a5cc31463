"""MCP servers as stdio subprocesses: lifecycle, crashes, hangs, startup failures."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from pathlib import Path

import pytest

from runtime.clock import ManualClock
from runtime.config import StdioServerConfig
from runtime.errors import ToolError, ToolOutcomeUnknown
from runtime.mcp import McpManager
from tests.fakes.mcp_servers import stdio_config
from tests.mcp.helpers import Recorder, tool_named

pytestmark = pytest.mark.slow  # starts real server subprocesses


def _process_gone(pid: int) -> bool:
    """True once the process is gone and reaped (a zombie still answers signal 0)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def test_a_server_starts_on_first_use_and_stays_up_between_calls(workspace: Path) -> None:
    manager = McpManager({"basic": stdio_config("basic")}, workspace=workspace)
    try:
        pid_tool = await tool_named(manager, "basic__pid")
        ctx = Recorder().context(workspace)
        first = await pid_tool.run({}, ctx)
        echoed = await (await tool_named(manager, "basic__echo")).run({"text": "hello"}, ctx)
        second = await pid_tool.run({}, ctx)
    finally:
        await manager.aclose()

    assert echoed.content == "hello"
    assert first.content == second.content
    assert _process_gone(int(first.content)), "aclose left the server process behind"


async def test_a_server_that_exits_mid_call_makes_the_call_indeterminate_and_restarts(
    workspace: Path,
) -> None:
    async with McpManager({"basic": stdio_config("basic")}, workspace=workspace) as manager:
        ctx = Recorder().context(workspace)
        pid_tool = await tool_named(manager, "basic__pid")
        before = int((await pid_tool.run({}, ctx)).content)

        with pytest.raises(ToolOutcomeUnknown) as raised:
            await (await tool_named(manager, "basic__crash")).run({}, ctx)
        after = int((await pid_tool.run({}, ctx)).content)

    message = str(raised.value)
    assert message.startswith(
        "MCP server 'basic' exited while running 'crash' "
        "(code 7; stderr: about to crash on purpose); it will be restarted on next use"
    )
    assert after != before
    assert _process_gone(before) and _process_gone(after)


async def test_a_read_only_tool_whose_server_exits_is_a_plain_failed_call(
    workspace: Path,
) -> None:
    async with McpManager({"basic": stdio_config("basic")}, workspace=workspace) as manager:
        ctx = Recorder().context(workspace)
        with pytest.raises(ToolError) as raised:
            await (await tool_named(manager, "basic__crash_readonly")).run({}, ctx)
        echoed = await (await tool_named(manager, "basic__echo")).run({"text": "again"}, ctx)

    assert not isinstance(raised.value, ToolOutcomeUnknown)
    assert "MCP server 'basic' exited" in str(raised.value)
    assert echoed.content == "again"


async def test_a_server_that_stops_answering_is_stopped_after_its_timeout_and_restarted(
    workspace: Path,
) -> None:
    config = stdio_config("basic", timeout=1.0)
    async with McpManager({"basic": config}, workspace=workspace) as manager:
        ctx = Recorder().context(workspace)
        pid_tool = await tool_named(manager, "basic__pid")
        before = int((await pid_tool.run({}, ctx)).content)

        with pytest.raises(ToolOutcomeUnknown) as raised:
            await (await tool_named(manager, "basic__hang")).run({}, ctx)
        after = int((await pid_tool.run({}, ctx)).content)

    assert "MCP server 'basic' did not answer within 1 s while running 'hang'" in str(raised.value)
    assert after != before
    assert _process_gone(before) and _process_gone(after)


async def test_a_command_that_does_not_exist_is_reported_and_does_not_break_other_servers(
    workspace: Path,
) -> None:
    servers = {
        "missing": StdioServerConfig(command="agent-tui-no-such-command-xyz"),
        "basic": stdio_config("basic"),
    }
    async with McpManager(servers, workspace=workspace) as manager:
        names = {tool.name for tool in await manager.tools()}
        reports = {report.name: report for report in await manager.check()}

    assert "basic__echo" in names
    assert not any(name.startswith("missing__") for name in names)
    assert manager.errors["missing"] == "command not found: 'agent-tui-no-such-command-xyz'"
    assert reports["missing"].ok is False
    assert reports["missing"].transport == "stdio"
    assert reports["missing"].error == "command not found: 'agent-tui-no-such-command-xyz'"
    assert reports["basic"].ok is True
    assert "basic__add" in reports["basic"].tools


async def test_a_server_that_exits_at_startup_is_reported_with_its_exit_code_and_stderr(
    workspace: Path,
) -> None:
    async with McpManager({"broken": stdio_config("broken")}, workspace=workspace) as manager:
        [report] = await manager.check()
        tools = await manager.tools()

    assert tools == []
    assert report.ok is False
    assert report.error is not None
    assert report.error.startswith("exited with code 3 during startup; stderr: ")
    assert "fatal: the broken server refuses to start" in report.error


async def test_the_published_time_server_lists_its_tools_and_tells_the_time(
    workspace: Path,
) -> None:
    config = StdioServerConfig(
        command=sys.executable, args=["-m", "mcp_server_time", "--local-timezone", "UTC"]
    )
    async with McpManager({"time": config}, workspace=workspace) as manager:
        tools = {tool.name: tool for tool in await manager.tools()}
        output = await tools["time__get_current_time"].run(
            {"timezone": "UTC"}, Recorder().context(workspace)
        )

    assert {"time__get_current_time", "time__convert_time"} <= set(tools)
    assert "timezone" in tools["time__get_current_time"].input_schema["properties"]
    assert re.search(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}", output.content), output.content


async def test_a_server_that_died_while_idle_is_restarted_before_the_next_call(
    workspace: Path,
) -> None:
    async with McpManager({"basic": stdio_config("basic")}, workspace=workspace) as manager:
        ctx = Recorder().context(workspace)
        pid_tool = await tool_named(manager, "basic__pid")
        add_tool = await tool_named(manager, "basic__add")
        pids = [int((await pid_tool.run({}, ctx)).content)]
        for _ in range(3):
            os.kill(pids[-1], signal.SIGKILL)
            async with asyncio.timeout(10):
                while not _process_gone(pids[-1]):
                    await asyncio.sleep(0.01)
            # A tool that may act: were the request sent to the dead server, the outcome would
            # be unknown; it must go to a fresh server instead.
            added = await add_tool.run({"a": 2, "b": 3}, ctx)
            assert added.content == "5"
            pids.append(int((await pid_tool.run({}, ctx)).content))

    assert len(set(pids)) == 4


async def test_a_server_killed_by_a_signal_mid_call_is_reported_as_killed_by_it(
    workspace: Path,
) -> None:
    recorder = Recorder()
    async with McpManager({"basic": stdio_config("basic")}, workspace=workspace) as manager:
        ctx = recorder.context(workspace)
        pid = int((await (await tool_named(manager, "basic__pid")).run({}, ctx)).content)
        slow = await tool_named(manager, "basic__slow")
        call = asyncio.create_task(slow.run({"seconds": 60.0, "steps": 1}, ctx))
        async with asyncio.timeout(10):
            while not recorder.progress:  # the server is running the call
                await asyncio.sleep(0.01)
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(ToolError) as raised:
            async with asyncio.timeout(10):
                await call

    assert "MCP server 'basic' exited while running 'slow' (killed by SIGKILL)" in str(raised.value)


async def test_a_command_that_is_not_executable_is_reported_as_such(workspace: Path) -> None:
    (workspace / "server.sh").write_text("#!/bin/sh\nexit 0\n")  # no execute permission
    servers = {"plain": StdioServerConfig(command="./server.sh")}
    async with McpManager(servers, workspace=workspace) as manager:
        [report] = await manager.check()

    assert report.ok is False
    assert report.error == "command is not executable: './server.sh'"


async def test_a_server_that_writes_other_things_than_mcp_on_its_output_is_said_to(
    workspace: Path,
) -> None:
    # Found by a new-user trial: a server printing a banner on stdout and never answering read
    # only "did not finish starting within 30 s", with nothing to say what went wrong.
    script = "import sys, time; print('Listening on port 8080'); sys.stdout.flush(); time.sleep(60)"
    chatty = StdioServerConfig(command=sys.executable, args=["-c", script], startup_timeout=2.0)
    async with McpManager({"chatty": chatty}, workspace=workspace) as manager:
        async with asyncio.timeout(20):  # its startup_timeout, not a fixed 30 s
            [report] = await manager.check()

    assert report.ok is False
    assert report.error == (
        "did not finish starting within 2 s (more: startup_timeout or MCP_TIMEOUT);"
        " it wrote this on stdout, which is not MCP (JSON-RPC): 'Listening on port 8080'"
        " (logs belong on stderr)"
    )


async def test_a_server_that_never_speaks_mcp_fails_at_first_use_after_its_startup_timeout(
    workspace: Path, tmp_path: Path
) -> None:
    # Found by a new-user trial: a server printing "hello world" and then nothing held the
    # first run for a fixed 30 s, whatever its configuration said.
    script = tmp_path / "hello.py"
    script.write_text("import time\nprint('hello world', flush=True)\ntime.sleep(600)\n")
    hello = StdioServerConfig(command=sys.executable, args=[str(script)], startup_timeout=2.0)
    async with McpManager({"hello": hello}, workspace=workspace) as manager:
        async with asyncio.timeout(20):
            tools = await manager.tools()
        [notice] = manager.take_notices()

    assert tools == []
    assert notice.text == (
        "MCP server 'hello' could not start: did not finish starting within 2 s (more:"
        " startup_timeout or MCP_TIMEOUT); it wrote this on stdout, which is not MCP"
        " (JSON-RPC): 'hello world'"
        " (logs belong on stderr); its tools are not available (tried again when next used"
        " after 5 s, or at once if its configuration changes)"
    )


_FAILING_SERVER = "import sys\nsys.stderr.write('fatal: no API key\\n')\nsys.exit(1)\n"
_WORKING_SERVER = "from tests.fakes.mcp_servers import main\nmain(['--server', 'basic'])\n"


async def test_a_server_fixed_in_place_is_tried_again_in_the_background_seconds_after_it_failed(
    workspace: Path, tmp_path: Path
) -> None:
    # Found by a new-user trial: a server that could not start was not tried again for 30 s,
    # so its tools stayed away for that long after the person fixed it. The step that tries it
    # again does not wait for it: the steps after it offer its tools, and the person is told.
    script = tmp_path / "server.py"
    script.write_text(_FAILING_SERVER)
    config = StdioServerConfig(
        command=sys.executable,
        args=[str(script)],
        env=stdio_config("basic").env,
        startup_timeout=30.0,  # the fixed server has all the time it needs on a busy machine
    )
    clock = ManualClock()
    async with McpManager({"mine": config}, workspace=workspace, clock=clock) as manager:
        assert await manager.tools() == []
        [notice] = manager.take_notices()
        script.write_text(_WORKING_SERVER)  # fixed; its configuration is the same
        assert await manager.tools() == []  # not tried again at once
        waiting = manager.status()["mine"]
        clock.advance(4.0)
        assert await manager.tools() == []
        later = manager.status()["mine"]
        clock.advance(1.0)
        assert await manager.tools() == []  # tried again, in the background
        trying = manager.status()["mine"]
        await manager.settle()
        tools = {tool.name for tool in await manager.tools()}
        running = manager.status()["mine"]
        [started] = manager.take_notices()

    assert notice.text.startswith(
        "MCP server 'mine' could not start: exited with code 1 during startup;"
    )
    assert "fatal: no API key" in notice.text
    assert notice.text.endswith(
        "its tools are not available (tried again when next used after 5 s, or at once if its"
        " configuration changes)"
    )
    assert waiting.endswith(
        "(tried again when next used after 5 s, or at once if its configuration changes)"
    )
    assert later.endswith(
        "(tried again when next used after 1 s, or at once if its configuration changes)"
    )
    assert trying.endswith("(being tried again now)")
    assert "mine__echo" in tools
    assert running.startswith("running, ")
    assert started.level == "info"
    assert started.text == (
        f"MCP server 'mine' started when tried again: its {len(tools)} tools are offered from the"
        " next step"
    )


async def test_a_server_failing_again_and_again_is_tried_less_and_less_often(
    workspace: Path, tmp_path: Path
) -> None:
    """A server that hangs at start-up holds a process for its startup_timeout each time it is
    tried: a retry every 5 s would keep one starting all the time. The wait doubles with each
    failure in a row (5, 10, 20 s …), and starts over once the server started."""
    script = tmp_path / "server.py"
    script.write_text(_FAILING_SERVER)
    config = StdioServerConfig(
        command=sys.executable, args=[str(script)], env=stdio_config("basic").env
    )
    clock = ManualClock()
    waits = []
    async with McpManager({"mine": config}, workspace=workspace, clock=clock) as manager:
        assert await manager.tools() == []  # the first start fails
        for _ in range(4):
            status = manager.status()["mine"]  # the wait before the next try …
            waits.append(int(status.split("after ", 1)[1].split(" s,", 1)[0]))
            clock.advance(waits[-1] - 1)
            assert await manager.tools() == []  # … holds until it is over
            assert manager.status()["mine"].split("after ", 1)[1].startswith("1 s,")
            clock.advance(1)
            assert await manager.tools() == []
            assert manager.status()["mine"].endswith("(being tried again now)")
            await manager.settle()  # it failed again

    assert waits == [5, 10, 20, 40]


def _exits_then_hangs(tmp_path: Path) -> tuple[Path, Path]:
    """A server script that exits with an error the first time it runs, and hangs without a
    word every time after, its pid in a file; the script and that file."""
    script, pid_file = tmp_path / "server.py", tmp_path / "server.pid"
    failed_once = tmp_path / "failed-once"
    script.write_text(
        "import os, sys, time\n"
        f"if not os.path.exists({str(failed_once)!r}):\n"
        f"    open({str(failed_once)!r}, 'w').close()\n"
        "    sys.exit('fatal: not yet')\n"
        f"with open({str(pid_file)!r} + '.tmp', 'w') as out:\n"
        "    out.write(str(os.getpid()))\n"
        f"os.replace({str(pid_file)!r} + '.tmp', {str(pid_file)!r})\n"
        "time.sleep(600)\n"
    )
    return script, pid_file


async def _pid_in(pid_file: Path) -> int:
    while not pid_file.exists():  # a process we do not own: polled, bounded by the caller
        await asyncio.sleep(0.02)
    return int(pid_file.read_text())


async def test_a_step_does_not_wait_for_a_server_that_failed_and_is_being_tried_again(
    workspace: Path, tmp_path: Path
) -> None:
    """A server that hangs at start-up held the step that tried it again for its whole
    startup_timeout (every 2 minutes at worst). The try runs in the background: the steps made
    meanwhile go on with the servers that are ready."""
    script, pid_file = _exits_then_hangs(tmp_path)
    hanging = StdioServerConfig(command=sys.executable, args=[str(script)], startup_timeout=60.0)
    servers = {"mine": hanging, "basic": stdio_config("basic")}
    clock = ManualClock()
    async with McpManager(servers, workspace=workspace, clock=clock) as manager:
        first = {tool.name for tool in await manager.tools()}
        assert "mine" in manager.errors
        clock.advance(5.0)
        async with asyncio.timeout(20):  # a third of its startup_timeout
            after_the_wait = {tool.name for tool in await manager.tools()}
            await _pid_in(pid_file)  # the server is being started again, and hangs
            meanwhile = {tool.name for tool in await manager.tools()}
        trying = manager.status()["mine"]

    assert not any(name.startswith("mine__") for name in first)
    assert "basic__echo" in first
    assert after_the_wait == meanwhile == first
    assert trying == (
        "could not start: exited with code 1 during startup; stderr: fatal: not yet"
        " (being tried again now)"
    )


async def test_closing_while_a_server_is_tried_again_in_the_background_leaves_no_process(
    workspace: Path, tmp_path: Path
) -> None:
    script, pid_file = _exits_then_hangs(tmp_path)
    hanging = StdioServerConfig(command=sys.executable, args=[str(script)], startup_timeout=60.0)
    clock = ManualClock()
    manager = McpManager({"mine": hanging}, workspace=workspace, clock=clock)
    try:
        assert await manager.tools() == []
        clock.advance(5.0)
        async with asyncio.timeout(20):
            assert await manager.tools() == []
            pid = await _pid_in(pid_file)
    finally:
        async with asyncio.timeout(20):
            await manager.aclose()

    assert _process_gone(pid), "aclose left the server being tried again behind"
    assert manager.status()["mine"].startswith("could not start: exited with code 1")


async def test_a_configuration_change_while_a_server_is_tried_again_starts_the_new_one_at_once(
    workspace: Path, tmp_path: Path
) -> None:
    script, pid_file = _exits_then_hangs(tmp_path)
    hanging = StdioServerConfig(command=sys.executable, args=[str(script)], startup_timeout=60.0)
    clock = ManualClock()
    async with McpManager({"mine": hanging}, workspace=workspace, clock=clock) as manager:
        assert await manager.tools() == []
        clock.advance(5.0)
        async with asyncio.timeout(20):
            assert await manager.tools() == []
            pid = await _pid_in(pid_file)
        manager.reconfigure({"mine": stdio_config("basic")})
        tools = {tool.name for tool in await manager.tools()}
        await manager.settle()
        notices = [notice.text for notice in manager.take_notices()]
        running = manager.status()["mine"]

    assert "mine__echo" in tools
    assert running.startswith("running, ")
    assert notices[1:] == ["MCP server 'mine': its new configuration is used"]
    assert _process_gone(pid), "the server started as configured before was left running"
