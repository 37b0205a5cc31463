"""MCP resources as @-mentions: every resource a configured server lists is offered by the
composer's @-picker as ``@server:uri`` (beside the workspace's files); a message that mentions
one is sent with the resource's content attached, since the model cannot read it otherwise."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from runtime.mcp.catalog import list_resources, read_resource

if TYPE_CHECKING:
    from runtime.mcp.manager import McpManager

MCP_MENTION = re.compile(r"(?<!\S)@([A-Za-z0-9_.-]+):(\S+)")
"""``@server:uri`` (the uri runs to the next space)."""

MAX_ATTACHED_CHARS = 100_000
"""A resource longer than this is cut (head kept) with a marker saying how much was left out."""


async def resource_mentions(manager: McpManager) -> list[str]:
    """``server:uri`` of every reachable server's resources (a server that is down has none)."""
    return [f"{r.server}:{r.uri}" for r in await list_resources(manager)]


def mentioned_resources(text: str, servers: set[str]) -> list[tuple[str, str]]:
    """The ``@server:uri`` mentions of configured servers in ``text``, in order, once each."""
    found: list[tuple[str, str]] = []
    for match in MCP_MENTION.finditer(text):
        mention = (match.group(1), match.group(2).rstrip(".,;!?)"))
        if mention[0] in servers and mention not in found:
            found.append(mention)
    return found


def server_names(manager: McpManager) -> set[str]:
    return set(manager.servers)


async def with_resources(manager: McpManager, text: str, servers: set[str]) -> str:
    """The message as sent: the text, then each mentioned resource's content under a chip line.
    ``ToolError`` (one clear line) when a server cannot read one: nothing is sent then."""
    parts = [text]
    for server, uri in mentioned_resources(text, servers):
        attached = await read_resource(manager, server, uri)
        content = attached.text
        if len(content) > MAX_ATTACHED_CHARS:
            left = len(content) - MAX_ATTACHED_CHARS
            content = f"{content[:MAX_ATTACHED_CHARS]}\n… [{left:,} more characters not attached]"
        parts.append(f"📎 Attached {server}:{uri}\n\n```\n{content}\n```")
    return "\n\n".join(parts)
