"""The approval policy (DESIGN §8, §10): may a tool call run, must a person be asked, or never?

Order of precedence: a ``deny`` rule wins over everything; then what the person allowed for this
run; then ``ask`` rules; then ``allow`` rules; then the tool's own default (read-only tools allow,
writes and shell ask). Rules are tool names or fnmatch patterns (``shell``, ``write_*``,
``server__*``, ``*``).

Where the ``shell`` tool cannot be sandboxed (no working bubblewrap), ``[permissions] allow``
rules and the default no longer let it run unasked: every ``shell`` call asks (a ``deny`` rule
still wins, and what the person allowed for this run still counts).

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
    read_toml_file,
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


def denying_rule(tool_name: str, permissions: Permissions) -> str | None:
    """The ``[permissions] deny`` pattern that matches ``tool_name`` (deny wins over every
    other rule and allowance), or None."""
    return _first_match(tool_name, permissions.deny)


class ApprovalPolicy:
    """Decides, per tool name, from the configured permissions and this run's allowances."""

    def __init__(
        self,
        permissions: Permissions,
        run_allowed: set[str] | None = None,
        *,
        shell_confined: bool | None = None,
    ) -> None:
        """``shell_confined``: whether shell commands run in the sandbox; None asks
        ``runtime.tools.sandbox`` (probed once per process)."""
        self.permissions = permissions
        self.run_allowed: set[str] = run_allowed if run_allowed is not None else set()
        self._shell_confined = shell_confined

    def decide(self, tool_name: str, *, default: Decision) -> Decision:
        return self.explain(tool_name, default=default)[0]

    def explain(self, tool_name: str, *, default: Decision) -> tuple[Decision, str]:
        """The decision and, in plain words, the rule that made it (for prompts and logs)."""
        rule = denying_rule(tool_name, self.permissions)
        if rule is not None:
            return "deny", f"denied by the rule {rule!r} in [permissions] deny"
        if _first_match(tool_name, self.run_allowed) is not None:
            return "allow", "allowed for this run"
        rule = _first_match(tool_name, self.permissions.ask)
        if rule is not None:
            return "ask", f"the rule {rule!r} in [permissions] ask"
        unconfined = unconfined_shell_reason(tool_name, self._shell_confined)
        if unconfined is not None:
            return "ask", unconfined
        rule = _first_match(tool_name, self.permissions.allow)
        if rule is not None:
            return "allow", f"allowed by the rule {rule!r} in [permissions] allow"
        return default, f"the default for {tool_name}"


def unconfined_shell_reason(tool_name: str, shell_confined: bool | None = None) -> str | None:
    """Why a ``shell`` call must ask although a rule allows it: the shell is not sandboxed here.
    None for other tools, or when the sandbox works."""
    if tool_name != "shell":
        return None
    if shell_confined is None:
        from runtime.tools.sandbox import sandbox_status

        status = sandbox_status()
        if status.available:
            return None
        return f"shell is not sandboxed here ({status.detail}), so every call asks"
    return None if shell_confined else "shell is not sandboxed here, so every call asks"


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
    from runtime.config_edit import add_to_toml_array  # tomlkit: only when a file is edited

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
    from runtime.config_edit import remove_from_toml_array  # tomlkit: only when a file is edited

    edited = remove_from_toml_array(text, _SECTION, _KEY, tool_name, path=path)
    if edited == text:
        return False
    write_text_atomically(path, edited)
    return True
