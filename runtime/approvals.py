"""The approval policy (DESIGN §8, §10): may a tool call run, must a person be asked, or never?

Order of precedence: a ``deny`` rule wins over everything; then what the person allowed for this
run; then ``ask`` rules; then ``allow`` rules; then the tool's own default (read-only tools allow,
writes and shell ask). Rules are tool names or fnmatch patterns (``shell``, ``write_*``,
``server__*``, ``*``).

"Allow always in this workspace" is a visible, revocable rule: the tool's name in
``[permissions] allow`` of the workspace's ``agent-tui.toml``, added and removed with tomlkit so
the rest of the file (and its comments) stays as it was. ``runtime.permissions`` lists every
rule with its file, revokes them, and re-reads changed files before each decision.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from runtime.config import (
    Permissions,
    add_to_toml_array,
    read_toml_file,
    remove_from_toml_array,
    workspace_config_path,
)
from runtime.errors import ConfigError
from runtime.fileio import write_text_atomically

__all__ = [
    "ApprovalPolicy",
    "Decision",
    "list_always_rules",
    "remove_always_rule",
    "save_always_rule",
]

Decision = Literal["allow", "ask", "deny"]

_SECTION = ("permissions",)
_KEY = "allow"


def _first_match(tool_name: str, patterns: Iterable[str]) -> str | None:
    for pattern in patterns:
        if fnmatch.fnmatchcase(tool_name, pattern):
            return pattern
    return None


class ApprovalPolicy:
    """Decides, per tool name, from the configured permissions and this run's allowances."""

    def __init__(self, permissions: Permissions, run_allowed: set[str] | None = None) -> None:
        self.permissions = permissions
        self.run_allowed: set[str] = run_allowed if run_allowed is not None else set()

    def decide(self, tool_name: str, *, default: Decision) -> Decision:
        return self.explain(tool_name, default=default)[0]

    def explain(self, tool_name: str, *, default: Decision) -> tuple[Decision, str]:
        """The decision and, in plain words, the rule that made it (for prompts and logs)."""
        rule = _first_match(tool_name, self.permissions.deny)
        if rule is not None:
            return "deny", f"denied by the rule {rule!r} in [permissions] deny"
        if _first_match(tool_name, self.run_allowed) is not None:
            return "allow", "allowed for this run"
        rule = _first_match(tool_name, self.permissions.ask)
        if rule is not None:
            return "ask", f"the rule {rule!r} in [permissions] ask"
        rule = _first_match(tool_name, self.permissions.allow)
        if rule is not None:
            return "allow", f"allowed by the rule {rule!r} in [permissions] allow"
        return default, f"the default for {tool_name}"


def list_always_rules(workspace: Path) -> list[str]:
    """The tool names and patterns allowed in the workspace's ``agent-tui.toml``."""
    _, content = read_toml_file(workspace_config_path(workspace))
    section = content.get("permissions", {})
    rules = section.get(_KEY, []) if isinstance(section, dict) else []
    return [str(rule) for rule in rules] if isinstance(rules, list) else []


def save_always_rule(workspace: Path, tool_name: str) -> Path:
    """Add ``tool_name`` to ``[permissions] allow`` of the workspace's ``agent-tui.toml``
    (creating the file or the section if needed); returns the file. Idempotent."""
    if not tool_name.strip():
        raise ConfigError("an approval rule needs a tool name")
    path = workspace_config_path(workspace)
    text, _ = read_toml_file(path)
    edited = add_to_toml_array(text, _SECTION, _KEY, tool_name, path=path)
    if edited != text or not path.exists():
        write_text_atomically(path, edited)
    return path


def remove_always_rule(workspace: Path, tool_name: str) -> bool:
    """Remove ``tool_name`` from ``[permissions] allow`` of the workspace's ``agent-tui.toml``;
    returns whether a rule was removed."""
    path = workspace_config_path(workspace)
    text, _ = read_toml_file(path)
    if not text.strip():
        return False
    edited = remove_from_toml_array(text, _SECTION, _KEY, tool_name, path=path)
    if edited == text:
        return False
    write_text_atomically(path, edited)
    return True
