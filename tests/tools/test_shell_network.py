"""``[permissions] shell_network`` reaches the shell through the engine: the job's workspace
configuration decides, the engine puts it in the call's ``ToolContext``, and the sandbox lets a
command open a socket to the host's loopback only when it is true (issue 12)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.api import Runtime
from runtime.config import load_config
from runtime.models import RunState, ToolCallState
from tests.fakes.scripted import ScriptedProvider, Turn
from tests.tools.conftest import require_sandbox
from tests.tools.test_sandbox import Listener, connect_command, listener  # noqa: F401

WAIT = 60


async def _shell_result(db_path: Path, workspace: Path, command: str) -> str:
    """Run one allowed ``shell`` call through the engine in ``workspace``; its result."""
    provider = ScriptedProvider([Turn("", [("shell", {"command": command})]), Turn("done")])
    runtime = await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=load_config(workspace),
        model="scripted:test",
        providers=lambda reference: provider,
    )
    try:
        run = await runtime.start("try the network")
        boundary = await runtime.wait(run.id, timeout=WAIT)
        assert boundary.state is RunState.COMPLETED, boundary
        [call] = await runtime.tool_calls(run.id)
        assert call.name == "shell"
        assert call.state in (ToolCallState.COMPLETED, ToolCallState.FAILED)
        return call.result or call.error or ""
    finally:
        await runtime.close()


@pytest.mark.parametrize("network", [True, False])
async def test_the_workspaces_shell_network_setting_decides_whether_a_sandboxed_command_connects(
    db_path: Path,
    workspace: Path,
    listener: Listener,  # noqa: F811
    network: bool,
) -> None:
    require_sandbox()
    lines = ["[permissions]", 'allow = ["shell"]']
    if network:
        lines.append("shell_network = true")
    (workspace / "agent-tui.toml").write_text("\n".join(lines) + "\n")

    result = await _shell_result(db_path, workspace, connect_command(listener.port))

    if network:
        assert "net-CONNECTED" in result and listener.connections == 1, result
    else:
        assert "net-refused" in result and listener.connections == 0, result


async def test_the_shell_reads_no_configuration_itself(
    workspace: Path,
    listener: Listener,  # noqa: F811
) -> None:
    """A workspace file saying ``shell_network = true`` does not open the network to a call
    whose context (what the engine decided) says no: the context is the one source."""
    require_sandbox()
    from runtime.tools.base import ToolContext
    from runtime.tools.shell import ShellTool

    (workspace / "agent-tui.toml").write_text("[permissions]\nshell_network = true\n")
    command = connect_command(listener.port)
    denied = await ShellTool().run({"command": command}, ToolContext(workspace=workspace))
    assert "net-refused" in denied.content and listener.connections == 0
    allowed = await ShellTool().run(
        {"command": command}, ToolContext(workspace=workspace, shell_network=True)
    )
    assert "net-CONNECTED" in allowed.content and listener.connections == 1
