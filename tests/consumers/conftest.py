"""Fixtures: the store conformance fixtures (one store per backend of ``tests.store.backends``,
so the consumer rows are tested on PostgreSQL too) and the CLI harness."""

from tests.cli.conftest import cli
from tests.store.conftest import backend, clock, make_store, store

__all__ = ["backend", "cli", "clock", "make_store", "store"]
