"""Custom slash commands (DESIGN §16): Markdown files that become ``/name`` in the composer.

Found in ``WORKSPACE/.agent-tui/commands/``, ``WORKSPACE/.claude/commands/`` and the user's
``$XDG_CONFIG_HOME/agent-tui/commands/``, nearest first (a nearer command hides a farther one of
the same name). ``review.md`` is ``/review``; ``git/commit.md`` is ``/git:commit`` (Claude Code's
convention). Optional front matter: ``description`` and ``argument-hint`` (shown in completion).
The body is the prompt sent; ``$ARGUMENTS`` becomes everything typed after the name and
``$1`` … ``$9`` its whitespace-separated words.

Which one ``/name`` runs is decided here, once, for the TUI, ``agent-tui run`` and the reports
(``doctor``, ``/context``): a built-in command of the TUI first (``/help`` must always work), then
a skill, then a custom command (then, in the TUI, an MCP server's ``/server:prompt``). A skill or
command hidden that way is *shadowed*: never run, and reported as such (``invocables``).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from runtime.config import user_config_path
from runtime.frontmatter import FrontMatterError, located, read_markdown
from runtime.skills import Skill, discover_skills, skill_text

__all__ = [
    "BUILTIN_COMMAND_NAMES",
    "CommandProblem",
    "CustomCommand",
    "Invocables",
    "Shadowed",
    "SlashPrompt",
    "discover_commands",
    "discover_invocables",
    "expand_command",
    "expand_slash_prompt",
    "invocables",
]

BUILTIN_COMMAND_NAMES: frozenset[str] = frozenset(
    {
        "help",
        "new",
        "model",
        "agent",
        "retry",
        "fork",
        "export",
        "theme",
        "permissions",
        "compact",
        "rewind",
        "context",
        "inbox",
        "quit",
    }
)
"""The TUI's own slash commands. Kept here, not taken from the TUI, so that ``run`` and
``doctor`` know what shadows a skill or command without importing it; a TUI test checks its
command table against this set."""

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")
_POSITIONAL = re.compile(r"\$([1-9])")


@dataclass(frozen=True)
class CustomCommand:
    name: str
    description: str
    argument_hint: str
    path: str
    body: str


@dataclass(frozen=True)
class CommandProblem:
    path: str
    reason: str
    line: int | None = None

    def shown(self) -> str:
        return located(self.path, self.reason, self.line)


@dataclass
class CommandCatalog:
    commands: dict[str, CustomCommand] = field(default_factory=dict)
    problems: list[CommandProblem] = field(default_factory=list)


def command_search_dirs(workspace: Path, *, env: Mapping[str, str] | None = None) -> list[Path]:
    return [
        workspace / ".agent-tui" / "commands",
        workspace / ".claude" / "commands",
        user_config_path(env).parent / "commands",
    ]


def _text(value: object) -> str:
    return " ".join(value.split()) if isinstance(value, str) else ""


def discover_commands(workspace: Path, *, env: Mapping[str, str] | None = None) -> CommandCatalog:
    catalog = CommandCatalog()
    for directory in command_search_dirs(workspace, env=env):
        if not directory.is_dir():
            continue
        for path in sorted(directory.rglob("*.md")):
            relative = path.relative_to(directory).with_suffix("")
            name = ":".join(relative.parts)
            if not _NAME.match(name):
                catalog.problems.append(
                    CommandProblem(path=str(path), reason=f"{name!r} is not a usable command name")
                )
                continue
            try:
                document = read_markdown(path)
            except FrontMatterError as exc:
                problem = CommandProblem(path=str(path), reason=exc.problem, line=exc.line)
                catalog.problems.append(problem)
                continue
            command = CustomCommand(
                name=name,
                description=_text(document.metadata.get("description"))
                or _first_line(document.body),
                argument_hint=_text(document.metadata.get("argument-hint")),
                path=str(path),
                body=document.body.strip(),
            )
            catalog.commands.setdefault(name, command)
    return catalog


def _first_line(body: str) -> str:
    for line in body.splitlines():
        if line.strip():
            return line.strip().lstrip("# ")[:80]
    return ""


def expand_command(command: CustomCommand, arguments: str) -> str:
    """The prompt ``/name arguments`` sends. Without ``$ARGUMENTS`` in the body, typed arguments
    are appended on a line of their own, so they are never silently dropped."""
    arguments = arguments.strip()
    try:
        words = shlex.split(arguments)
    except ValueError:
        words = arguments.split()
    body = command.body
    uses_arguments = "$ARGUMENTS" in body or _POSITIONAL.search(body) is not None
    body = body.replace("$ARGUMENTS", arguments)
    body = _POSITIONAL.sub(
        lambda m: words[int(m.group(1)) - 1] if int(m.group(1)) <= len(words) else "", body
    )
    if arguments and not uses_arguments:
        body = f"{body}\n\n{arguments}"
    return body


@dataclass(frozen=True)
class Shadowed:
    """A skill or custom command that ``/name`` never runs, and what runs instead."""

    name: str
    """Lower-case, as matched."""
    path: str
    """Its ``SKILL.md`` or command file."""
    by: str
    """``the built-in /help``, ``the skill /review``, ``the command /review``."""


@dataclass
class Invocables:
    """What ``/name`` runs among a workspace's skills and custom commands (by lower-case name:
    names match without regard to case), and what is shadowed."""

    skills: dict[str, Skill] = field(default_factory=dict)
    commands: dict[str, CustomCommand] = field(default_factory=dict)
    shadowed: list[Shadowed] = field(default_factory=list)

    def expand(self, name: str, arguments: str) -> str | None:
        """What ``/name arguments`` sends when ``name`` is a skill (its body, files and the
        arguments) or a custom command (its body with ``$ARGUMENTS``); None otherwise (a
        built-in's name among them: the built-in runs)."""
        skill = self.skills.get(name.lower())
        if skill is not None:
            return skill_text(skill, arguments)
        command = self.commands.get(name.lower())
        if command is not None:
            return expand_command(command, arguments)
        return None

    def runs(self, name: str) -> bool:
        """Whether ``/name`` runs a skill or custom command: then an MCP server's prompt of the
        name (``/server:prompt``, tried after them) never runs."""
        return name.lower() in self.skills or name.lower() in self.commands

    def shadowed_by(self, path: str) -> str | None:
        """What runs instead of the skill or command of file ``path``; None when it runs."""
        return next((s.by for s in self.shadowed if s.path == path), None)

    def shadowing(self, name: str) -> Shadowed | None:
        """The skill or command named ``name`` that ``/name`` does not run, if any."""
        return next((s for s in self.shadowed if s.name == name.lower()), None)


def invocables(skills: Iterable[Skill], commands: Iterable[CustomCommand]) -> Invocables:
    """The rule (nearest first within each kind, as discovered): a built-in's name is never a
    skill's or a command's; a skill's name is never a command's."""
    found = Invocables()

    def shadow(key: str) -> str | None:
        if key in BUILTIN_COMMAND_NAMES:
            return f"the built-in /{key}"
        if key in found.skills:
            return f"the skill /{found.skills[key].name}"
        if key in found.commands:
            return f"the command /{found.commands[key].name}"
        return None

    for skill in skills:
        by = shadow(key := skill.name.lower())
        if by is None:
            found.skills[key] = skill
        else:
            found.shadowed.append(Shadowed(name=key, path=skill.path, by=by))
    for command in commands:
        by = shadow(key := command.name.lower())
        if by is None:
            found.commands[key] = command
        else:
            found.shadowed.append(Shadowed(name=key, path=command.path, by=by))
    return found


def discover_invocables(workspace: Path, *, env: Mapping[str, str] | None = None) -> Invocables:
    skills = discover_skills(workspace, env=env).skills.values()
    return invocables(skills, discover_commands(workspace, env=env).commands.values())


@dataclass(frozen=True)
class SlashPrompt:
    text: str
    """What is sent: the expansion, or the prompt as typed."""
    shadowed: str | None = None
    """Why a skill or command of the typed name was not used (for a diagnostic line)."""


def expand_slash_prompt(
    text: str, workspace: Path, *, env: Mapping[str, str] | None = None
) -> SlashPrompt:
    """A prompt typed as ``/name args`` (``agent-tui run "/review main.py"``) expanded when it
    names a skill or a custom command of ``workspace`` that is not shadowed; any other text is
    sent unchanged."""
    stripped = text.strip()
    if not stripped.startswith("/") or stripped.startswith("//"):
        return SlashPrompt(text)
    name, _, arguments = stripped[1:].partition(" ")
    found = discover_invocables(workspace, env=env)
    expanded = found.expand(name, arguments)
    if expanded is not None:
        return SlashPrompt(expanded)
    shadowed = found.shadowing(name)
    if shadowed is None:
        return SlashPrompt(text)
    why = f"/{name}: {shadowed.path} is shadowed by {shadowed.by}; sent as typed"
    return SlashPrompt(text, shadowed=why)
