"""Tools an agent can call: the ``Tool`` protocol, the built-in tools and workspace confinement."""

from runtime.tools.base import ApprovalDefault, Tool, ToolContext, ToolOutput
from runtime.tools.builtin import (
    ASK_USER_NAME,
    ASK_USER_SCHEMA,
    ASK_USER_SPEC,
    builtin_tools,
    validate_arguments,
)
from runtime.tools.shell import ShellTool
from runtime.tools.workspace import display_path, resolve_in_workspace

__all__ = [
    "ASK_USER_NAME",
    "ASK_USER_SCHEMA",
    "ASK_USER_SPEC",
    "ApprovalDefault",
    "ShellTool",
    "Tool",
    "ToolContext",
    "ToolOutput",
    "builtin_tools",
    "display_path",
    "resolve_in_workspace",
    "validate_arguments",
]
