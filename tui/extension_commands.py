"""Slash commands from the workspace's files (DESIGN §16): each skill is ``/skill-name args`` and
each custom command (``.agent-tui/commands/``, ``.claude/commands/``) is ``/name args``. One
provider for the composer's completion and the screen's dispatch; the files are read again at
most every few seconds, so a skill added while the app runs shows up without a restart."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from runtime.commands import CustomCommand, discover_commands, expand_invocation
from runtime.skills import Skill, discover_skills
from tui.widgets.composer import SLASH_COMMANDS, SlashCommand

__all__ = ["ExtensionCommands"]

REFRESH_SECONDS = 3.0


class ExtensionCommands:
    def __init__(self, workspace: Path, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.workspace = workspace
        self._clock = clock
        self._read_at: float | None = None
        self._skills: dict[str, Skill] = {}
        self._commands: dict[str, CustomCommand] = {}

    def _refresh(self) -> None:
        now = self._clock()
        if self._read_at is not None and now - self._read_at < REFRESH_SECONDS:
            return
        self._read_at = now
        self._skills = {s.name.lower(): s for s in discover_skills(self.workspace).skills.values()}
        self._commands = {
            c.name.lower(): c for c in discover_commands(self.workspace).commands.values()
        }

    def slash_commands(self) -> list[SlashCommand]:
        """The menu entries: skills, then custom commands; a built-in name always wins."""
        self._refresh()
        builtin = {c.name for c in SLASH_COMMANDS}
        entries: list[SlashCommand] = []
        for key, skill in sorted(self._skills.items()):
            if key not in builtin:
                entries.append(SlashCommand(skill.name, "[ARGS]", f"skill: {skill.description}"))
        for key, command in sorted(self._commands.items()):
            if key not in builtin and key not in self._skills:
                hint = command.argument_hint or "[ARGS]"
                entries.append(SlashCommand(command.name, hint, command.description or "command"))
        return entries

    def expand(self, name: str, argument: str) -> str | None:
        """The message ``/name argument`` sends, or None when no skill or command has the name
        (names are matched without regard to case, as the composer lowers them)."""
        self._refresh()
        return expand_invocation(name, argument, skills=self._skills, commands=self._commands)
