"""A server's resources and prompts, for the composer: ``@server:uri`` attaches a resource to a
message, ``/server:prompt args`` sends a prompt's messages.

    resources = await list_resources(manager)             # every server's, [] for one that is down
    attached = await read_resource(manager, "docs", "file:///README.md")
    prompts = await list_prompts(manager)
    messages = await get_prompt(manager, "docs", "summarise", {"topic": "MCP"})
    parse_mention("@docs:file:///README.md")               # ("docs", "file:///README.md")
    parse_prompt_command("/docs:summarise topic=MCP")     # ("docs", "summarise", {"topic": "MCP"})
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

from runtime.errors import ToolError
from runtime.images import ToolImage
from runtime.mcp._content import _Collector

if TYPE_CHECKING:
    from runtime.mcp.manager import McpManager

_MAX_PAGES = 100


@dataclass(frozen=True)
class ResourceInfo:
    server: str
    uri: str
    name: str
    description: str = ""
    mime_type: str | None = None

    @property
    def mention(self) -> str:
        return f"@{self.server}:{self.uri}"


@dataclass(frozen=True)
class PromptArgument:
    name: str
    description: str = ""
    required: bool = False


@dataclass(frozen=True)
class PromptInfo:
    server: str
    name: str
    description: str = ""
    arguments: tuple[PromptArgument, ...] = ()

    @property
    def command(self) -> str:
        return f"/{self.server}:{self.name}"


@dataclass
class Attachment:
    """A resource's content as it goes into a message: text (binary described) and images."""

    server: str
    uri: str
    text: str
    images: list[ToolImage] = field(default_factory=list)


@dataclass(frozen=True)
class PromptMessage:
    role: str
    """``user`` or ``assistant``."""
    text: str
    images: tuple[ToolImage, ...] = ()


def parse_mention(text: str) -> tuple[str, str] | None:
    """``@server:uri`` → ``(server, uri)``; None for anything else."""
    if not text.startswith("@"):
        return None
    server, sep, uri = text[1:].partition(":")
    if not sep or not server or not uri or any(c.isspace() for c in server):
        return None
    return server, uri


def parse_prompt_command(text: str) -> tuple[str, str, dict[str, str]] | None:
    """``/server:prompt key=value "key2=two words"`` → ``(server, prompt, arguments)``; a bare
    word is the value of the prompt's next unnamed argument (returned under ``"_1"``, ``"_2"``…,
    see ``bind_arguments``). None when it is not such a command."""
    if not text.startswith("/"):
        return None
    head, _, rest = text[1:].partition(" ")
    server, sep, prompt = head.partition(":")
    if not sep or not server or not prompt:
        return None
    try:
        words = shlex.split(rest)
    except ValueError:
        return None
    arguments: dict[str, str] = {}
    positional = 0
    for word in words:
        key, eq, value = word.partition("=")
        if eq and key.isidentifier():
            arguments[key] = value
        else:
            positional += 1
            arguments[f"_{positional}"] = word
    return server, prompt, arguments


def bind_arguments(prompt: PromptInfo, arguments: dict[str, str]) -> dict[str, str]:
    """Positional values (``_1``…) given to the prompt's arguments not named, in order; raises
    ``ToolError`` naming a missing required argument or an extra value."""
    bound = {key: value for key, value in arguments.items() if not key.startswith("_")}
    free = [argument.name for argument in prompt.arguments if argument.name not in bound]
    positional = [value for key, value in sorted(arguments.items()) if key.startswith("_")]
    if len(positional) > len(free):
        raise ToolError(f"{prompt.command} takes no more arguments (got {positional[len(free)]!r})")
    bound.update(zip(free, positional, strict=False))
    missing = [a.name for a in prompt.arguments if a.required and a.name not in bound]
    if missing:
        raise ToolError(f"{prompt.command} needs {', '.join(missing)}")
    return bound


