"""The shell sandbox (bubblewrap): the workspace is writable, nothing else is; credentials in
``$HOME`` are hidden; no network unless ``[permissions] shell_network = true``; nothing the
command started survives it."""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runtime.tools.base import ToolContext
from runtime.tools.sandbox import sandbox_status
from runtime.tools.shell import ShellTool
from tests.cli.test_tool_orphans import live_processes_mentioning
from tests.tools.conftest import require_sandbox
from tests.tools.helpers import ProgressLog

FAKE_KEY = "-----BEGIN FAKE OPENSSH PRIVATE KEY----- not-a-real-key"


def live_processes_with(argv: str) -> list[int]:
    """Host pids of running (non-zombie) processes whose command line is ``argv``."""
    found: list[int] = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
            with open(f"/proc/{entry.name}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        if cmdline == argv and stat[stat.rfind(b")") + 2 :].split()[0] != b"Z":
            found.append(int(entry.name))
    return found


async def wait_for_processes(argv: str, count: int, *, timeout: float = 30) -> None:
    """Until ``count`` processes run ``argv`` (a forked child may not have exec'd yet when the
    shell goes on): the process table has no event to wait for, so poll it, bounded."""
    async with asyncio.timeout(timeout):
        while len(live_processes_with(argv)) < count:
            await asyncio.sleep(0.02)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary HOME holding fake credentials, readable on the host."""
    root = tmp_path / "home"
    (root / ".ssh").mkdir(parents=True)
    (root / ".ssh" / "id_rsa").write_text(FAKE_KEY + "\n")
    (root / ".aws").mkdir()
    (root / ".aws" / "credentials").write_text("aws_secret_access_key = fake-aws\n")
    (root / ".config" / "agent-tui").mkdir(parents=True)
    (root / ".config" / "agent-tui" / "config.toml").write_text("# fake-agent-config\n")
    (root / ".netrc").write_text("machine example.com password fake-netrc\n")
    monkeypatch.setenv("HOME", str(root))
    return root


class Listener:
    """A TCP server on the host's loopback that counts connections."""

    def __init__(self) -> None:
        self.connections = 0
        self.port = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        writer.close()


@pytest.fixture
async def listener() -> AsyncIterator[Listener]:
    found = Listener()
    server = await asyncio.start_server(found.handle, "127.0.0.1", 0)
    found.port = server.sockets[0].getsockname()[1]
    try:
        yield found
    finally:
        server.close()
        await server.wait_closed()


def connect_command(port: int) -> str:
    # bash's /dev/tcp, not this test's Python: the interpreter may live under /tmp (a CI clone),
    # which the sandbox replaces with a private /tmp.
    connect = f"exec 3<>/dev/tcp/127.0.0.1/{port}"
    return f"bash -c '{connect}' 2>/dev/null && echo net-CONNECTED || echo net-refused"


async def run(tool: ShellTool, workspace: Path, command: str) -> str:
    output = await tool.run(
        {"command": command, "timeout": 60},
        ToolContext(workspace=workspace, progress=ProgressLog()),
    )
    return output.content


async def test_an_allowed_shell_call_can_write_only_inside_the_workspace_and_reach_nothing_else(
    workspace: Path, home: Path, listener: Listener
) -> None:
    require_sandbox()
    marker = f"600.{secrets.randbelow(10**9):09d}"
    command = "\n".join(
        [
            "echo inside > inside.txt && echo inside-ok",
            "echo outside > ../outside.txt && echo outside-WROTE",
            "cat ~/.ssh/id_rsa && echo ssh-READ",
            "cat ~/.aws/credentials ~/.config/agent-tui/config.toml ~/.netrc",
            connect_command(listener.port),
            f"sleep {marker} > /dev/null 2>&1 &",
            "echo started-background",
        ]
    )
    content = await run(ShellTool(), workspace, command)

    assert (workspace / "inside.txt").read_text() == "inside\n", content
    assert "inside-ok" in content
    assert not (workspace.parent / "outside.txt").exists()
    assert "outside-WROTE" not in content and "Read-only file system" in content
    assert FAKE_KEY not in content and "ssh-READ" not in content
    assert "fake-aws" not in content and "fake-agent-config" not in content
    assert "fake-netrc" not in content
    assert "net-refused" in content and listener.connections == 0
    assert "started-background" in content
    assert live_processes_with(f"sleep {marker}") == []  # gone once the call returned


async def test_the_rest_of_the_filesystem_is_readable_but_not_writable(
    workspace: Path, home: Path, tmp_path: Path
) -> None:
    require_sandbox()
    (tmp_path / "sibling.txt").write_text("next door\n")
    content = await run(
        ShellTool(), workspace, "cat ../sibling.txt; touch /usr/agent-tui-probe; rm ../sibling.txt"
    )
    assert "next door" in content
    assert not Path("/usr/agent-tui-probe").exists()
    assert (tmp_path / "sibling.txt").exists()


async def test_credentials_stay_hidden_when_the_workspace_is_home(home: Path) -> None:
    require_sandbox()
    (home / "notes.txt").write_text("my notes\n")
    content = await run(ShellTool(), home, "cat notes.txt; cat .ssh/id_rsa; ls -A .ssh | wc -l")
    assert "my notes" in content
    assert FAKE_KEY not in content
    assert (home / ".ssh" / "id_rsa").read_text().startswith(FAKE_KEY)  # untouched on the host


