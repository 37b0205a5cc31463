"""The throwaway cluster the PostgreSQL tests run on is real and isolated per test."""

from __future__ import annotations

import asyncpg


async def test_a_fresh_database_is_reachable_on_loopback_and_empty(pg_database: str) -> None:
    assert "@127.0.0.1:" in pg_database
    connection = await asyncpg.connect(pg_database)
    try:
        version = await connection.fetchval("SHOW server_version_num")
        tables = await connection.fetchval(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
        )
    finally:
        await connection.close()
    assert int(version) >= 150000
    assert tables == 0
