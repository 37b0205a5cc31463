"""PostgreSQL going away and coming back (a restart, an upgrade, a failover): the owner lease
is renewed again once the server answers, and the thread that renews it survives the outage."""

from __future__ import annotations

import asyncio

from runtime.store.postgres import PostgresStore
from tests.pg_cluster import PgCluster


async def test_the_lease_renewer_says_busy_while_the_server_is_down_and_renews_once_it_is_back(
    own_cluster: PgCluster,
) -> None:
    """Found by a new-user trial: the first renewal after the server stopped raised asyncpg's
    InternalClientError ("cannot switch to state 12; another operation is in progress"), which
    ended the worker's lease thread with a traceback on its terminal: the lease then ran out
    while the worker lived on, and other processes recovered its runs."""
    store = PostgresStore(own_cluster.dsn())
    await store.open()
    try:
        await store.register_owner("owner-1", lease_seconds=30)
        renewer = store.lease_renewer("owner-1")
        try:
            # The renewer runs on a thread of its own, with an event loop of its own.
            assert await asyncio.to_thread(renewer.renew, 30) == "renewed"
            await asyncio.to_thread(own_cluster.stop)
            for _ in range(3):
                assert await asyncio.to_thread(renewer.renew, 30) == "busy"
            await asyncio.to_thread(own_cluster.start)
            assert await asyncio.to_thread(renewer.renew, 30) == "renewed"
        finally:
            await asyncio.to_thread(renewer.close)
    finally:
        await store.close()
