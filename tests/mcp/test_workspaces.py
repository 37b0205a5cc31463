"""A job's MCP servers come from its own workspace's configuration."""

from __future__ import annotations

import json
from pathlib import Path

from runtime.config import load_config
from runtime.mcp.workspaces import WorkspaceManagers
from tests.fakes.mcp_servers import stdio_config
from tests.mcp.helpers import Recorder


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
