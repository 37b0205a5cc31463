"""A second process on a PostgreSQL database, for the cross-process tests.

``child.py open URL``: wait for "go" on stdin, open the store (migrating it if needed), print
the migration versions this process applied as JSON, close.
``child.py create URL``: open, print "ready", wait for "go", create a run, print its id and the
last seq, close.
"""

from __future__ import annotations

import asyncio
import json
import sys

from runtime.store.base import NewRun
from runtime.store.postgres import PostgresStore


async def main(mode: str, url: str) -> None:
    if mode == "open":
        sys.stdin.readline()
        store = PostgresStore(url)
        await store.open()
        print(json.dumps({"applied": store.applied_migrations}), flush=True)
        await store.close()
        return
    store = PostgresStore(url)
    await store.open()
    print("ready", flush=True)
    sys.stdin.readline()
    run = await store.create_run(
        NewRun(agent="default", model="demo", input="from the other process", workspace="/tmp")
    )
    print(json.dumps({"run_id": run.id, "seq": await store.last_seq()}), flush=True)
    await store.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