async def list_resources(manager: McpManager, server: str | None = None) -> list[ResourceInfo]:
    """The resources of every reachable server (or of ``server``); a server that is down or has
    no resources contributes none."""
    found: list[ResourceInfo] = []
    for name in [server] if server is not None else list(manager.servers):
        client = await _client(manager, name, quiet=server is None)
        if client is None:
            continue
        cursor: str | None = None
        try:
            for _ in range(_MAX_PAGES):
                page = await client.list_resources(cursor=cursor)
                found.extend(
                    ResourceInfo(
                        server=name,
                        uri=str(resource.uri),
                        name=resource.name,
                        description=resource.description or "",
                        mime_type=resource.mime_type,
                    )
                    for resource in page.resources
                )
                cursor = page.next_cursor
                if cursor is None:
                    break
        except MCPError as exc:
            if server is not None and exc.code != types.METHOD_NOT_FOUND:
                raise ToolError(
                    f"MCP server '{name}' could not list its resources: {exc}"
                ) from None
    return found


async def read_resource(manager: McpManager, server: str, uri: str) -> Attachment:
    client = await _client(manager, server, quiet=False)
    assert client is not None
    try:
        result = await client.read_resource(uri)
    except MCPError as exc:
        raise ToolError(
            f"MCP server '{server}' could not read {uri}: {exc.error.message}"
        ) from None
    collector = _Collector()
    parts: list[str] = []
    for contents in result.contents:
        if isinstance(contents, types.TextResourceContents):
            parts.append(contents.text)
        else:
            mime = contents.mime_type or "application/octet-stream"
            kind = "image" if mime.startswith("image/") else "resource"
            parts.append(collector.binary(kind, mime, contents.blob))
    return Attachment(server=server, uri=uri, text="\n".join(parts), images=collector.images)


async def list_prompts(manager: McpManager, server: str | None = None) -> list[PromptInfo]:
    found: list[PromptInfo] = []
    for name in [server] if server is not None else list(manager.servers):
        client = await _client(manager, name, quiet=server is None)
        if client is None:
            continue
        cursor: str | None = None
        try:
            for _ in range(_MAX_PAGES):
                page = await client.list_prompts(cursor=cursor)
                found.extend(
                    PromptInfo(
                        server=name,
                        name=prompt.name,
                        description=prompt.description or "",
                        arguments=tuple(
                            PromptArgument(a.name, a.description or "", bool(a.required))
                            for a in prompt.arguments or []
                        ),
                    )
                    for prompt in page.prompts
                )
                cursor = page.next_cursor
                if cursor is None:
                    break
        except MCPError as exc:
            if server is not None and exc.code != types.METHOD_NOT_FOUND:
                raise ToolError(f"MCP server '{name}' could not list its prompts: {exc}") from None
    return found


async def get_prompt(
    manager: McpManager, server: str, name: str, arguments: dict[str, str] | None = None
) -> list[PromptMessage]:
    """The prompt's messages with ``arguments`` filled in (positional ``_1``… bound to the
    prompt's arguments in order)."""
    arguments = dict(arguments or {})
    if any(key.startswith("_") for key in arguments):
        prompt = next((p for p in await list_prompts(manager, server) if p.name == name), None)
        if prompt is None:
            raise ToolError(f"MCP server '{server}' has no prompt {name!r}")
        arguments = bind_arguments(prompt, arguments)
    client = await _client(manager, server, quiet=False)
    assert client is not None
    try:
        result = await client.get_prompt(name, arguments)
    except MCPError as exc:
        raise ToolError(
            f"MCP server '{server}' could not give prompt {name!r}: {exc.error.message}"
        ) from None
    messages: list[PromptMessage] = []
    for message in result.messages:
        collector = _Collector()
        text = collector.block(message.content)
        messages.append(PromptMessage(str(message.role), text, tuple(collector.images)))
    return messages


async def _client(manager: McpManager, server: str, *, quiet: bool) -> Any:
    from runtime.mcp.manager import _StartFailed

    if server not in manager.servers:
        if quiet:
            return None
        raise ToolError(f"there is no MCP server named {server!r}")
    try:
        connection = await manager._connection(server)
    except _StartFailed as exc:
        if quiet:
            return None
        raise ToolError(f"MCP server '{server}' is not available: {exc.reason}") from None
    return connection.client
