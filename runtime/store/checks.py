"""Checks on an SQLite file before anything opens it for writing: is it a database, ours, of a
schema this code knows, undamaged. Standard library only (no pydantic), so that the read-only
``agent-tui runs`` (``tui._cli.fast_runs``) refuses exactly what the store refuses.

A database of the latest schema whose ``sqlite_master`` is exactly what the migrations write
(the common case) is recognised by comparing that table with ``schema_latest``, without
importing or running the migrations; anything else gets the full check of ``schema``."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from runtime import errors
from runtime.store import schema_latest

SQLITE_HEADER = b"SQLite format 3\x00"


_DAMAGE_CODES = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})


def damaged_file(path: Path, exc: sqlite3.Error) -> errors.DatabaseCorrupt | None:
    """The error to raise when ``exc`` says the file at ``path`` is damaged (a page SQLite read
    is not what it wrote: SQLITE_CORRUPT, or SQLITE_NOTADB past the header), else None."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None or code & 0xFF not in _DAMAGE_CODES:
        return None
    return errors.DatabaseCorrupt(
        f"{path}: the database file is damaged ({exc}); nothing more is written to it"
    )


def schema_objects(conn: sqlite3.Connection) -> tuple[tuple[str, str, str, str], ...]:
    """Every schema object of ``conn``'s main database: type, name, table, SQL (statistics
    tables left out: ``ANALYZE`` may add them)."""
    return tuple(
        conn.execute(
            "SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master"
            " WHERE name NOT LIKE 'sqlite_stat%' ORDER BY type, name"
        ).fetchall()
    )


def _problems(ro: sqlite3.Connection, version: int) -> list[str]:
    if version == schema_latest.LATEST_VERSION and schema_objects(ro) == schema_latest.OBJECTS:
        return []
    from runtime.store.migrations import LATEST_VERSION
    from runtime.store.schema import expected_shape, schema_problems, shape_of

    if not 0 < version <= LATEST_VERSION:
        return []
    return schema_problems(shape_of(ro), expected_shape(version))


def check_database_file(path: Path) -> int | None:
    """Refuse a file that is not an SQLite database, an SQLite database that is not ours, or a
    schema newer than this code knows, without changing a byte of it. Returns the schema version
    seen (0 for a new database), or None when there is no file or it is empty."""
    if not path.exists():
        return None
    if path.is_dir():
        raise errors.NotADatabase(f"{path}: is a directory, not an agent-tui database")
    if path.stat().st_size == 0:
        return None
    with path.open("rb") as fh:
        header = fh.read(len(SQLITE_HEADER))
    if header != SQLITE_HEADER:
        raise errors.NotADatabase(
            f"{path}: not an SQLite database, so not an agent-tui database; refusing to open it"
        )
    try:
        ro = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
        try:
            # One read transaction: the version and the schema from the same snapshot, even
            # while another process that started at the same moment is migrating the file.
            ro.execute("BEGIN")
            version = int(ro.execute("PRAGMA user_version").fetchone()[0])
            tables = int(
                ro.execute(
                    "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
                    " AND name NOT LIKE 'sqlite_%'"
                ).fetchone()[0]
            )
            problems = _problems(ro, version)
        finally:
            ro.close()
    except sqlite3.DatabaseError as exc:
        raise errors.NotADatabase(f"{path}: unreadable SQLite database ({exc})") from exc
    if version > schema_latest.LATEST_VERSION:
        from runtime.store.migrations import too_new_message

        raise errors.SchemaTooNew(too_new_message(str(path), version))
    if version == 0 and tables:
        raise errors.NotADatabase(
            f"{path}: an SQLite database of another program, not an agent-tui database"
        )
    if problems:
        shown = "; ".join(problems[:3]) + (
            f"; and {len(problems) - 3} more" if len(problems) > 3 else ""
        )
        raise errors.SchemaDamaged(
            f"{path}: damaged agent-tui database (schema version {version}: {shown});"
            " refusing to open it, nothing was changed"
        )
    return version
