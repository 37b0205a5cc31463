"""The store conformance fixtures (one store per backend of ``tests.store.backends``): the
consumer and worker-queue tests of the store run against every backend, PostgreSQL too."""

from tests.store.conftest import backend, clock, make_store, store

__all__ = ["backend", "clock", "make_store", "store"]
