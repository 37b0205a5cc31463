"""Custom slash commands (DESIGN §16): Markdown files that become ``/name`` in the composer.

Found in ``WORKSPACE/.agent-tui/commands/``, ``WORKSPACE/.claude/commands/`` and the user's
``$XDG_CONFIG_HOME/agent-tui/commands/``, nearest first (a nearer command hides a farther one of
the same name). ``review.md`` is ``/review``; ``git/commit.md`` is ``/git:commit`` (Claude Code's
convention). Optional front matter: ``description`` and ``argument-hint`` (shown in completion).
The body is the prompt sent; ``$ARGUMENTS`` becomes everything typed after the name and
``$1`` … ``$9`` its whitespace-separated words.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from runtime.config import user_config_path
from runtime.frontmatter import FrontMatterError, located, read_markdown
from runtime.skills import Skill, discover_skills, skill_text

__all__ = [
    "CommandProblem",
    "CustomCommand",
    "discover_commands",
    "expand_command",
    "expand_invocation",
    "expand_slash_prompt",
]

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


def expand_invocation(
    name: str,
    arguments: str,
    *,
    skills: Mapping[str, Skill],
    commands: Mapping[str, CustomCommand],
) -> str | None:
    """What ``/name arguments`` sends when ``name`` is a skill (its body, files and the
    arguments) or a custom command (its body with ``$ARGUMENTS``); None otherwise. Names match
    without regard to case; the mappings are keyed by lower-case name."""
    skill = skills.get(name.lower())
    if skill is not None:
        return skill_text(skill, arguments)
    command = commands.get(name.lower())
    if command is not None:
        return expand_command(command, arguments)
    return None


def expand_slash_prompt(text: str, workspace: Path, *, env: Mapping[str, str] | None = None) -> str:
    """A prompt typed as ``/name args`` (``agent-tui run "/review main.py"``) expanded when it
    names a skill or a custom command of ``workspace``; any other text is returned unchanged."""
    stripped = text.strip()
    if not stripped.startswith("/") or stripped.startswith("//"):
        return text
    name, _, arguments = stripped[1:].partition(" ")
    skills = {s.name.lower(): s for s in discover_skills(workspace, env=env).skills.values()}
    commands = {c.name.lower(): c for c in discover_commands(workspace, env=env).commands.values()}
    expanded = expand_invocation(name, arguments, skills=skills, commands=commands)
    return text if expanded is None else expanded
