"""Durable consumers of the event log (DESIGN §15, the rowan seed's ``consume()``).

A consumer is a name with a cursor in the store: ``Runtime.consume(name)`` delivers every
durable event after that cursor, in order, and ``ack(event)`` moves the cursor there (one write
transaction, ``Store.ack_consumer``). A process that dies before acknowledging an event gets it
again when the consumer next starts: delivery is at least once, and only events delivered but
not yet acknowledged come twice.

One process holds a consumer at a time. It holds it under a lease it renews every third of the
lease from a task of its own; a second process is refused with ``consumer_already_active``. A
holder on this host whose process is dead (or is another process with the same pid) is
replaced at once; one on another host only when its lease ran out (``engine.leases``' rules for
owners, applied to consumers)::

    async with runtime.consume("chat-bot") as events:
        async for event in events:
            await post_to_chat(event)
            await events.ack(event)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from types import TracebackType

from runtime.errors import AgentTuiError, ConsumerAlreadyActive, CursorOutOfRange, InvalidInput
from runtime.events import DurableEvent
from runtime.owners import new_owner_id, provably_gone
from runtime.store.base import Store

log = logging.getLogger("runtime.consumers")

CONSUMER_LEASE_SECONDS = 10.0
PAGE = 500
MAX_ID_LENGTH = 200


def check_consumer_id(consumer_id: object) -> str:
    """A consumer's name: printable, not blank, at most 200 characters."""
    if not isinstance(consumer_id, str) or not consumer_id.strip():
        raise InvalidInput("a consumer needs a name (e.g. chat-bot)")
    if len(consumer_id) > MAX_ID_LENGTH:
        raise InvalidInput(f"a consumer's name is at most {MAX_ID_LENGTH} characters")
    if not consumer_id.isprintable():
        raise InvalidInput("a consumer's name must be printable text")
    return consumer_id


class Consumer:
    """One durable consumer held by this process: an async iterator of durable events.

    ``cursor`` is the last acknowledged event's ``seq`` (as stored); ``delivered`` the last one
    handed out. Use it as an async context manager: entering takes the consumer (or raises
    ``ConsumerAlreadyActive``), leaving releases it (the cursor stays)."""

    def __init__(
        self,
        store: Store,
        consumer_id: str,
        *,
        after: int | None,
        wait_for_change: Callable[[], Awaitable[None]],
        lease_seconds: float = CONSUMER_LEASE_SECONDS,
        holder: str | None = None,
    ) -> None:
        self.consumer_id = check_consumer_id(consumer_id)
        if after is not None and (not isinstance(after, int) or after < 0):
            raise InvalidInput("after must be a sequence number (0 or more)")
        self._store = store
        self._after = after
        self._wait_for_change = wait_for_change
        self._lease_seconds = lease_seconds
        self.holder = holder or new_owner_id()
        self.cursor = 0
        self.delivered = 0
        self._buffer: deque[DurableEvent] = deque()
        self._renewer: asyncio.Task[None] | None = None
        self._lost: AgentTuiError | None = None
        self._held = False

    # --- holding it --------------------------------------------------------------------------
    async def start(self) -> None:
        """Take the consumer: from then on nobody else can until it is released or the lease
        ends. Replaces a holder that is provably gone (a dead process on this host)."""
        if self._held:
            return
        if self._after is not None and self._after > await self._store.last_seq():
            raise CursorOutOfRange(
                f"event {self._after} is beyond the newest event ({await self._store.last_seq()})"
            )
        try:
            cursor = await self._acquire(after=self._after)
        except ConsumerAlreadyActive as refused:
            gone = refused.holder is not None and provably_gone(refused.holder, lease_live=True)
            if not gone:
                raise
            log.info("consumer %s: its holder %s is gone; taking over", self.consumer_id, refused)
            cursor = await self._acquire(after=self._after, replace=refused.holder)
        self.cursor = self.delivered = cursor
        self._held = True
        self._renewer = asyncio.get_running_loop().create_task(
            self._renew_forever(), name=f"consumer-{self.consumer_id}"
        )

    async def _acquire(self, *, after: int | None, replace: str | None = None) -> int:
        return await self._store.acquire_consumer(
            self.consumer_id,
            holder=self.holder,
            lease_seconds=self._lease_seconds,
            after=after,
            replace=replace,
        )

    async def _renew_forever(self) -> None:
        interval = max(0.05, self._lease_seconds / 3)
        while True:
            await asyncio.sleep(interval)
            try:
                await self._acquire(after=None)
            except ConsumerAlreadyActive as lost:
                self._lost = lost
                return
            except AgentTuiError:  # a busy or unreachable database: try again next time
                log.warning("consumer %s: renewing its lease failed", self.consumer_id)

    async def close(self) -> None:
        """Stop renewing and release the consumer; its cursor stays in the store."""
        renewer, self._renewer = self._renewer, None
        if renewer is not None:
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewer
        if self._held:
            self._held = False
            with contextlib.suppress(AgentTuiError, OSError):
                await self._store.release_consumer(self.consumer_id, holder=self.holder)

    async def __aenter__(self) -> Consumer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    # --- delivering ----------------------------------------------------------------------------
    def __aiter__(self) -> Consumer:
        return self

    async def __anext__(self) -> DurableEvent:
        """The next durable event after the last one delivered, waiting for it to commit.
        Raises ``ConsumerAlreadyActive`` once another process took the consumer over."""
        if not self._held:
            raise InvalidInput(f"consumer {self.consumer_id!r} is not started")
        while True:
            if self._lost is not None:
                raise self._lost
            if self._buffer:
                event = self._buffer.popleft()
                self.delivered = event.seq
                return event
            page = await self._store.read_events(after=self.delivered, limit=PAGE)
            if page:
                self._buffer.extend(page)
                continue
            await self._wait_for_change()

    async def ack(self, event: DurableEvent | int) -> None:
        """Every event up to this one is handled: persist the cursor (and renew the lease).
        Raises ``ConsumerAlreadyActive`` if another process took the consumer over."""
        seq = event if isinstance(event, int) else event.seq
        if not isinstance(seq, int) or seq < 0:
            raise InvalidInput("ack takes a delivered event or its sequence number")
        if seq > self.delivered:
            raise InvalidInput(
                f"event {seq} was not delivered yet (last delivered: {self.delivered})"
            )
        if self._lost is not None:
            raise self._lost
        self.cursor = await self._store.ack_consumer(self.consumer_id, holder=self.holder, seq=seq)


__all__ = ["CONSUMER_LEASE_SECONDS", "Consumer", "check_consumer_id"]
