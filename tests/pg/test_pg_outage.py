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


async def test_a_listening_store_listens_again_once_the_server_is_back(
    own_cluster: PgCluster,
) -> None:
    """Found by a new-user trial: after a restart, the connection that LISTENed was gone for
    good, so workers and TUIs heard of nothing another machine committed (polling only). Now
    the store listens again once the server answers, and hears the next commit."""
    from runtime.store.base import NewRun

    woken: asyncio.Queue[int] = asyncio.Queue()
    store = PostgresStore(own_cluster.dsn())
    store.on_remote_commit(woken.put_nowait)
    await store.open()
    other: PostgresStore | None = None
    try:
        await asyncio.to_thread(own_cluster.stop)
        await asyncio.to_thread(own_cluster.start)
        async with asyncio.timeout(60):
            # Listening again, it catches up once (what it may have missed: read by cursor).
            assert await woken.get() == 0
            other = PostgresStore(own_cluster.dsn())
            await other.open()
            run = await other.create_run(
                NewRun(agent="default", model="demo", input="hello", workspace="/w")
            )
            heard = await woken.get()
        assert heard == await store.last_seq() > 0
        assert (await store.read_events(after=0))[0].run_id == run.id
    finally:
        if other is not None:
            await other.close()
        await store.close()
