"""Waiting out a database that cannot be reached, as a worker and ``events --follow`` do.

Only ``DatabaseUnreachable`` is an outage: the PostgreSQL store raises it for a server that is
away or ended the session (a restart, a network cut). Every other ``DatabaseError`` is a
refusal that would be the same next time (a permission, a password, a damaged or newer
database) and is not waited for. SQLite has no outage of this kind: the store keeps its file
open, so a file moved or a folder whose permissions changed is still read through it. A disk
I/O error (a device gone: the open file stays broken) and "database is locked" (another
process held the whole file past the 10 s busy timeout; in WAL mode the reads a worker makes
between runs never wait for writers) are said as what they are, not as a server away.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Literal

from runtime.errors import DatabaseUnreachable

__all__ = ["RETRY_MAX", "RETRY_MIN", "OutageReport", "wait_out_outage"]

RETRY_MIN = 0.5
RETRY_MAX = 10.0
"""Seconds between looks at a database that cannot be reached (growing from the first)."""

OutageReport = Literal["unreachable", "reconnected"]


async def wait_out_outage(
    outage: DatabaseUnreachable,
    *,
    probe: Callable[[], Awaitable[object]],
    stop: asyncio.Event,
    say: Callable[[OutageReport, str], None],
) -> bool:
    """Say once that the database cannot be reached (``outage``), then ``probe`` it again,
    longer apart each time (at most ``RETRY_MAX`` seconds), until it answers: say so and return
    True. Returns False as soon as ``stop`` is set (Ctrl+C, SIGTERM). Any other error of
    ``probe`` (the server back, refusing this client) is raised: it is no outage."""
    say(
        "unreachable",
        f"cannot reach the database ({outage.message}); trying again every {RETRY_MAX:g} s at most",
    )
    since = time.monotonic()
    while True:
        delay = min(RETRY_MAX, max(RETRY_MIN, (time.monotonic() - since) / 2))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):
                await stop.wait()
        if stop.is_set():
            return False
        try:
            await probe()
        except DatabaseUnreachable:
            continue
        say("reconnected", "the database answers again")
        return True
