"""Fixtures of the store conformance suite.

The suite is written against the ``Store`` protocol and runs once per backend in
``tests.store.backends``: ``make_store`` opens a fresh store, or reopens one on the same storage
when given the same ``name``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from runtime.clock import ManualClock
from runtime.store.base import Store
from tests.store.backends import BACKENDS, Backend

StoreFactory = Callable[..., Awaitable[Store]]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest) -> Backend:
    chosen = BACKENDS[request.param]
    if chosen.unavailable:
        pytest.skip(f"{chosen.name}: {chosen.unavailable}")
    return chosen


@pytest.fixture
async def make_store(
    tmp_path: Path, clock: ManualClock, backend: Backend
) -> AsyncIterator[StoreFactory]:
    opened: list[Store] = []

    async def factory(name: str = "store.db", *, store_clock: ManualClock | None = None) -> Store:
        store = backend.make(tmp_path, name, store_clock or clock)
        await store.open()
        opened.append(store)
        return store

    yield factory
    for store in opened:
        await store.close()


@pytest.fixture
async def store(make_store: StoreFactory) -> Store:
    return await make_store()
