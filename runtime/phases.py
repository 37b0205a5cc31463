"""Phases (DESIGN §16), the pure part: an agent's phases read from ``PHASE.md`` files, and the
rules of the routing tool.

An agent named ``NAME`` may define phases as folders ``WORKSPACE/.agent-tui/phases/NAME/<id>/``
holding a ``PHASE.md`` (or the user's ``$XDG_CONFIG_HOME/agent-tui/phases/NAME/``; the
workspace's wins). Front matter: ``id`` (defaults to the folder's name), ``tools`` (tool names or
patterns usable in this phase; absent = the agent's tools), ``skills`` (skill names offered),
``target`` (the phases it may route to), ``initial: true`` on the phase a run starts in (else
the first id in sort order). The body is the phase's directive, added to the system prompt while
the run is in it (and again after a compaction).

The agent moves with ``route(phase, payload?, reason?)``; ``phase`` may be a list to run several
targets in parallel as child runs that report back to the source phase.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime.config import user_config_path
from runtime.frontmatter import FrontMatterError, located, read_markdown

__all__ = [
    "ROUTE_TOOL_NAME",
    "Phase",
    "PhaseSet",
    "RouteDecision",
    "decide_route",
    "discover_phases",
    "requested_targets",
    "route_tool_schema",
]

ROUTE_TOOL_NAME = "route"
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class Phase:
    id: str
    directive: str
    path: str
    tools: tuple[str, ...] | None = None
    skills: tuple[str, ...] = ()
    targets: tuple[str, ...] = ()
    initial: bool = False

    def allows_tool(self, name: str) -> bool:
        if name == ROUTE_TOOL_NAME or self.tools is None:
            return True
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self.tools)


@dataclass
class PhaseSet:
    phases: dict[str, Phase] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def initial(self) -> Phase | None:
        marked = [p for p in self.phases.values() if p.initial]
        if marked:
            return marked[0]
        return self.phases[min(self.phases)] if self.phases else None


def _names(value: Any, key: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ValueError(f"{key} must be a name or a list of names")


def phase_dirs(workspace: Path, agent: str, *, env: Mapping[str, str] | None = None) -> list[Path]:
    return [
        workspace / ".agent-tui" / "phases" / agent,
        user_config_path(env).parent / "phases" / agent,
    ]


def _load(path: Path) -> Phase:
    document = read_markdown(path)
    meta = document.metadata
    phase_id = meta.get("id", path.parent.name)
    if not isinstance(phase_id, str) or not _ID.match(phase_id):
        raise ValueError(f"id {phase_id!r} is not a usable phase id")
    tools = meta.get("tools")
    initial = meta.get("initial", False)
    if not isinstance(initial, bool):
        raise ValueError("initial must be true or false")
    return Phase(
        id=phase_id,
        directive=document.body.strip(),
        path=str(path),
        tools=None if tools is None else _names(tools, "tools"),
        skills=_names(meta.get("skills"), "skills"),
        targets=_names(meta.get("target"), "target"),
        initial=initial,
    )


def discover_phases(
    workspace: Path, agent: str, *, env: Mapping[str, str] | None = None
) -> PhaseSet:
    found = PhaseSet()
    for directory in phase_dirs(workspace, agent, env=env):
        if not directory.is_dir():
            continue
        for folder in sorted(p for p in directory.iterdir() if p.is_dir()):
            path = folder / "PHASE.md"
            if not path.is_file():
                continue
            try:
                phase = _load(path)
            except FrontMatterError as exc:
                found.problems.append(located(path, exc.problem, exc.line))
                continue
            except ValueError as exc:
                found.problems.append(located(path, str(exc)))
                continue
            found.phases.setdefault(phase.id, phase)
    for phase in found.phases.values():
        unknown = [t for t in phase.targets if t not in found.phases]
        if unknown:
            found.problems.append(f"{phase.path}: target names unknown phases: {unknown}")
    return found


def route_tool_schema(phases: PhaseSet) -> dict[str, Any]:
    ids = sorted(phases.phases)
    return {
        "type": "object",
        "properties": {
            "phase": {
                "description": "the phase to move to, or several to run in parallel",
                "anyOf": [
                    {"type": "string", "enum": ids},
                    {"type": "array", "items": {"type": "string", "enum": ids}, "minItems": 1},
                ],
            },
            "payload": {"type": "string", "description": "what the next phase should know"},
            "reason": {"type": "string", "description": "why you are moving"},
        },
        "required": ["phase"],
        "additionalProperties": False,
    }


@dataclass(frozen=True)
class RouteDecision:
    """``move``: the run continues in ``targets[0]``. ``fan_out``: each target runs as a child
    run and the results return to ``source``. ``refused``: the model sees ``error``."""

    kind: str
    source: str
    targets: tuple[str, ...] = ()
    error: str = ""


def requested_targets(value: Any) -> tuple[str, ...] | None:
    """The phases a ``route`` call names (a name, or a list of names; repeats dropped), or None
    when ``phase`` is neither."""
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return tuple(dict.fromkeys(value))
    return None


def decide_route(phases: PhaseSet, current: str, requested: str | Sequence[str]) -> RouteDecision:
    targets = requested_targets(requested if isinstance(requested, str) else list(requested))
    if targets is None:
        return RouteDecision("refused", current, (), "phase must be a phase id or a list of them")
    source = phases.phases.get(current)
    if source is None:
        return RouteDecision("refused", current, targets, f"the current phase {current!r} is gone")
    unknown = [t for t in targets if t not in phases.phases]
    if unknown:
        return RouteDecision("refused", current, targets, f"no such phase: {', '.join(unknown)}")
    if source.targets:
        barred = [t for t in targets if t not in source.targets]
        if barred:
            allowed = ", ".join(source.targets)
            return RouteDecision(
                "refused",
                current,
                targets,
                f"phase {current} may route only to: {allowed} (not {', '.join(barred)})",
            )
    if len(targets) == 1:
        return RouteDecision("move", current, targets)
    return RouteDecision("fan_out", current, targets)
