"""In-process fan-out of events to observers (DESIGN §6).

Each subscriber has a bounded buffer: consecutive deltas of one message are merged; when the
buffer holds more than ~128 events or 64 KiB of text, the oldest transient events are trimmed
first; deltas and progress of a message or tool call are dropped once its durable event is
queued. Publishing never blocks and never fails, so a slow or broken subscriber cannot slow or
fail a run.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from runtime.events import (
    Event,
    MessageCommitted,
    MessageDelta,
    Notice,
    ToolProgress,
    ToolStateChanged,
)

MAX_EVENTS = 128
MAX_TEXT = 64 * 1024

EventFilter = Callable[[Event], bool]


class Subscription:
    def __init__(self, bus: EventBus, accept: EventFilter) -> None:
        self._bus = bus
        self._accept = accept
        self._buffer: deque[Event] = deque()
        self._text = 0
        self._ready = asyncio.Event()
        self.closed = False
        self.dropped = 0

    def push(self, event: Event) -> None:
        if self.closed or not self._accept(event):
            return
        buffer = self._buffer
        if isinstance(event, MessageDelta):
            last = buffer[-1] if buffer else None
            if (
                isinstance(last, MessageDelta)
                and last.message_id == event.message_id
                and last.thinking == event.thinking
                and last.offset + len(last.text) == event.offset
            ):
                buffer[-1] = last.model_copy(update={"text": last.text + event.text})
            else:
                buffer.append(event)
            self._text += len(event.text)
        else:
            if isinstance(event, MessageCommitted):
                self._discard(
                    lambda e: isinstance(e, MessageDelta) and e.message_id == event.message.id
                )
            elif isinstance(event, ToolStateChanged) and event.to_state.is_terminal:
                self._discard(
                    lambda e: isinstance(e, ToolProgress) and e.tool_call_id == event.tool_call_id
                )
            self._buffer.append(event)
        if len(self._buffer) > MAX_EVENTS or self._text > MAX_TEXT:
            self._trim()
        self._ready.set()

    def _discard(self, predicate: Callable[[Event], bool]) -> None:
        kept = deque(e for e in self._buffer if not predicate(e))
        self.dropped += len(self._buffer) - len(kept)
        self._buffer = kept
        self._text = sum(len(e.text) for e in kept if isinstance(e, MessageDelta))

    def _trim(self) -> None:
        # Oldest deltas first, then other transient events; durable events are never dropped.
        for kinds in ((MessageDelta,), (ToolProgress, Notice)):
            while len(self._buffer) > MAX_EVENTS or self._text > MAX_TEXT:
                victim = next((e for e in self._buffer if isinstance(e, kinds)), None)
                if victim is None:
                    break
                self._buffer.remove(victim)
                self.dropped += 1
                if isinstance(victim, MessageDelta):
                    self._text -= len(victim.text)

    async def get(self) -> Event:
        while not self._buffer:
            if self.closed:
                raise EOFError
            self._ready.clear()
            await self._ready.wait()
        event = self._buffer.popleft()
        if isinstance(event, MessageDelta):
            self._text -= len(event.text)
        return event

    def get_nowait(self) -> Event | None:
        if not self._buffer:
            return None
        event = self._buffer.popleft()
        if isinstance(event, MessageDelta):
            self._text -= len(event.text)
        return event

    def close(self) -> None:
        self.closed = True
        self._bus.unsubscribe(self)
        self._ready.set()


class EventBus:
    def __init__(self) -> None:
        self._subscriptions: set[Subscription] = set()

    def subscribe(self, accept: EventFilter) -> Subscription:
        subscription = Subscription(self, accept)
        self._subscriptions.add(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        self._subscriptions.discard(subscription)

    def publish(self, event: Event) -> None:
        for subscription in tuple(self._subscriptions):
            subscription.push(event)

    def close(self) -> None:
        for subscription in tuple(self._subscriptions):
            subscription.close()
