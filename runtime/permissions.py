"""Permission rules as a person sees them (DESIGN §8, §10): every rule, the file it lives in,
revocable; and the permissions in force right now, re-read when a file changed.

Rules live in ``[permissions] allow / ask / deny`` of the user's ``config.toml`` and of the
workspace's ``agent-tui.toml``. ``current_permissions`` is consulted before every approval
decision: it compares each file's (mtime, size, inode) with what it last read, so an edit by
hand, a rule revoked on the permissions screen or by another process takes effect for the next
tool call without a restart, and an unchanged file costs two ``stat`` calls.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from runtime.config import (
    Config,
    Permissions,
    read_toml_file,
    user_config_path,
    workspace_config_path,
)
from runtime.errors import ConfigError
from runtime.fileio import FileStamp, file_stamp, write_text_atomically

__all__ = [
    "PermissionRule",
    "RuleKind",
    "RuleSource",
    "current_permissions",
    "list_rules",
    "restore_rule",
    "revoke_rule",
]

log = logging.getLogger(__name__)

RuleKind = Literal["allow", "ask", "deny"]
RuleSource = Literal["user", "workspace"]
RULE_KINDS: tuple[RuleKind, ...] = ("deny", "ask", "allow")


@dataclass(frozen=True)
class PermissionRule:
    pattern: str
    kind: RuleKind
    source: RuleSource
    path: Path
    """The file the rule is saved in."""
    position: int | None = field(default=None, compare=False)
    """Its index in its file's ``kind`` list when read (``list_rules``) or removed
    (``revoke_rule``): where ``restore_rule`` puts it back. Not part of the rule's identity."""
    revoked: tuple[str, str] | None = field(default=None, compare=False, repr=False)
    """Set by ``revoke_rule``: its file's text before and after the revoke. While the file is
    still as the revoke left it, ``restore_rule`` writes the text before back, comments and
    all (tomlkit has no public way to the comments of a list's lines)."""

    def describe(self) -> str:
        where = "user config" if self.source == "user" else "workspace"
        return f"{self.kind} {self.pattern} ({where}: {self.path})"


def _files(
    workspace: Path, user_config: Path | None, env: Mapping[str, str] | None
) -> list[tuple[RuleSource, Path]]:
    user = user_config if user_config is not None else user_config_path(env)
    return [("user", user), ("workspace", workspace_config_path(Path(workspace)))]


def _file_permissions(path: Path) -> Permissions:
    """The ``[permissions]`` of one file (empty if it does not exist); ConfigError if broken."""
    _, content = read_toml_file(path)
    section = content.get("permissions", {})
    if not isinstance(section, dict):
        raise ConfigError("must be a table", file=str(path), key="permissions")
    try:
        return Permissions.model_validate(section)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        key = ".".join(str(part) for part in ("permissions", *error["loc"]))
        raise ConfigError(str(error["msg"]), file=str(path), key=key) from None


def list_rules(
    workspace: Path,
    *,
    user_config: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> list[PermissionRule]:
    """Every rule of the user and workspace files, user first, each in file order."""
    rules: list[PermissionRule] = []
    for source, path in _files(workspace, user_config, env):
        permissions = _file_permissions(path)
        for kind in RULE_KINDS:
            for position, pattern in enumerate(getattr(permissions, kind)):
                rules.append(PermissionRule(str(pattern), kind, source, path, position))
    return rules


def revoke_rule(rule: PermissionRule) -> PermissionRule | None:
    """Remove ``rule`` from the file it is saved in (comments and layout kept): the rule as
    removed, with the ``position`` it had in its list (for ``restore_rule``), or None when it
    was not there. The next decision of every run in this process reads the file again."""
    text, content = read_toml_file(rule.path)
    if not text.strip():
        return None
    from runtime.config_edit import remove_from_toml_array  # tomlkit: only when a file is edited

    edited = remove_from_toml_array(text, ("permissions",), rule.kind, rule.pattern, path=rule.path)
    if edited == text:
        return None
    listed = content["permissions"][rule.kind]  # the edit found the rule there
    write_text_atomically(rule.path, edited)
    return replace(rule, position=listed.index(rule.pattern), revoked=(text, edited))


def restore_rule(rule: PermissionRule) -> None:
    """Put a revoked ``rule`` back in its file: the undo of ``revoke_rule``. The file as it
    was, the comments on and around the rule's line included, while nothing else changed it
    since; otherwise at its ``position`` in its list (at the end when it has none, or the list
    got shorter since), the other changes kept."""
    from runtime.config_edit import add_to_toml_array  # tomlkit: only when a file is edited

    text, _ = read_toml_file(rule.path)
    if rule.revoked is not None and text == rule.revoked[1]:
        write_text_atomically(rule.path, rule.revoked[0])
        return
    edited = add_to_toml_array(
        text, ("permissions",), rule.kind, rule.pattern, path=rule.path, at=rule.position
    )
    if edited != text:
        write_text_atomically(rule.path, edited)


# --- the permissions in force, re-read on change ----------------------------------------------


@dataclass
class _Cached:
    stamps: tuple[FileStamp, ...]
    permissions: Permissions


_cache: dict[tuple[str, str], _Cached] = {}
_lock = threading.Lock()


def _merged(layers: list[Permissions]) -> Permissions:
    combined: dict[str, list[str]] = {kind: [] for kind in RULE_KINDS}
    for layer in layers:
        for kind in RULE_KINDS:
            combined[kind] = list(dict.fromkeys([*combined[kind], *getattr(layer, kind)]))
    return Permissions(**combined)


def current_permissions(
    workspace: Path | str,
    config: Config,
    *,
    user_config: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Permissions:
    """The permissions for a decision in ``workspace`` now.

    ``config`` is the workspace's config as the runtime loaded it. When it was read from no
    file and no permission file exists, its permissions are used as given (a program or a test
    that passes its own ``Config``). Otherwise the user and workspace files are read again when
    one of them changed since the last call (by mtime, size and inode), merged as the loader
    merges them. A file that is broken right now (e.g. half-way through an edit) keeps the last
    good rules, minus every ``allow``: a mistake can make the agent ask more, never less.
    """
    user = user_config if user_config is not None else user_config_path(env)
    folder, workspace_file = _workspace_file(str(workspace))
    stamps = (file_stamp(user), file_stamp(workspace_file))
    if not config.sources and all(stamp is None for stamp in stamps):
        return config.permissions
    key = (folder, str(user))
    with _lock:
        cached = _cache.get(key)
        if cached is not None and cached.stamps == stamps:
            return cached.permissions
        try:
            permissions = _merged([_file_permissions(user), _file_permissions(workspace_file)])
        except ConfigError as exc:
            last = cached.permissions if cached is not None else config.permissions
            permissions = last.model_copy(update={"allow": []})
            log.warning("permissions: %s; asking for every tool until it is fixed", exc)
        _cache[key] = _Cached(stamps=stamps, permissions=permissions)
        return permissions


@functools.lru_cache(maxsize=64)
def _workspace_file(workspace: str) -> tuple[str, Path]:
    """(the workspace folder as a key, its config file), made once per folder: they are looked
    up before every step's decisions."""
    return str(Path(workspace)), workspace_config_path(Path(workspace))


def _forget_cache() -> None:
    """For tests: drop what was read (the next call reads the files)."""
    with _lock:
        _cache.clear()


def rules_as_rows(rules: list[PermissionRule]) -> list[dict[str, Any]]:
    """Plain data for display or ``--json``."""
    return [
        {"pattern": r.pattern, "kind": r.kind, "source": r.source, "path": str(r.path)}
        for r in rules
    ]
