"""Where agent-tui keeps its database and user configuration (DESIGN §10): the XDG folders.

Standard library only, so that the light commands (``agent-tui runs``, ``--version``) find the
database without importing ``runtime.config`` (pydantic); ``runtime.config`` re-exports these."""

from __future__ import annotations

import functools
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import TypeGuard

ENV_DB = "AGENT_TUI_DB"
POSTGRES_SCHEMES = ("postgresql://", "postgres://")
CONFIG_FILE_NAME = "agent-tui.toml"
"""The workspace's own configuration file (in the workspace folder)."""


def _home(env: Mapping[str, str]) -> Path:
    home = env.get("HOME")
    return Path(home) if home else Path.home()


def _xdg_dir(env: Mapping[str, str], variable: str, fallback: str) -> Path:
    value = env.get(variable, "")
    # The XDG spec says relative values are invalid and must be ignored.
    if value and os.path.isabs(value):
        return Path(value)
    return _home(env) / fallback


def user_config_path(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/agent-tui/config.toml`` (``~/.config/agent-tui/config.toml``)."""
    env = os.environ if env is None else env
    return _user_config_path(env.get("XDG_CONFIG_HOME", ""), env.get("HOME", ""))


def user_cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CACHE_HOME/agent-tui`` (``~/.cache/agent-tui``): what can be made again."""
    env = os.environ if env is None else env
    return _xdg_dir(env, "XDG_CACHE_HOME", ".cache") / "agent-tui"


@functools.lru_cache(maxsize=16)
def _user_config_path(xdg_config_home: str, home: str) -> Path:
    """Made once per pair of values (it is looked up before every tool call)."""
    env = {"XDG_CONFIG_HOME": xdg_config_home, "HOME": home}
    return _xdg_dir(env, "XDG_CONFIG_HOME", ".config") / "agent-tui" / "config.toml"


def is_postgres_url(value: object) -> TypeGuard[str]:
    """Whether ``value`` names a PostgreSQL database: ``postgresql://`` or ``postgres://``, the
    scheme in any case (RFC 3986: ``PostgreSQL://`` is the same URL)."""
    return isinstance(value, str) and value[:13].lower().startswith(POSTGRES_SCHEMES)


def resolve_db_path(cli_db: str | None, env: Mapping[str, str] | None = None) -> Path:
    """``--db``, else ``AGENT_TUI_DB``, else ``$XDG_DATA_HOME/agent-tui/agent-tui.db``."""
    env = os.environ if env is None else env
    if cli_db:
        return Path(cli_db).expanduser()
    from_env = env.get(ENV_DB, "")
    if from_env:
        return Path(from_env).expanduser()
    return _xdg_dir(env, "XDG_DATA_HOME", ".local/share") / "agent-tui" / "agent-tui.db"


def peek_default(workspace: Path, key: str, env: Mapping[str, str] | None = None) -> str | None:
    """``[defaults] key`` as the configuration files set it (the workspace's file wins over the
    user's), read with the standard library only: the TUI takes its theme from here for the
    first frame, before ``runtime.config`` (pydantic) is imported and checks the whole
    configuration. A file that cannot be read or parsed counts as setting nothing here; that
    check names its problem."""
    found: str | None = None
    for path in (user_config_path(env), Path(workspace) / CONFIG_FILE_NAME):
        value = peek_file_default(path, key)
        if value is not None:
            found = value
    return found


def peek_file_default(path: Path, key: str) -> str | None:
    """``[defaults] key`` as the one file ``path`` sets it (None if it does not, or cannot be
    read)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    defaults = data.get("defaults")
    value = defaults.get(key) if isinstance(defaults, dict) else None
    return value if isinstance(value, str) else None


EXPORTS_DIR = (".agent-tui", "exports")
"""Where the TUI writes a job's export, inside the workspace: beside the project the person is
in (as Claude Code's ``/export`` does), but out of the way of the agent's own tools, whose
``list_dir`` and ``search`` do not walk into it (a transcript found by the next task's search
is the conversation read back to the model)."""


def exports_dir(workspace: Path) -> Path:
    return workspace.joinpath(*EXPORTS_DIR)


EXPORTS_IGNORED = "# agent-tui's exports: snapshots of conversations, not the project's files\n*\n"
"""The exports folder's own ``.gitignore``: git (``git status``, the @-picker's listing) leaves
the exports alone, while ``.agent-tui/`` beside them (skills, commands) stays tracked."""
