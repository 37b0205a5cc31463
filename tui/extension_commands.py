"""Slash commands from the workspace's files (DESIGN §16): each skill is ``/skill-name args`` and
each custom command (``.agent-tui/commands/``, ``.claude/commands/``) is ``/name args``. One
provider for the composer's completion and the screen's dispatch; the files are read again at
most every few seconds, so a skill added while the app runs shows up without a restart."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from runtime.commands import Invocables, discover_invocables
from tui.widgets.composer import SlashCommand

__all__ = ["ExtensionCommands"]

REFRESH_SECONDS = 3.0


class ExtensionCommands:
    def __init__(self, workspace: Path, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.workspace = workspace
        self._clock = clock
        self._read_at: float | None = None
        self._invocables = Invocables()

    def _refresh(self) -> None:
        now = self._clock()
        if self._read_at is not None and now - self._read_at < REFRESH_SECONDS:
            return
        self._read_at = now
        self._invocables = discover_invocables(self.workspace)

    def slash_commands(self) -> list[SlashCommand]:
        """The menu entries: skills, then custom commands; none that is shadowed (a built-in
        name always wins: ``runtime.commands.invocables``)."""
        self._refresh()
        entries: list[SlashCommand] = []
        for _, skill in sorted(self._invocables.skills.items()):
            entries.append(SlashCommand(skill.name, "[ARGS]", f"skill: {skill.description}"))
        for _, command in sorted(self._invocables.commands.items()):
            hint = command.argument_hint or "[ARGS]"
            entries.append(SlashCommand(command.name, hint, command.description or "command"))
        return entries

    def runs(self, name: str) -> bool:
        """Whether ``/name`` runs a skill or custom command (so no MCP prompt of the name)."""
        self._refresh()
        return self._invocables.runs(name)

    def expand(self, name: str, argument: str) -> str | None:
        """The message ``/name argument`` sends, or None when no skill or command that is not
        shadowed has the name (names are matched without regard to case)."""
        self._refresh()
        return self._invocables.expand(name, argument)
