"""Closing a Runtime on PostgreSQL closes every connection it opened, the owner lease's own
included (renewed on a thread, on a private event loop, apart from the store's pool)."""

from __future__ import annotations

import asyncio
import gc
import warnings
from pathlib import Path

import asyncpg
import pytest

from runtime.api import Runtime
from runtime.config import Config

pytestmark = pytest.mark.slow


async def _other_backends(dsn: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        count = await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    finally:
        await conn.close()
    return int(count)


async def test_closing_a_runtime_closes_the_lease_renewers_connection(
    pg_database: str, tmp_path: Path
) -> None:
    runtime = await Runtime.open(
        db_path=pg_database,
        workspace=tmp_path,
        config=Config(),
        model="demo:instant",
        lease_seconds=0.3,  # renewed every 0.1 s, on the renewer's own connection
    )
    run = await runtime.start("summarise")
    await runtime.wait(run.id, timeout=30)  # at its question: the lease is held, renewed
    conn = await asyncpg.connect(pg_database)
    try:
        async with asyncio.timeout(30):
            first = await conn.fetchval("SELECT heartbeat_at FROM agent_tui.owners")
            while await conn.fetchval("SELECT heartbeat_at FROM agent_tui.owners") == first:
                await asyncio.sleep(0.05)
    finally:
        await conn.close()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        await runtime.close()
        gc.collect()
    never_awaited = [w for w in caught if "never awaited" in str(w.message)]
    assert never_awaited == []
    async with asyncio.timeout(30):  # a closed connection's backend ends a moment later
        while await _other_backends(pg_database):
            await asyncio.sleep(0.05)
