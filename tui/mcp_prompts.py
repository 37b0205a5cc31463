"""MCP prompts as slash commands: every prompt a configured server offers is ``/server:prompt``
in the composer's menu; sending it fetches the prompt's messages (arguments bound by name,
``key=value``, or in order) and sends their text as the message."""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime.mcp.catalog import (
    PromptInfo,
    PromptMessage,
    bind_arguments,
    get_prompt,
    list_prompts,
    parse_prompt_command,
)
from tui.widgets.composer import SlashCommand

if TYPE_CHECKING:
    from runtime.mcp.manager import McpManager


def _argument_hint(prompt: PromptInfo) -> str:
    return " ".join(
        argument.name.upper() if argument.required else f"[{argument.name.upper()}]"
        for argument in prompt.arguments
    )


def as_command(prompt: PromptInfo) -> SlashCommand:
    return SlashCommand(
        f"{prompt.server}:{prompt.name}",
        _argument_hint(prompt),
        prompt.description or f"the {prompt.name} prompt of the MCP server {prompt.server}",
    )


async def prompt_commands(manager: McpManager) -> list[SlashCommand]:
    """The slash commands of every reachable server's prompts (a server that is down has none)."""
    return [as_command(prompt) for prompt in await list_prompts(manager)]


def message_text(messages: list[PromptMessage]) -> str:
    """What the prompt's messages send: their text, an assistant part labelled as such."""
    parts = [
        message.text if message.role == "user" else f"(assistant) {message.text}"
        for message in messages
        if message.text
    ]
    return "\n\n".join(parts)


async def prompt_text(manager: McpManager, name: str, argument: str) -> str:
    """The text ``/name argument`` sends; ``ToolError`` with one clear line when the server,
    the prompt or an argument is wrong."""
    from runtime.errors import ToolError

    parsed = parse_prompt_command(f"/{name} {argument}".rstrip())
    if parsed is None:
        raise ToolError(f"/{name}: write it as /server:prompt [ARGUMENTS]")
    server, prompt_name, arguments = parsed
    offered = await list_prompts(manager, server)
    prompt = next((p for p in offered if p.name == prompt_name), None)
    if prompt is None:
        names = ", ".join(p.command for p in offered) or "none"
        raise ToolError(f"MCP server '{server}' has no prompt {prompt_name!r} (it offers: {names})")
    bound = bind_arguments(prompt, arguments)  # names a missing argument before asking
    text = message_text(await get_prompt(manager, server, prompt_name, bound))
    if not text:
        raise ToolError(f"/{name} gave no text to send")
    return text
