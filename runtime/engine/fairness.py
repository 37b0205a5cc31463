"""Threads get the GIL while the event loop is saturated.

The store's worker and checkpoint threads (and, in the TUI, Textual's input and output threads)
run Python between their system calls, so each needs the GIL back after every SQLite statement
or terminal read. While a run streams flat out the event loop never sleeps: it gives the GIL up
only for an instant around each ``epoll`` that returns at once, and a waiting thread seldom wins
it then (a waiter asks the holder to drop it only after a whole switch interval without any
switch, and every one of those instants counts as a switch). Measured with a run streaming an
8 MB answer: a thread that slept 1 ms woke up to 1.35 s late, a read of the store's worker held
the connection for 4 s, and the draft (DESIGN §5: within 250 ms) went 4 s without a save.

``share_the_gil`` gives the GIL up for real (``time.sleep(0)``) from the event loop every few
milliseconds while the loop's thread is busy (it used most of the last interval's time on the
CPU), and looks four times a second while it is not. With it, that thread woke at most 20 ms
late.
"""

from __future__ import annotations

import asyncio
import time

IDLE_INTERVAL = 0.25
"""Seconds between looks while the loop's thread is mostly idle (a few wake-ups a second)."""
BUSY_INTERVAL = 0.005
"""Seconds between yields while it is busy."""
BUSY_SHARE = 0.25
"""The share of an interval's time the loop's thread spent on the CPU that counts as busy
(an idle loop uses a few percent; a saturated one all it is given, less on a loaded machine)."""


async def share_the_gil(closing: asyncio.Event) -> None:
    """Until ``closing`` is set: while the event loop's thread is busy, let the other threads
    run every ``BUSY_INTERVAL``."""
    interval = IDLE_INTERVAL
    while not closing.is_set():
        started, cpu = time.monotonic(), time.thread_time()
        await asyncio.sleep(interval)
        busy = time.thread_time() - cpu > BUSY_SHARE * (time.monotonic() - started)
        if busy:
            time.sleep(0)  # noqa: ASYNC251 - the point: the GIL given up, a waiting thread runs
        interval = BUSY_INTERVAL if busy else IDLE_INTERVAL
