"""MCP servers as tools (DESIGN §9), through the official ``mcp`` SDK.

    manager = McpManager(config.mcp_servers, workspace=workspace)
    tools = await manager.tools()        # list[McpTool], named server__tool
    output = await tools[0].run(arguments, ctx)
    reports = await manager.check()      # for agent-tui doctor
    await manager.aclose()

Failures of a call surface as ``runtime.errors`` exceptions: ``ToolError`` (the server reported
an error, refused the call, or a read-only tool's server crashed or hung) and
``ToolOutcomeUnknown`` (a server crashed or hung while running a tool that may have acted).
"""

from runtime.mcp.manager import (
    InMemoryServer,
    McpManager,
    McpNotice,
    McpTool,
    ServerConfig,
    ServerReport,
    tool_name,
)
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
