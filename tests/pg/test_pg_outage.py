"""PostgreSQL going away and coming back (a restart, an upgrade, a failover): the owner lease
is renewed again once the server answers, and the thread that renews it survives the outage."""

from __future__ import annotations

import asyncio
from typing import Any

from runtime.store.postgres import PostgresStore
from tests.pg_cluster import USER, PgCluster


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


async def test_reads_and_writes_over_connections_the_server_just_ended_fail_as_database_errors(
    own_cluster: PgCluster,
) -> None:
    """Found by review: a read over a connection the server had just ended (as a restart ends
    every session) could raise asyncpg's InternalClientError ("cannot switch to state 15;
    another operation (2) is in progress", from the pool's reset of it), which no caller
    expects: ``events --follow`` ended with "unexpected error" (exit 1) where it waits out an
    outage. Now it is a ``DatabaseError``, and the store goes on once the server answers."""
    import asyncpg

    from runtime.errors import DatabaseError

    admin = await asyncpg.connect(own_cluster.dsn())
    await admin.execute("CREATE ROLE ended LOGIN SUPERUSER")
    store = PostgresStore(own_cluster.dsn().replace(f"{USER}@", "ended@"))
    await store.open()

    async def answered() -> None:
        """Until the store answers again (its pool replaced the connections that ended)."""
        async with asyncio.timeout(30):
            while True:
                try:
                    await store.register_owner("owner", lease_seconds=30)
                    return
                except DatabaseError:
                    continue

    try:
        failed = 0
        for attempt in range(20):
            await answered()
            # What the server does to each session when it stops ("terminating connection
            # due to administrator command"), here without stopping.
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'ended'"
            )
            try:
                if attempt % 2:
                    await store.register_owner("owner", lease_seconds=30)
                else:
                    await store.last_seq()
            except DatabaseError:
                failed += 1
        assert failed > 0  # the server's ending was met
        await answered()
    finally:
        await store.close()
        await admin.close()


async def test_a_store_listens_again_after_the_server_ended_its_new_listening_connections(
    own_cluster: PgCluster,
) -> None:
    """Found by review: a listening connection the server ended before its LISTEN went through
    (here by ``idle_session_timeout``; a restart does it to every session) raised asyncpg's
    InternalClientError or InterfaceError out of ``_listen``, which ended the task that
    listens again: the store heard nothing more for as long as it lived (polling only)."""
    import asyncpg

    from runtime.store.base import NewRun

    admin = await asyncpg.connect(own_cluster.dsn())
    await admin.execute("CREATE ROLE listener LOGIN SUPERUSER")
    woken: asyncio.Queue[int] = asyncio.Queue()
    store = PostgresStore(own_cluster.dsn().replace(f"{USER}@", "listener@"))
    await store.open()
    store.on_remote_commit(woken.put_nowait)
    other = PostgresStore(own_cluster.dsn())
    await other.open()
    try:
        async with asyncio.timeout(30):
            assert await woken.get() == 0  # listening (it catches up once)
        # Every new session of the role ends 1 ms after it is ready for a query (the pool's
        # sessions, older, are left alone); then the listening one is ended.
        await admin.execute("ALTER ROLE listener SET idle_session_timeout = '1ms'")
        ended = await _sessions_ended(admin)
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE usename = 'listener' AND query LIKE 'LISTEN%'"
        )
        # Until it tried to listen again 200 times (each a session ended; about one in a
        # hundred ends between its start and its LISTEN), or stopped trying for good.
        async with asyncio.timeout(120):
            while await _sessions_ended(admin) < ended + 201:
                await asyncio.sleep(0.1)
        await admin.execute("ALTER ROLE listener RESET idle_session_timeout")
        async with asyncio.timeout(30):
            run = await other.create_run(
                NewRun(agent="default", model="demo", input="hello", workspace="/w")
            )
            last = await other.last_seq()
            while (heard := await woken.get()) < last:
                pass
        assert heard == last
        assert (await other.read_events(after=last - 1))[0].run_id == run.id
    finally:
        await other.close()
        await store.close()
        await admin.close()


async def _sessions_ended(admin: Any) -> int:
    """Sessions of this cluster's databases that ended in an error (a FATAL: a timeout, a
    termination), as the statistics count them."""
    await admin.execute("SELECT pg_stat_clear_snapshot()")
    return int(
        await admin.fetchval("SELECT sum(sessions_fatal + sessions_killed) FROM pg_stat_database")
    )
