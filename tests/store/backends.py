"""The store implementations the conformance suite and the state machine run against.

Each backend opens a store on named storage under a test's folder: the same name reopens the
same storage (a second process on one database), another name is a fresh one. A PostgreSQL
backend adds an entry here (a database or schema per name) and gets every test."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from runtime.clock import ManualClock
from runtime.store.base import Store
from runtime.store.sqlite import SqliteStore


@dataclass(frozen=True)
class Backend:
    name: str
    make: Callable[[Path, str, ManualClock], Store]
    """A store on storage ``name`` under the folder, not yet opened."""
    crash: Callable[[Store], Awaitable[None]] | None = None
    """Write without committing, then drop the connection as a dying process would."""


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


BACKENDS: dict[str, Backend] = {"sqlite": Backend("sqlite", _sqlite, _crash_sqlite)}
