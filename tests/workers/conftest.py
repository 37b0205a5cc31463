"""Fixtures: the store conformance fixtures (one store per backend of ``tests.store.backends``,
so the queue's rows are tested on PostgreSQL too), the CLI harness, and a fresh PostgreSQL
database (``pg_database``, skipped where PostgreSQL cannot run)."""

from tests.cli.conftest import cli
from tests.pg.conftest import pg_database
from tests.store.conftest import backend, clock, make_store, store

__all__ = ["backend", "cli", "clock", "make_store", "pg_database", "store"]
