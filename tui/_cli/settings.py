"""Where the CLI finds its database, workspace, configuration and model (DESIGN §10)."""

from __future__ import annotations

import os
from pathlib import Path

from runtime import locations
from runtime.errors import ConfigError, InvalidInput

TYPE_CHECKING = False  # light: ``runs`` finds its database without runtime.config (pydantic)
if TYPE_CHECKING:
    from runtime import config

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


DbLocation = Path | str
"""An SQLite file (a ``Path``), or a PostgreSQL URL (a ``str``, ``postgresql://…``)."""


def _mistyped_url(value: str) -> bool:
    """A URL that is not ``postgresql://`` (``postgresq://``, ``postgresql:/``, ``mysql://``),
    a ``postgres…`` with its ``//`` but not its colon, or a ``postgres…:`` or ``sqlite…:``
    without its ``//`` (``postgresql:me@db/agents``, ``sqlite:agents.db``): taken as an SQLite
    path, it would create a file, or folders, named after it in the current folder."""
    import re

    return bool(
        re.match(r"[A-Za-z][A-Za-z0-9+.-]+:/", value)
        or re.match(r"postgres[a-z]*/{1,2}[^/]*@", value, re.IGNORECASE)
        or re.match(r"(postgres|sqlite)[a-z0-9]*:", value, re.IGNORECASE)
    )


def _without_password(value: str) -> str:
    """``value`` with whatever stands where a URL's password would (``user:PASSWORD@``, a
    ``password=`` parameter) hidden: over-hiding is fine in an error message that names what
    was mistyped."""
    import re

    # Up to the last "@": a password may hold "@" or "/" when not percent-encoded.
    value = re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*(?::/*|/+)[^/@:]*:).*@", r"\1***@", value)
    return re.sub(r"([?&]password=)[^&#]*", r"\1***", value)


def shown(db: DbLocation) -> str:
    """The database as messages name it (a URL without its password)."""
    if isinstance(db, str):
        from runtime.store.postgres import redacted

        return redacted(db)
    return str(db)


def absolute(db: DbLocation) -> DbLocation:
    """The database as a path that means the same from any folder (a URL as it is)."""
    return db if isinstance(db, str) else db.resolve()


def command_line(db: DbLocation) -> str:
    """``agent-tui`` as a hint to type it names it: with ``--db`` when ``db`` is not the
    database a bare ``agent-tui`` opens (``AGENT_TUI_DB`` aside: the hint may be typed in
    another shell), as an absolute path (perhaps in another folder)."""
    import shlex

    plain_env = {key: value for key, value in os.environ.items() if key != locations.ENV_DB}
    if absolute(locations.resolve_db_path(None, plain_env).expanduser()) != absolute(db):
        return f"agent-tui --db {shlex.quote(shown(absolute(db)))}"
    return "agent-tui"


def naming_the_database(text: str, db: DbLocation) -> str:
    """``text``, a runtime message, with each command it names (``runtime.hints.command``:
    ``agent-tui retry ID``) as ``command_line`` types it for ``db``: the runtime does not
    know which database its client opened."""
    import re

    from runtime.hints import COMMANDS, PROGRAM

    line = command_line(db)
    if line == PROGRAM:
        return text
    names = "|".join(re.escape(name) for name in sorted(COMMANDS))
    found = re.compile(rf"(?<![\w./-]){re.escape(PROGRAM)} (?=(?:{names}) )")
    return found.sub(lambda _: f"{line} ", text)


def resolve_db_path(option: str | None) -> DbLocation:
    """--db, else AGENT_TUI_DB, else $XDG_DATA_HOME/agent-tui/agent-tui.db. A
    ``postgresql://`` URL is kept as it is (a ``str``)."""
    raw = option or os.environ.get(locations.ENV_DB, "")
    if locations.is_postgres_url(raw):
        from runtime.store.postgres import check_url

        check_url(raw)
        return raw
    if _mistyped_url(raw):
        given = "--db" if option else locations.ENV_DB
        raise ConfigError(
            f"{given} {_without_password(raw)} is not a database agent-tui can open: a "
            "PostgreSQL URL starts with postgresql:// (postgresql://USER@HOST/DATABASE), an "
            "SQLite database is given by its file path"
        )
    path = locations.resolve_db_path(option).expanduser()
    if path.is_dir():
        raise ConfigError(f"database path {path} is a folder, not a file")
    return path


def prepare_db_path(path: DbLocation) -> None:
    if isinstance(path, str):
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the folder for the database {path}: {exc}") from None


def _why_unwritable(path: Path) -> str:
    try:
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            return "read-only file system"
    except OSError:
        pass
    return "permission denied"


def writable_problem(db_path: DbLocation) -> str | None:
    """What keeps agent-tui from writing the database at ``db_path`` (SQLite keeps its journal
    beside the database, and the log goes there too), in one line; None when nothing does.
    Creates nothing: a folder not made yet is judged by the nearest one that exists, where
    ``run`` would make it."""
    if isinstance(db_path, str):  # a PostgreSQL URL: the server says
        return None
    folder = db_path.parent
    existing = folder
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if existing != folder:
        if os.access(existing, os.W_OK | os.X_OK):
            return None
        return (
            f"cannot create the folder for the database {db_path}: {existing} is not writable "
            f"({_why_unwritable(existing)})"
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        return (
            f"the database folder {folder} is not writable ({_why_unwritable(folder)}); "
            "choose another with --db or AGENT_TUI_DB"
        )
    if db_path.exists() and not os.access(db_path, os.W_OK):
        return f"the database {db_path} is not writable ({_why_unwritable(folder)})"
    log_file = log_path(db_path)
    if log_file.is_dir() or (log_file.exists() and not os.access(log_file, os.W_OK)):
        return (
            f"cannot write the log file {log_file} "
            f"({'it is a folder' if log_file.is_dir() else _why_unwritable(folder)})"
        )
    return None


def check_writable(db_path: DbLocation) -> None:
    """Refuse, in one line, a database agent-tui could not write (``writable_problem``)
    instead of failing half-way."""
    problem = writable_problem(db_path)
    if problem is not None:
        raise ConfigError(problem)


def resolve_workspace(option: str | None) -> Path:
    path = Path(option).expanduser() if option else Path.cwd()
    if not path.exists():
        raise InvalidInput(f"workspace {path} does not exist")
    if not path.is_dir():
        raise InvalidInput(f"workspace {path} is not a folder")
    return path.resolve()


def load_config(workspace: Path) -> config.Config:
    """The merged configuration (raises ConfigError naming the file, line and key)."""
    from runtime import config

    return config.load_config(workspace)


def model_override(option: str | None) -> str | None:
    """--model, else AGENT_TUI_MODEL; None lets the runtime use config and its default. An
    empty --model is refused: it ran with the default model, saying nothing (a trial)."""
    if option is not None and not option.strip():
        raise ConfigError("--model is empty: give a model reference, e.g. demo or anthropic:NAME")
    return option or os.environ.get("AGENT_TUI_MODEL") or None


def log_path(db_path: DbLocation) -> Path:
    if isinstance(db_path, str):  # PostgreSQL: the log stays on this machine
        return (
            locations.resolve_db_path(
                None, {k: v for k, v in os.environ.items() if k != locations.ENV_DB}
            ).parent
            / "agent-tui.log"
        )
    return db_path.parent / "agent-tui.log"


def key_status(name: str) -> str:
    return "set" if os.environ.get(name) else "not set"
