"""The names MCP tools take (``server__tool``): light, with no SDK import, for the config checks
that run before any server starts."""

from __future__ import annotations

import re

SEPARATOR = "__"
"""Between the server's name and the tool's: ``server__tool``."""
_TOOL_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_MAX_TOOL_NAME = 64


def tool_name(server: str, tool: str) -> str:
    """``server__tool``, with characters model APIs refuse replaced by ``_``."""
    name = _TOOL_NAME_CHARS.sub("_", f"{server}{SEPARATOR}{tool}")
    return name[:_MAX_TOOL_NAME]
