"""Skills (DESIGN §16): folders holding a ``SKILL.md``, offered to the model by name and description
and loaded on demand through the ``use_skill`` tool, or invoked by the person as ``/name args``.

Where they are found, nearest first (a nearer skill of the same name hides a farther one):
``WORKSPACE/.agent-tui/skills/``, ``WORKSPACE/.claude/skills/``, then the user's
``$XDG_CONFIG_HOME/agent-tui/skills/``. ``SKILL.md`` front matter: ``name`` (defaults to the
folder's name), ``description`` (required: the model chooses by it), optional
``disable-model-invocation: true`` (only the person may invoke it) and ``allowed-tools`` (a list,
or a comma-separated string, recorded and shown).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime.config import user_config_path
from runtime.errors import ToolError
from runtime.frontmatter import FrontMatterError, located, read_markdown
from runtime.tools.base import ApprovalDefault, ToolContext, ToolOutput

__all__ = [
    "USE_SKILL_NAME",
    "Skill",
    "SkillInvocation",
    "SkillProblem",
    "UseSkillTool",
    "discover_skills",
    "skill_invocation",
    "skill_search_dirs",
    "skills_prompt",
    "workspace_skills",
]

USE_SKILL_NAME = "use_skill"
MAX_LISTED_FILES = 200
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    path: str
    """The ``SKILL.md`` file."""
    body: str
    model_invocable: bool = True
    allowed_tools: tuple[str, ...] = ()

    @property
    def folder(self) -> Path:
        return Path(self.path).parent

    def files(self) -> list[str]:
        """Every other file of the skill's folder, relative to it (what the body may refer to)."""
        listed: list[str] = []
        for root, dirs, names in os.walk(self.folder):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(names):
                relative = (Path(root) / name).relative_to(self.folder).as_posix()
                if relative != "SKILL.md":
                    listed.append(relative)
                if len(listed) >= MAX_LISTED_FILES:
                    return listed
        return listed


@dataclass(frozen=True)
class SkillProblem:
    """A skill folder that could not be used, and why (shown by ``doctor``)."""

    path: str
    reason: str
    line: int | None = None

    def shown(self) -> str:
        return located(self.path, self.reason, self.line)


@dataclass
class SkillCatalog:
    skills: dict[str, Skill] = field(default_factory=dict)
    problems: list[SkillProblem] = field(default_factory=list)


def skill_search_dirs(workspace: Path, *, env: Mapping[str, str] | None = None) -> list[Path]:
    return [
        workspace / ".agent-tui" / "skills",
        workspace / ".claude" / "skills",
        user_config_path(env).parent / "skills",
    ]


def _tool_list(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ValueError("allowed-tools must be a list of tool names or a comma-separated string")


def _load_skill(path: Path) -> Skill:
    document = read_markdown(path)
    meta = document.metadata
    name = meta.get("name", path.parent.name)
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"name {name!r} is not a usable skill name (letters, digits, - _ .)")
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        raise ValueError("description is missing: the model chooses a skill by it")
    disabled = meta.get("disable-model-invocation", False)
    if not isinstance(disabled, bool):
        raise ValueError("disable-model-invocation must be true or false")
    return Skill(
        name=name,
        description=" ".join(description.split()),
        path=str(path),
        body=document.body.strip(),
        model_invocable=not disabled,
        allowed_tools=_tool_list(meta.get("allowed-tools")),
    )


def discover_skills(workspace: Path, *, env: Mapping[str, str] | None = None) -> SkillCatalog:
    """Every skill visible from ``workspace``; broken ones are reported, never fatal."""
    catalog = SkillCatalog()
    for directory in skill_search_dirs(workspace, env=env):
        if not directory.is_dir():
            continue
        for folder in sorted(p for p in directory.iterdir() if p.is_dir()):
            path = folder / "SKILL.md"
            if not path.is_file():
                continue
            try:
                skill = _load_skill(path)
            except FrontMatterError as exc:
                problem = SkillProblem(path=str(path), reason=exc.problem, line=exc.line)
                catalog.problems.append(problem)
                continue
            except ValueError as exc:
                catalog.problems.append(SkillProblem(path=str(path), reason=str(exc)))
                continue
            catalog.skills.setdefault(skill.name, skill)
    return catalog


def skills_prompt(skills: Sequence[Skill]) -> str:
    """The system-prompt section offering the model-invocable skills by name and description."""
    offered = [s for s in skills if s.model_invocable]
    if not offered:
        return ""
    lines = [
        "# Skills",
        "",
        f"Load a skill with the {USE_SKILL_NAME} tool when the task matches its description;",
        "its instructions and the list of its files come back as the tool result.",
        "",
    ]
    lines += [f"- {s.name}: {s.description}" for s in offered]
    return "\n".join(lines)


_HEADING = "# Skill: "
_FILES = "Files of this skill (in "
_TOOLS = "Tools this skill expects: "
_ARGUMENTS = "Arguments: "


