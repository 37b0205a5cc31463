"""Where the CLI finds its database, workspace, configuration and model (DESIGN §10)."""

from __future__ import annotations

import os
from pathlib import Path

from runtime import config
from runtime.errors import ConfigError, InvalidInput

SECRET_ENV_KEYS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")
"""Environment variables whose values are never printed, only whether they are set."""
ENV_KEYS = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "AGENT_TUI_DB",
    "AGENT_TUI_MODEL",
)


def resolve_db_path(option: str | None) -> Path:
    """--db, else AGENT_TUI_DB, else $XDG_DATA_HOME/agent-tui/agent-tui.db."""
    path = config.resolve_db_path(option).expanduser()
    if path.is_dir():
        raise ConfigError(f"database path {path} is a folder, not a file")
    return path


def prepare_db_path(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the folder for the database {path}: {exc}") from None


def resolve_workspace(option: str | None) -> Path:
    path = Path(option).expanduser() if option else Path.cwd()
    if not path.exists():
        raise InvalidInput(f"workspace {path} does not exist")
    if not path.is_dir():
        raise InvalidInput(f"workspace {path} is not a folder")
    return path.resolve()


def load_config(workspace: Path) -> config.Config:
    """The merged configuration (raises ConfigError naming the file, line and key)."""
    return config.load_config(workspace)


def model_override(option: str | None) -> str | None:
    """--model, else AGENT_TUI_MODEL; None lets the runtime use config and its default."""
    return option or os.environ.get("AGENT_TUI_MODEL") or None


def log_path(db_path: Path) -> Path:
    return db_path.parent / "agent-tui.log"


def key_status(name: str) -> str:
    return "set" if os.environ.get(name) else "not set"
