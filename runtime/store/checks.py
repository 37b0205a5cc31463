"""Checks on an SQLite file before anything opens it for writing: is it a database, ours, of a
schema this code knows, undamaged. Standard library only (no pydantic), so that the read-only
``agent-tui runs`` (``tui._cli.fast_runs``) refuses exactly what the store refuses.

A database of the latest schema whose ``sqlite_master`` is exactly what the migrations write
(the common case) is recognised by comparing that table with ``schema_latest``, without
importing or running the migrations; anything else gets the full check of ``schema``."""

from __future__ import annotations

import os
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


def folder_writable(path: Path) -> bool:
    """Whether this process may create files beside the database at ``path`` (SQLite's
    ``-wal`` and ``-shm``): false in a read-only folder or on a read-only file system."""
    return os.access(path.parent, os.W_OK | os.X_OK)


def database_writable(path: Path) -> bool:
    """Whether SQLite can write the database at ``path``: its folder, and the file if there."""
    return folder_writable(path) and (not path.exists() or os.access(path, os.W_OK))


def on_read_only_mount(path: Path) -> bool:
    """Whether the database at ``path`` lies on a file system mounted read-only (a backup, a
    copy on read-only media): the one case where nothing writes it through this mount."""
    try:
        return bool(os.statvfs(path.parent).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def opens_immutable(path: Path) -> bool:
    """Whether ``read_only_uri`` opens ``path`` ``immutable=1``: SQLite then reads it as a file
    that never changes (it takes no lock and sees no later commit)."""
    return not folder_writable(path) and on_read_only_mount(path) and not _logged(path)


def _logged(path: Path) -> bool:
    """Whether the database's write-ahead log holds commits (not copied into the file yet)."""
    try:
        return Path(f"{path}-wal").stat().st_size > 0
    except FileNotFoundError:
        return False


def read_only_uri(path: Path) -> str:
    """The URI that opens the database at ``path`` only to read (``mode=ro``).

    SQLite reads a WAL-mode database (ours are) through its ``-shm`` index, and creates that
    file, and the ``-wal``, when they are missing: in a folder this process cannot write, it
    then cannot open the database at all ("unable to open database file").

    On a file system mounted read-only, a database with no write-ahead log beside it, or an
    empty one (a copy, a backup, a database closed cleanly) is opened ``immutable=1``, which
    needs neither file: with no log nothing is missed. A log that holds commits not yet copied
    into the database is read with its ``-shm`` file when that is there too (SQLite does so
    read-only); without it SQLite cannot read the log, and ``immutable=1`` would ignore those
    commits, so the database is refused (``DatabaseError``) rather than shown without them.

    A folder that is only read-only to this user (its permissions) may hold a database its owner
    is writing now: SQLite documents that a file changed under ``immutable=1`` can read wrong
    or as corrupt, so there it is opened ``mode=ro`` only, which needs the ``-wal`` and ``-shm``
    files to be there already (they are while the database is open); when they are not, the
    database is refused in one line naming them."""
    uri = path.resolve().as_uri() + "?mode=ro"
    if folder_writable(path):
        return uri
    wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
    if on_read_only_mount(path):
        if not _logged(path):
            return uri + "&immutable=1"
        if shm.exists():
            return uri
        raise errors.DatabaseError(
            f"{path}: its write-ahead log {wal.name} holds changes SQLite cannot read in the "
            f"read-only folder {path.parent} (its {shm.name} file is missing); copy the "
            "database with its -wal file to a writable folder to read it"
        )
    missing = [f.name for f in (wal, shm) if not f.exists()]
    if not missing:
        return uri
    raise errors.DatabaseError(
        f"{path}: cannot be read here: SQLite needs its {' and '.join(missing)} "
        f"file{'s' if len(missing) > 1 else ''} and cannot create "
        f"{'them' if len(missing) > 1 else 'it'} in {path.parent} (not writable for this "
        "user); read it as a user who can write that folder, or copy it to a writable one"
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
    try:
        with path.open("rb") as fh:
            header = fh.read(len(SQLITE_HEADER))
    except OSError as exc:  # a file of another user, say: one line, not a traceback
        reason = (exc.strerror or str(exc)).lower()
        raise errors.DatabaseError(f"{path}: cannot be read ({reason})") from None
    if header != SQLITE_HEADER:
        raise errors.NotADatabase(
            f"{path}: not an SQLite database, so not an agent-tui database; refusing to open it"
        )
    uri = read_only_uri(path)
    try:
        ro = sqlite3.connect(uri, uri=True)
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
