"""The shell tool: output streamed as progress, exit codes, timeouts and cancellation that leave
no process behind.

Tests that read process ids from the command's output (``$$``, ``$!``) run it unconfined
(``ShellTool(sandbox=False)``, the fallback where bubblewrap is missing): inside the sandbox those
are ids of its own pid namespace. The sandbox itself is tested in ``test_sandbox.py``."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from runtime.errors import ToolError
from runtime.tools.base import ToolContext, ToolOutput
from runtime.tools.shell import ShellTool
from tests.tools.helpers import ProgressLog, is_gone


class LineWatcher(ProgressLog):
    """Progress log that lets a test wait (bounded) until some lines have been streamed."""

    def __init__(self) -> None:
        super().__init__()
        self.changed = asyncio.Event()

    def __call__(self, done: float, total: float | None, message: str | None) -> None:
        super().__call__(done, total, message)
        self.changed.set()

    async def wait_for_lines(self, count: int) -> list[str]:
        async with asyncio.timeout(10):
            while len(self.messages) < count:
                self.changed.clear()
                await self.changed.wait()
        return self.messages


def unconfined() -> ShellTool:
    return ShellTool(sandbox=False)


async def run_shell(
    workspace: Path, command: str, *, tool: ShellTool | None = None, **extra: object
) -> tuple[ToolOutput, ProgressLog]:
    progress = ProgressLog()
    output = await (tool or ShellTool()).run(
        {"command": command, **extra}, ToolContext(workspace=workspace, progress=progress)
    )
    return output, progress


async def test_output_lines_are_streamed_as_progress_and_returned(
    workspace: Path, shell_tool: ShellTool
) -> None:
    output, progress = await run_shell(
        workspace, "echo one; echo two >&2; echo three", tool=shell_tool
    )
    assert progress.messages == ["one", "two", "three"]
    assert [done for done, _, _ in progress.calls] == [1, 2, 3]
    assert output.content == "one\ntwo\nthree\nexit code 0"
    assert output.is_error is False
    assert output.structured is not None and output.structured["exit_code"] == 0


async def test_the_command_runs_in_the_workspace(workspace: Path, shell_tool: ShellTool) -> None:
    output, _ = await run_shell(workspace, "pwd; ls", tool=shell_tool)
    lines = output.content.splitlines()
    assert lines[0] == os.path.realpath(workspace)
    assert "notes.txt" in lines


async def test_a_failing_command_reports_its_exit_code_as_an_error(
    workspace: Path, shell_tool: ShellTool
) -> None:
    output, _ = await run_shell(workspace, "echo oops; exit 3", tool=shell_tool)
    assert output.content == "oops\nexit code 3"
    assert output.is_error is True


@pytest.mark.parametrize("code", [130, 137, 143])
async def test_an_exit_code_a_signal_would_give_is_reported_as_the_exit_code(
    workspace: Path, shell_tool: ShellTool, code: int
) -> None:
    """``exit 130`` is an exit code, sandboxed or not: not "killed by SIGINT"."""
    output, _ = await run_shell(workspace, f"exit {code}", tool=shell_tool)
    assert output.content == f"(no output)\nexit code {code}"


async def test_a_command_without_output_says_so(workspace: Path, shell_tool: ShellTool) -> None:
    output, _ = await run_shell(workspace, "true", tool=shell_tool)
    assert output.content == "(no output)\nexit code 0"


async def test_long_output_keeps_its_beginning_and_end(
    workspace: Path, shell_tool: ShellTool
) -> None:
    output, progress = await run_shell(workspace, "seq 1 100000", tool=shell_tool)
    lines = output.content.splitlines()
    assert lines[:3] == ["1", "2", "3"]
    assert lines[-2:] == ["100000", "exit code 0"]
    assert any("lines" in line and "omitted" in line for line in lines)
    assert len(output.content) < 40_000
    assert len(progress.calls) == 100_000


async def test_the_runtime_model_keys_are_not_handed_to_commands(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, shell_tool: ShellTool
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
    output, _ = await run_shell(
        workspace, 'echo "key=${ANTHROPIC_API_KEY:-unset}"', tool=shell_tool
    )
    assert "key=unset" in output.content
    assert "sk-ant-secret" not in output.content


async def test_a_timeout_stops_the_command_and_its_children(workspace: Path) -> None:
    watcher = LineWatcher()
    tool = unconfined()
    context = ToolContext(workspace=workspace, progress=watcher)
    with pytest.raises(ToolError, match=r"timed out after 0.5 s") as caught:
        await tool.run({"command": "echo $$; sleep 60 & echo $!; wait", "timeout": 0.5}, context)
    pids = [int(line) for line in watcher.messages]
    assert len(pids) == 2
    assert all(is_gone(pid) for pid in pids)
    assert str(pids[0]) in str(caught.value)  # the output so far comes with the error


async def test_cancelling_a_long_command_leaves_no_process_alive(workspace: Path) -> None:
    watcher = LineWatcher()
    context = ToolContext(workspace=workspace, progress=watcher)
    command = "echo $$; sleep 60 & echo $!; sleep 60 & echo $!; wait"
    task = asyncio.create_task(unconfined().run({"command": command}, context))
    pids = [int(line) for line in await watcher.wait_for_lines(3)]
    assert not any(is_gone(pid) for pid in pids)  # streamed while the command still runs
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert all(is_gone(pid) for pid in pids)


async def test_children_that_ignore_sigterm_are_killed_on_cancel(workspace: Path) -> None:
    watcher = LineWatcher()
    context = ToolContext(workspace=workspace, progress=watcher)
    command = "trap '' TERM; sleep 60 & echo $!; echo ready; wait"
    task = asyncio.create_task(unconfined().run({"command": command}, context))
    lines = await watcher.wait_for_lines(2)
    child = int(lines[0])
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert is_gone(child)


async def test_background_processes_holding_the_output_are_stopped(workspace: Path) -> None:
    output, progress = await run_shell(workspace, "sleep 60 & echo $!", tool=unconfined())
    child = int(progress.messages[0])
    assert is_gone(child)
    assert "background processes that kept the output open were stopped" in output.content
    assert output.content.endswith("exit code 0")


async def test_without_a_sandbox_a_background_process_with_redirected_output_keeps_running(
    workspace: Path,
) -> None:
    output, progress = await run_shell(
        workspace, "sleep 60 > /dev/null 2>&1 & echo $!", tool=unconfined()
    )
    child = int(progress.messages[0])
    try:
        assert not is_gone(child)
        assert "background" not in output.content
    finally:
        os.kill(child, 9)
