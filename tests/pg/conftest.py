"""A PostgreSQL cluster shared by the tests of one session, and a fresh database per test."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from tests.pg_cluster import PgCluster, find_pg_bin, shared_cluster


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    bin_dir, why = find_pg_bin()
    if bin_dir is None:
        pytest.skip(f"{why}; `.ci/run` installs them (Debian package postgresql)")
    pytest.importorskip("asyncpg", reason="asyncpg is not installed (pip install '.[postgres]')")
    yield shared_cluster()


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
