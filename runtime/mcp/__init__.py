"""MCP servers as tools (DESIGN §9), through the official ``mcp`` SDK.

    manager = McpManager(config.mcp_servers, workspace=workspace)
    tools = await manager.tools()        # list[McpTool], named server__tool
    output = await tools[0].run(arguments, ctx)
    reports = await manager.check()      # for agent-tui doctor
    notices = manager.take_notices()     # start-up failures, server warnings
    await manager.aclose()

Failures of a call surface as ``runtime.errors`` exceptions: ``ToolError`` (the server reported
an error, refused the call, or a read-only tool's server crashed or hung) and
``ToolOutcomeUnknown`` (a server crashed or hung while running a tool that may have acted).

The names are imported on first use: the SDK takes a while to import, and a process whose
workspaces configure no server never needs it (``runtime.mcp.workspaces`` stays light).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runtime.mcp.manager import (
        InMemoryServer,
        McpManager,
        McpNotice,
        McpTool,
        ServerConfig,
        ServerReport,
    )
    from runtime.mcp.names import tool_name
    from runtime.mcp.workspaces import WorkspaceManagers

__all__ = [
    "InMemoryServer",
    "McpManager",
    "McpNotice",
    "McpTool",
    "ServerConfig",
    "ServerReport",
    "WorkspaceManagers",
    "tool_name",
]

_HOMES = {name: "runtime.mcp.manager" for name in __all__} | {
    "WorkspaceManagers": "runtime.mcp.workspaces",
    "tool_name": "runtime.mcp.names",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
