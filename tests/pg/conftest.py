"""A fresh database per test on the session's PostgreSQL cluster (``pg_cluster``: root conftest)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from tests.pg_cluster import PgCluster, find_pg_bin, running_cluster


@pytest.fixture
async def pg_database(pg_cluster: PgCluster) -> AsyncIterator[str]:
    """The DSN of a new, empty database, dropped after the test."""
    import asyncpg

    name = f"t_{uuid.uuid4().hex[:16]}"
    admin = await asyncpg.connect(pg_cluster.dsn())
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    yield pg_cluster.dsn(name)
    admin = await asyncpg.connect(pg_cluster.dsn())
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


@pytest.fixture
def own_cluster() -> Iterator[PgCluster]:
    """A cluster of the test's own, which it may stop and start (the session's is shared)."""
    bin_dir, why = find_pg_bin()
    if bin_dir is None:
        pytest.skip(why)
    pytest.importorskip("asyncpg", reason="asyncpg is not installed (pip install '.[postgres]')")
    with running_cluster() as cluster:
        yield cluster