def skill_text(skill: Skill, arguments: str = "") -> str:
    """What loading a skill yields: its body, its folder and files, and the person's arguments.
    (``skill_invocation`` reads the name and the arguments back: change both together.)"""
    parts = [f"{_HEADING}{skill.name}", "", skill.body]
    files = skill.files()
    if files:
        parts += ["", f"{_FILES}{skill.folder}):", *[f"- {f}" for f in files]]
    if skill.allowed_tools:
        parts += ["", _TOOLS + ", ".join(skill.allowed_tools)]
    if arguments.strip():
        parts += ["", f"{_ARGUMENTS}{arguments.strip()}"]
    return "\n".join(parts).strip()


@dataclass(frozen=True)
class SkillInvocation:
    """A person's ``/name arguments``, read back from the message ``skill_text`` made of it."""

    name: str
    arguments: str

    @property
    def typed(self) -> str:
        """The command as the person typed it (up to the case of the name)."""
        return f"/{self.name} {self.arguments}".strip()


def skill_invocation(text: str, skills: Mapping[str, Skill]) -> SkillInvocation | None:
    """The invocation behind ``text`` when it is the message ``skill_text`` makes of one of
    ``skills`` (keyed by name), else None.

    The store keeps only the expanded message (what the model reads), so a screen showing what
    the person typed reads it back from there. The text alone does not tell: a person may paste
    a SKILL.md (``# Skill: deploy`` … ``Arguments: --prod``) for review, and recalling that as
    ``/deploy --prod`` would run the skill on Enter. So the skill must exist, be what ``/name``
    runs (``runtime.commands.invocables``: not one named like a built-in, which ``/name`` opens,
    nor one a nearer skill of the name hides), and rebuilding its expansion must give ``text``
    exactly. A body ending in an ``Arguments:`` paragraph, invoked
    without arguments, expands to what the same skill invoked with that paragraph's words does:
    that one reads as invoked without (the model read the same either way)."""
    heading, blank, rest = text.partition("\n")
    if not heading.startswith(_HEADING) or (blank and not rest.startswith("\n")):
        return None
    skill = skills.get(heading[len(_HEADING) :])
    if skill is None:
        return None
    # The rule of what /name runs is in runtime.commands, which imports this module.
    from runtime.commands import invocables

    if invocables(skills.values(), ()).skills.get(skill.name.lower()) is not skill:
        return None  # ``/name`` runs something else: recalled as it, Enter would not run this
    _, found, arguments = text.rpartition(f"\n\n{_ARGUMENTS}")
    for candidate in ("", arguments.strip()) if found else ("",):
        if skill_text(skill, candidate) == text:
            return SkillInvocation(name=skill.name, arguments=candidate)
    return None


_CACHE: dict[str, tuple[tuple[int, ...], dict[str, Skill]]] = {}


def _skills_signature(workspace: Path) -> tuple[int, ...]:
    """What changes when a skill of ``workspace`` is added, removed or edited: the folders' and
    the ``SKILL.md`` files' modification times (a few stats, against reading every file)."""
    times: list[int] = []
    for directory in skill_search_dirs(workspace):
        try:
            times.append(directory.stat().st_mtime_ns)
            folders = sorted(directory.iterdir())
        except OSError:
            times.append(-1)
            continue
        for folder in folders:
            try:
                times.append((folder / "SKILL.md").stat().st_mtime_ns)
            except OSError:
                times.append(-1)
    return tuple(times)


def workspace_skills(workspace: str | Path) -> Mapping[str, Skill]:
    """The skills of ``workspace`` by name, read again only when their files changed (screens
    ask for each row and message that may be an invocation)."""
    path = Path(workspace)
    signature = _skills_signature(path)
    cached = _CACHE.get(str(path))
    if cached is not None and cached[0] == signature:
        return cached[1]
    skills = discover_skills(path).skills
    _CACHE[str(path)] = (signature, skills)
    return skills


class UseSkillTool:
    """The ``use_skill`` tool: read-only, allowed by default."""

    name = USE_SKILL_NAME
    read_only = True
    approval_default: ApprovalDefault = "allow"

    def __init__(self, skills: Sequence[Skill]) -> None:
        self._skills = {s.name: s for s in skills if s.model_invocable}
        names = ", ".join(sorted(self._skills)) or "none"
        self.description = (
            "Load one of the skills listed in the system prompt: returns its instructions and "
            f"the paths of its files. Available: {names}."
        )
        self.input_schema: dict[str, Any] = {
            "type": "object",
            "properties": {
                "name": {"type": "string", "enum": sorted(self._skills) or [""]},
                "arguments": {"type": "string", "description": "optional details for the skill"},
            },
            "required": ["name"],
            "additionalProperties": False,
        }

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        skill = self._skills.get(str(arguments.get("name", "")))
        if skill is None:
            known = ", ".join(sorted(self._skills)) or "none"
            raise ToolError(f"there is no skill of that name (known: {known})")
        return ToolOutput(content=skill_text(skill, str(arguments.get("arguments", ""))))

    def approval_detail(self, arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        return {}
