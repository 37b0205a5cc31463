"""The store implementations the conformance suite and the state machine run against.

Each backend opens a store on named storage under a test's folder: the same name reopens the
same storage (a second process on one database), another name is a fresh one. The PostgreSQL
backend keeps each storage in its own schema of one database on the session's throwaway cluster
(``tests.pg_cluster.shared_cluster``); ``unavailable`` says why a backend cannot run here (its
tests are skipped with that reason: only when no PostgreSQL binaries or no asyncpg)."""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime.clock import ManualClock
from runtime.store.base import Store
from runtime.store.sqlite import SqliteStore
from tests.pg_cluster import find_pg_bin, shared_cluster


@dataclass(frozen=True)
class Backend:
    name: str
    make: Callable[[Path, str, ManualClock], Store]
    """A store on storage ``name`` under the folder, not yet opened."""
    crash: Callable[[Store], Awaitable[None]] | None = None
    """Write without committing, then drop the connection as a dying process would."""
    unavailable: str | None = None
    """Why this backend cannot run on this machine (its tests skip with this reason)."""


def _sqlite(folder: Path, name: str, clock: ManualClock) -> Store:
    return SqliteStore(folder / name, clock=clock)


async def _crash_sqlite(store: Store) -> None:
    assert isinstance(store, SqliteStore)
    conn, worker = store._conn, store._worker
    assert conn is not None and worker is not None
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("UPDATE runs SET state = 'completed', revision = revision + 1")
    conn.execute("INSERT INTO events (kind, created_at, payload) VALUES (0, 0, '{}')")
    conn.close()  # never committed: SQLite rolls it back, as when the process dies
    store._conn = store._worker = None
    worker.shutdown(wait=True)


PG_DATABASE = "agent_tui_tests"


def _pg_unavailable() -> str | None:
    bin_dir, why = find_pg_bin()
    if bin_dir is None:
        return f"{why}; `.ci/run` installs them (Debian package postgresql)"
    if importlib.util.find_spec("asyncpg") is None:
        return "asyncpg is not installed (pip install '.[postgres]')"
    return None


_pg_database_ready = False


def _pg_url(folder: Path, name: str) -> str:
    global _pg_database_ready
    cluster = shared_cluster()
    if not _pg_database_ready:
        import subprocess

        subprocess.run(
            [
                str(cluster.bin_dir / "createdb"),
                *("-h", "127.0.0.1", "-p", str(cluster.port), "-U", "agent_tui"),
                PG_DATABASE,
            ],
            check=False,
            capture_output=True,
            timeout=60,
        )
        _pg_database_ready = True
    schema = "s_" + hashlib.sha1(f"{folder.resolve()}/{name}".encode()).hexdigest()[:20]
    return f"{cluster.dsn(PG_DATABASE)}?schema={schema}"


def _postgres(folder: Path, name: str, clock: ManualClock) -> Store:
    from runtime.store.postgres import PostgresStore

    return PostgresStore(_pg_url(folder, name), clock=clock)


async def _crash_postgres(store: Store) -> None:
    from runtime.store.postgres import PostgresStore

    assert isinstance(store, PostgresStore)
    pool: Any = store._pool
    assert pool is not None
    conn = await pool.acquire()
    transaction = conn.transaction()
    await transaction.start()
    await conn.execute("UPDATE runs SET state = 'completed', revision = revision + 1")
    last = await conn.fetchval("UPDATE event_seq SET last = last + 1 RETURNING last")
    await conn.execute("INSERT INTO events (seq, created_at, payload) VALUES ($1, 0, '{}')", last)
    pool.terminate()  # never committed: the server rolls it back, as when the process dies
    store._pool = None
    await store.close()


BACKENDS: dict[str, Backend] = {
    "sqlite": Backend("sqlite", _sqlite, _crash_sqlite),
    "postgresql": Backend("postgresql", _postgres, _crash_postgres, _pg_unavailable()),
}
