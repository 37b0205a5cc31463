"""``agent-tui runs`` on an SQLite database without the runtime (DESIGN §13, issue 17).

The full path opens the runtime (the store, the engine, pydantic models) to read one page; this one
opens the file read-only with the standard library (``file:…?mode=ro``, ``immutable=1`` on a
read-only mount: ``runtime.store.checks.read_only_uri``; it can take no lease, recover nothing and
write nothing, so a TUI or worker on the same database is unaffected), reads the page with one
keyset query (and the owners of its queued and running runs, by key, to say which of those runs a
killed process left: ``runtime.owners``) and prints it with ``tui._cli.listing``, the formatting
the full path uses too. It refuses exactly what the store refuses (``runtime.store.checks``: not a
database, not ours, damaged, a newer schema), with the same errors.

It declines (returns None, and the caller takes the full path) when the full path would do
something it does not: set up an empty database file, migrate one of an older schema, or refuse
a ``--limit`` over the runtime's maximum. (Where there is no file at all, ``tui.cli`` says so
before either path runs: looking creates nothing.)
"""

from __future__ import annotations

import sqlite3
import sys

from runtime import errors
from runtime.store.checks import check_database_file, damaged_file, read_only_uri
from runtime.store.schema_latest import LATEST_VERSION
from runtime.textsafe import terminal_safe
from tui._cli import listing
from tui._cli.parser import EXIT_OK

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from pathlib import Path

MAX_LIMIT = 1000
"""``Runtime.list_runs`` refuses more (the full path says so); ``--archived`` reads the store
directly, without that limit."""

BUSY_SECONDS = 10.0
"""As long as the store waits for another process's lock."""


def _page_query(args: argparse.Namespace) -> tuple[str, list[object]]:
    columns = ", ".join(f"r.{name}" for name in listing.RUN_COLUMNS)
    sql = f"SELECT {columns}, j.title, j.archived FROM runs AS r JOIN jobs AS j ON j.id = r.job_id"
    where: list[str] = []
    params: list[object] = []
    if not args.archived:
        where.append("j.archived = 0")
    if args.state:
        where.append("r.state = ?")
        params.append(args.state)
        if args.state == "queued":
            where.append("r.interrupted = 0")  # those wait for a retry: --state interrupted
    if where:
        sql += " WHERE " + " AND ".join(where)
    # The store's order and keyset (``list_runs``): newest first, insertion order breaks ties.
    sql += " ORDER BY r.created_at DESC, r.n DESC LIMIT ?"
    params.append(args.limit)
    return sql, params


OWNER_QUERY = (
    "SELECT owner_id, released = 1 OR recovered_at IS NOT NULL, lease_expires_at FROM owners"
    " WHERE owner_id IN ({marks})"
)
"""The rows of the owners of the page's queued and running runs: a few (one per process that
ran them), looked up by primary key."""

Owners = dict[str, tuple[bool, float]]
"""Owner id → (it said it is gone, when its lease expires); an owner with no row said so."""


def _owners(conn: sqlite3.Connection, rows: list[tuple[object, ...]]) -> Owners:
    named = {owner for row in rows if (owner := listing.owner_to_check(row[:-2])) is not None}
    if not named:
        return {}
    owners: Owners = dict.fromkeys(named, (True, 0.0))
    query = OWNER_QUERY.format(marks=",".join("?" * len(named)))
    for owner_id, said_gone, expires_at in conn.execute(query, sorted(named)):
        owners[owner_id] = (bool(said_gone), float(expires_at))
    return owners


def _gone(owners: Owners, now: float) -> set[str]:
    """The owners that are provably gone: recovery's decision (``runtime.owners``), made here
    without acting on it (this process only reads)."""
    if not owners:
        return set()
    from runtime.owners import owner_gone

    return {
        owner_id
        for owner_id, (said_gone, expires_at) in owners.items()
        if owner_gone(owner_id, said_gone=said_gone, lease_live=expires_at >= now)
    }


def _read_page(
    db_path: Path, args: argparse.Namespace
) -> tuple[list[tuple[object, ...]], Owners] | None:
    """The page's rows and the owners of its queued and running runs, or None when the schema
    is not the latest (it needs a migration)."""
    sql, params = _page_query(args)
    try:
        conn = sqlite3.connect(
            read_only_uri(db_path),
            uri=True,
            timeout=BUSY_SECONDS,
            isolation_level=None,
        )
        try:
            conn.execute("BEGIN")  # the version, the page and its owners from one snapshot
            (version,) = conn.execute("PRAGMA user_version").fetchone()
            if version != LATEST_VERSION:
                return None  # migrated (or being migrated) since the check: the full path
            rows: list[tuple[object, ...]] = conn.execute(sql, params).fetchall()
            owners = _owners(conn, rows)
            conn.execute("COMMIT")
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise damaged_file(db_path, exc) or errors.DatabaseError(f"{db_path}: {exc}") from exc
    return rows, owners


def fast_runs(args: argparse.Namespace, db_path: Path) -> int | None:
    """Print the page of runs ``args`` asks for; None: take the full path instead."""
    if (not args.archived and args.limit > MAX_LIMIT) or args.state == "interrupted":
        return None  # "interrupted" is not a column: the runtime finds those runs
    version = check_database_file(db_path)  # raises what the store would raise
    if version != LATEST_VERSION:
        # An empty file or an older schema: the full path sets it up or migrates it, as every
        # command does (a missing file never gets here: see ``tui.cli``).
        return None
    page = _read_page(db_path, args)
    if page is None:
        return None
    import time

    rows, owners = page
    now = time.time()
    gone = _gone(owners, now)
    out = sys.stdout
    if args.json:
        import json

        for row in rows:
            data = listing.run_json(
                row[:-2], str(row[-2]), owner_gone=listing.owner_to_check(row[:-2]) in gone
            )
            out.write(json.dumps(data, ensure_ascii=False) + "\n")
            out.flush()
        return EXIT_OK
    if not rows:
        sys.stderr.write(listing.no_runs(args.state) + "\n")
        sys.stderr.flush()
        return EXIT_OK
    lines = listing.runs_table(
        (
            listing.run_line(
                row[:-2],
                listing.shown_title(str(row[-2]), bool(row[-1])),
                owner_gone=listing.owner_to_check(row[:-2]) in gone,
            )
            for row in rows
        ),
        now=now,
    )
    for line in lines:
        out.write(terminal_safe(line + "\n"))
        out.flush()
    return EXIT_OK
