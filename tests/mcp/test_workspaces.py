"""A job's MCP servers come from its own workspace's configuration."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime.api import Runtime
from runtime.config import load_config
from runtime.mcp.workspaces import WorkspaceManagers
from runtime.models import RunState, ToolCallState
from tests.fakes.mcp_servers import stdio_config
from tests.fakes.scripted import ScriptedProvider, Turn
from tests.mcp.helpers import Recorder

WAIT = 60


async def test_each_workspace_gets_its_own_servers_started_on_first_use(tmp_path: Path) -> None:
    basic = stdio_config("basic")
    first, second, empty = tmp_path / "first", tmp_path / "second", tmp_path / "empty"
    for folder, name in ((first, "alpha"), (second, "beta")):
        folder.mkdir()
        entry = {"command": basic.command, "args": basic.args, "env": basic.env, "cwd": basic.cwd}
        (folder / ".mcp.json").write_text(json.dumps({"mcpServers": {name: entry}}))
    empty.mkdir()
    user = tmp_path / "no-user-config.toml"
    managers = WorkspaceManagers(
        lambda path: load_config(path, user_config=user, env={}).mcp_servers
    )
    try:
        one = managers.for_workspace(first)
        two = managers.for_workspace(str(second))
        assert one is not None and two is not None
        assert managers.for_workspace(first) is one
        assert managers.for_workspace(empty) is None
        names_one = {tool.name for tool in await one.tools()}
        names_two = {tool.name for tool in await two.tools()}
        echoed = await next(t for t in await one.tools() if t.name == "alpha__echo").run(
            {"text": "first"}, Recorder().context(first)
        )
    finally:
        await managers.aclose()

    assert "alpha__echo" in names_one and not any(n.startswith("beta__") for n in names_one)
    assert "beta__echo" in names_two and not any(n.startswith("alpha__") for n in names_two)
    assert echoed.content == "first"


async def test_a_job_runs_with_the_servers_of_its_own_workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One process (a TUI showing jobs of several workspaces) continues a job of another
    workspace: that job gets its workspace's servers, the job here gets this folder's."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # no user config
    basic = stdio_config("basic")
    first, second = tmp_path / "first", tmp_path / "second"
    for folder, name in ((first, "alpha"), (second, "beta")):
        folder.mkdir()
        entry = {"command": basic.command, "args": basic.args, "env": basic.env, "cwd": basic.cwd}
        (folder / ".mcp.json").write_text(json.dumps({"mcpServers": {name: entry}}))
    db_path = tmp_path / "agent-tui.db"

    async def open_in(folder: Path, provider: ScriptedProvider) -> Runtime:
        return await Runtime.open(
            db_path=db_path,
            workspace=folder,
            model="scripted:test",
            providers=lambda reference: provider,
            env={},
        )

    there = ScriptedProvider([Turn("started over there")])
    runtime = await open_in(second, there)
    try:
        elsewhere = await runtime.start("begin")
        assert (await runtime.wait(elsewhere.id, timeout=WAIT)).state is RunState.COMPLETED
    finally:
        await runtime.close()

    here = ScriptedProvider(
        [
            Turn("", [("alpha__echo", {"text": "from first"})]),
            Turn("done here"),
            Turn("", [("beta__echo", {"text": "from second"})]),
            Turn("done there"),
        ]
    )
    runtime = await open_in(first, here)
    try:
        local = await runtime.start("work here")
        assert (await runtime.wait(local.id, timeout=WAIT)).state is RunState.COMPLETED
        remote = await runtime.follow_up(elsewhere.job_id, "go on")
        assert (await runtime.wait(remote.id, timeout=WAIT)).state is RunState.COMPLETED
        [local_call] = await runtime.tool_calls(local.id)
        [remote_call] = await runtime.tool_calls(remote.id)
    finally:
        await runtime.close()

    def offered(provider: ScriptedProvider, index: int) -> set[str]:
        return {tool.name for tool in provider.requests[index].tools}

    assert "beta__echo" in offered(there, 0) and "alpha__echo" not in offered(there, 0)
    assert "alpha__echo" in offered(here, 0) and "beta__echo" not in offered(here, 0)
    assert "beta__echo" in offered(here, 2) and "alpha__echo" not in offered(here, 2)
    assert (local_call.state, local_call.result) == (ToolCallState.COMPLETED, "from first")
    assert (remote_call.state, remote_call.result) == (ToolCallState.COMPLETED, "from second")


PROBE = """
import asyncio, sys, tempfile
from pathlib import Path
from runtime.api import Runtime
from runtime.config import Config

async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        runtime = await Runtime.open(
            db_path=Path(tmp) / "db", workspace=tmp, config=Config(), model="demo:instant"
        )
        try:
            run = await runtime.start("hello")
            await runtime.wait(run.id, timeout=30)
        finally:
            await runtime.close()
    print("mcp" in sys.modules, "runtime.mcp.manager" in sys.modules)

asyncio.run(main())
"""


def test_a_run_in_a_workspace_without_servers_never_imports_the_mcp_sdk(tmp_path: Path) -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=root,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(root)},
        check=False,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "False"]