async def test_a_finished_call_returns_only_once_every_process_it_left_is_gone(
    workspace: Path,
) -> None:
    """bwrap exits as soon as the command's shell does, while the kernel is still killing the
    pid namespace's other processes; the call must wait for them, in whatever process group or
    session (a burst of them makes the teardown take long enough to see)."""
    require_sandbox()
    marker = f"600.{secrets.randbelow(10**9):09d}"
    command = (
        f"for i in $(seq 150); do setsid sleep {marker} > /dev/null 2>&1 & "
        f"sleep {marker} > /dev/null 2>&1 & done; echo started"
    )
    content = await run(ShellTool(), workspace, command)
    assert "started" in content and "exit code 0" in content
    assert live_processes_with(f"sleep {marker}") == []


async def test_cancelling_a_sandboxed_command_leaves_no_process_alive(workspace: Path) -> None:
    require_sandbox()
    marker = f"600.{secrets.randbelow(10**9):09d}"
    started = asyncio.Event()

    def progress(done: float, total: float | None, message: str | None) -> None:
        if message == "ready":
            started.set()

    context = ToolContext(workspace=workspace, progress=progress)
    command = f"setsid sleep {marker} & sleep {marker} & echo ready; wait"
    task = asyncio.create_task(ShellTool().run({"command": command}, context))
    async with asyncio.timeout(30):
        await started.wait()
    await wait_for_processes(f"sleep {marker}", 2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert live_processes_with(f"sleep {marker}") == []


_KILLED_AT_SPAWN = """
import asyncio, os, signal, sys
from pathlib import Path

import runtime.tools.shell as shell
from runtime.tools.base import ToolContext

spawn = asyncio.create_subprocess_exec


async def spawn_then_die(*args, **kwargs):
    process = await spawn(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)  # kill -9 at the worst moment: the sandbox is setting up
    return process


shell.asyncio.create_subprocess_exec = spawn_then_die
sandboxed = sys.argv[1] == "sandboxed"
context = ToolContext(workspace=Path(sys.argv[3]))
asyncio.run(shell.ShellTool(sandbox=sandboxed).run({"command": sys.argv[2]}, context))
"""


@pytest.mark.parametrize("mode", ["sandboxed", "unconfined"])
async def test_a_kill_9_as_the_command_starts_leaves_nothing_running(
    workspace: Path, mode: str
) -> None:
    """agent-tui killed in the first milliseconds of a command, while bwrap sets its sandbox up:
    bwrap arms its own ``--die-with-parent`` only once that is done, and the command then ran
    on, alone (every one of 20 such kills left it running)."""
    if mode == "sandboxed":
        require_sandbox()
    for _ in range(3):
        marker = f"go{secrets.randbelow(10**9):09d}"
        command = f"until [ -e {marker} ]; do sleep 0.05; done; echo late >> orphan.log"
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _KILLED_AT_SPAWN, mode, command, str(workspace), env=env
        )
        assert await asyncio.wait_for(child.wait(), 60) == -signal.SIGKILL
        async with asyncio.timeout(30):  # a killed process waits to be scheduled to die
            while live_processes_mentioning(marker):
                await asyncio.sleep(0.05)
        (workspace / marker).touch()  # what is left of the command would now write
    assert not (workspace / "orphan.log").exists()


async def test_a_tool_that_insists_on_the_sandbox_fails_clearly_without_one(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_TUI_BWRAP", str(workspace / "no-such-bwrap"))
    status = sandbox_status()
    assert not status.available
    assert "no-such-bwrap not found" in status.detail
    assert status.notice is not None and "every shell call asks" in status.notice
    from runtime.errors import ToolError

    with pytest.raises(ToolError, match="sandbox is not available"):
        await run(ShellTool(sandbox=True), workspace, "true")
    # The default falls back to running unconfined.
    assert "exit code 0" in await run(ShellTool(), workspace, "true")


def test_without_a_sandbox_an_allowed_shell_call_asks_first() -> None:
    from runtime.approvals import ApprovalPolicy
    from runtime.config import Permissions

    allowed = Permissions(allow=["shell", "write_file"])
    unconfined = ApprovalPolicy(allowed, shell_confined=False)
    decision, why = unconfined.explain("shell", default="ask")
    assert decision == "ask" and "not sandboxed" in why
    assert unconfined.decide("write_file", default="ask") == "allow"  # only the shell
    assert ApprovalPolicy(allowed, shell_confined=True).decide("shell", default="ask") == "allow"
    denied = ApprovalPolicy(Permissions(deny=["shell"]), shell_confined=False)
    assert denied.decide("shell", default="ask") == "deny"
    person_allowed = ApprovalPolicy(allowed, run_allowed={"shell"}, shell_confined=False)
    assert person_allowed.decide("shell", default="ask") == "allow"


def test_a_missing_bwrap_forces_shell_approvals_to_ask(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from runtime.approvals import ApprovalPolicy
    from runtime.config import Permissions

    monkeypatch.setenv("AGENT_TUI_BWRAP", str(tmp_path / "missing-bwrap"))
    decision, why = ApprovalPolicy(Permissions(allow=["shell"])).explain("shell", default="ask")
    assert decision == "ask"
    assert "missing-bwrap not found" in why
