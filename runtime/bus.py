"""In-process fan-out of events to observers (DESIGN §6).

Each subscriber has a bounded buffer: consecutive deltas of one message are merged; when the
buffer holds more than ~128 events or 64 KiB of text, the oldest transient events are trimmed
first; deltas and progress of a message or tool call are dropped once its durable event is
queued. Publishing never blocks and never fails, so a slow or broken subscriber cannot slow or
fail a run.

Deltas are the hot path (§13 asks for ≥ 100,000/s): a model streams a few characters per
delta, often dozens of deltas between two turns of the event loop. The bus merges consecutive
deltas of one message into one open piece as they are published (a list append each) and
hands the piece to its subscribers only when one of them looks (``get``), when anything else
is published, or when the piece reaches ``MAX_TEXT``; a subscriber waiting is woken once per
piece. So subscribers see one merged delta per burst, in order with every other event, and the
``MessageDelta`` model is built once per piece, when a subscriber takes it.

The engine does not even publish its deltas one by one: a streaming message is an open
*stream* (``open_stream``) whose text the bus reads from the message being folded when it
hands pieces out, so a delta costs the engine nothing here unless a subscriber is waiting
for one (``waiting``: then ``wake`` it). Appending every delta to a piece was 45 ms of a 1 MB
answer's 400 (156,000 deltas), paid only when somebody watched: the TUI always does.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Protocol

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
MAX_BACKLOG = 4096
"""Durable events are never trimmed; a subscriber this far behind is told it overflowed and
reads them back from the store by its cursor instead (``observe`` does)."""


class Overflowed(Exception):
    """The subscriber fell too far behind; durable events since its cursor are in the store."""


EventFilter = Callable[[Event], bool]
RunFilter = Callable[[str, str], bool]
"""``accept(job_id, run_id)`` for deltas, which are filtered before a model exists."""


class _Delta:
    """A merged run of deltas of one message, not yet turned into a ``MessageDelta``."""

    __slots__ = (
        "execution_id",
        "job_id",
        "length",
        "message_id",
        "offset",
        "parts",
        "run_id",
        "thinking",
    )

    def __init__(
        self,
        job_id: str,
        run_id: str,
        execution_id: str,
        message_id: str,
        offset: int,
        text: str,
        thinking: bool,
    ) -> None:
        self.job_id = job_id
        self.run_id = run_id
        self.execution_id = execution_id
        self.message_id = message_id
        self.offset = offset
        self.parts = [text]
        self.length = len(text)
        self.thinking = thinking

    def event(self) -> MessageDelta:
        return MessageDelta.model_construct(
            kind="message_delta",
            job_id=self.job_id,
            run_id=self.run_id,
            execution_id=self.execution_id,
            message_id=self.message_id,
            offset=self.offset,
            text="".join(self.parts),
            thinking=self.thinking,
        )


_Entry = Event | _Delta


class StreamedText(Protocol):
    """What an open stream reads its text from: the message being folded."""

    @property
    def text_length(self) -> int: ...

    @property
    def thinking_length(self) -> int: ...

    def text_since(self, start: int) -> str: ...

    def thinking_since(self, start: int) -> str: ...


class Stream:
    """A streaming message whose text the bus hands out from its source (``open_stream``)."""

    __slots__ = ("execution_id", "job_id", "message_id", "run_id", "source", "text", "thinking")

    def __init__(
        self,
        job_id: str,
        run_id: str,
        execution_id: str,
        message_id: str,
        source: StreamedText,
    ) -> None:
        self.job_id = job_id
        self.run_id = run_id
        self.execution_id = execution_id
        self.message_id = message_id
        self.source = source
        self.text = source.text_length
        """How much of the text has been handed out (what came before it opened is not)."""
        self.thinking = source.thinking_length


class Subscription:
    def __init__(self, bus: EventBus, accept: EventFilter, accept_run: RunFilter) -> None:
        self._bus = bus
        self._accept = accept
        self._accept_run = accept_run
        self._buffer: deque[_Entry] = deque()
        self._text = 0
        self._ready = asyncio.Event()
        self.closed = False
        self.overflowed = False
        self.dropped = 0

    def push_delta(
        self,
        job_id: str,
        run_id: str,
        execution_id: str,
        message_id: str,
        offset: int,
        text: str,
        thinking: bool,
    ) -> None:
        if self.closed or not self._accept_run(job_id, run_id):
            return
        buffer = self._buffer
        last = buffer[-1] if buffer else None
        if (
            isinstance(last, _Delta)
            and last.message_id == message_id
            and last.thinking == thinking
            and last.offset + last.length == offset
        ):
            last.parts.append(text)
            last.length += len(text)
        else:
            buffer.append(_Delta(job_id, run_id, execution_id, message_id, offset, text, thinking))
        self._text += len(text)
        if self._text > MAX_TEXT or len(buffer) > MAX_EVENTS:
            self._trim()
        self._ready.set()

    def push(self, event: Event) -> None:
        if self.closed or not self._accept(event):
            return
        if isinstance(event, MessageDelta):
            self.push_delta(
                event.job_id,
                event.run_id,
                event.execution_id,
                event.message_id,
                event.offset,
                event.text,
                event.thinking,
            )
            return
        if isinstance(event, MessageCommitted):
            message_id = event.message.id
            self._discard(lambda e: isinstance(e, _Delta) and e.message_id == message_id)
        elif isinstance(event, ToolStateChanged) and event.to_state.is_terminal:
            call_id = event.tool_call_id
            self._discard(lambda e: isinstance(e, ToolProgress) and e.tool_call_id == call_id)
        self._buffer.append(event)
        if len(self._buffer) > MAX_BACKLOG:
            self._buffer.clear()
            self._text = 0
            self.overflowed = True
        elif len(self._buffer) > MAX_EVENTS:
            self._trim()
        self._ready.set()

    def _discard(self, predicate: Callable[[_Entry], bool]) -> None:
        if not any(predicate(e) for e in self._buffer):
            return
        kept = deque(e for e in self._buffer if not predicate(e))
        self.dropped += len(self._buffer) - len(kept)
        self._buffer = kept
        self._text = sum(e.length for e in kept if isinstance(e, _Delta))

    def _trim(self) -> None:
        """Drop the oldest deltas, then other transient events, in one pass each; durable
        events are never dropped here."""
        for kinds in ((_Delta,), (ToolProgress, Notice)):
            excess = len(self._buffer) - MAX_EVENTS
            if excess <= 0 and self._text <= MAX_TEXT:
                return
            kept: deque[_Entry] = deque()
            for entry in self._buffer:
                if isinstance(entry, kinds) and (excess > 0 or self._text > MAX_TEXT):
                    excess -= 1
                    self.dropped += 1
                    if isinstance(entry, _Delta):
                        self._text -= entry.length
                    continue
                kept.append(entry)
            self._buffer = kept

    def _take(self) -> Event:
        entry = self._buffer.popleft()
        if isinstance(entry, _Delta):
            self._text -= entry.length
            return entry.event()
        return entry

    async def get(self) -> Event:
        self._bus.hand_out()
        if self.overflowed:
            # Before anything still buffered: those events are newer than the lost ones.
            self.overflowed = False
            raise Overflowed
        while not self._buffer:
            if self.overflowed:
                self.overflowed = False
                raise Overflowed
            if self.closed:
                raise EOFError
            self._ready.clear()  # nothing is open on the bus now: a new piece sets it again
            self._bus.waiting = True  # an open stream's next delta wakes it
            await self._ready.wait()
            self._bus.hand_out()
        return self._take()

    def get_nowait(self) -> Event | None:
        self._bus.hand_out()
        return self._take() if self._buffer else None

    def close(self) -> None:
        self.closed = True
        self._bus.unsubscribe(self)
        self._ready.set()


def _accept_all_runs(job_id: str, run_id: str) -> bool:
    return True


class EventBus:
    def __init__(self) -> None:
        self._subscriptions: set[Subscription] = set()
        self._open: _Delta | None = None
        """Deltas published since the subscribers last looked, merged (see the module's text)."""
        self._streams: list[Stream] = []
        self.waiting = False
        """A subscriber waits for the next event: an open stream's next delta should ``wake``
        it (read by the engine at every delta, so a plain attribute)."""

    def subscribe(
        self, accept: EventFilter, accept_run: RunFilter = _accept_all_runs
    ) -> Subscription:
        self.hand_out()  # what was published before it subscribed is not for it
        subscription = Subscription(self, accept, accept_run)
        self._subscriptions.add(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        self._subscriptions.discard(subscription)

    @property
    def has_subscribers(self) -> bool:
        return bool(self._subscriptions)

    def wants_live(self, job_id: str, run_id: str) -> bool:
        """Whether any subscriber takes this run's live detail (its deltas)."""
        return any(
            not subscription.closed and subscription._accept_run(job_id, run_id)
            for subscription in self._subscriptions
        )

    def publish(self, event: Event) -> None:
        self.hand_out()  # the deltas before it come first
        for subscription in tuple(self._subscriptions):
            subscription.push(event)

    def publish_delta(
        self,
        job_id: str,
        run_id: str,
        execution_id: str,
        message_id: str,
        offset: int,
        text: str,
        thinking: bool = False,
    ) -> None:
        piece = self._open
        if (
            piece is not None
            and piece.message_id == message_id
            and piece.offset + piece.length == offset
            and piece.thinking == thinking
        ):
            piece.parts.append(text)
            piece.length += len(text)
            if piece.length > MAX_TEXT:
                self.hand_out()  # a subscriber that never looks keeps a bounded buffer
            return
        if not self._subscriptions:
            return
        self.hand_out()
        self._open = _Delta(job_id, run_id, execution_id, message_id, offset, text, thinking)
        for subscription in self._subscriptions:
            subscription._ready.set()

    def open_stream(
        self,
        job_id: str,
        run_id: str,
        execution_id: str,
        message_id: str,
        source: StreamedText,
    ) -> Stream:
        """Text (and thinking) added to ``source`` from now on is handed out as deltas of
        ``message_id``; call ``wake`` after adding some while ``waiting``, and
        ``close_stream`` when the message ends."""
        stream = Stream(job_id, run_id, execution_id, message_id, source)
        self._streams.append(stream)
        return stream

    def close_stream(self, stream: Stream) -> None:
        """Hand out what the stream still holds; nothing more is read from it (a second
        close hands out nothing)."""
        if stream not in self._streams:
            return
        self._hand_out_stream(stream)
        self._streams.remove(stream)

    def wake(self) -> None:
        """An open stream has new text: the subscribers waiting come to take it."""
        self.waiting = False
        for subscription in self._subscriptions:
            subscription._ready.set()

    def hand_out(self) -> None:
        """Give the open piece of merged deltas, and the open streams' new text, to the
        subscribers."""
        for stream in self._streams:
            self._hand_out_stream(stream)
        piece = self._open
        if piece is None:
            return
        self._open = None
        text = "".join(piece.parts)
        for subscription in tuple(self._subscriptions):
            subscription.push_delta(
                piece.job_id,
                piece.run_id,
                piece.execution_id,
                piece.message_id,
                piece.offset,
                text,
                piece.thinking,
            )

    def _hand_out_stream(self, stream: Stream) -> None:
        source = stream.source
        thinking_end, text_end = source.thinking_length, source.text_length
        if thinking_end == stream.thinking and text_end == stream.text:
            return
        # Thinking first: a model thinks before it writes. Whoever looks after this sees the
        # text from here on; with nobody subscribed there is nobody to hand it to.
        pieces = []
        if thinking_end > stream.thinking:
            pieces.append((stream.thinking, source.thinking_since(stream.thinking), True))
        if text_end > stream.text:
            pieces.append((stream.text, source.text_since(stream.text), False))
        stream.thinking, stream.text = thinking_end, text_end
        subscriptions = tuple(self._subscriptions)
        if not subscriptions:
            return
        for offset, text, thinking in pieces:
            if len(text) > MAX_TEXT:
                # Nobody looked for that long: the newest MAX_TEXT of it, as a subscriber's
                # bounded buffer would keep (the committed message heals the gap).
                offset, text = offset + len(text) - MAX_TEXT, text[-MAX_TEXT:]
            for subscription in subscriptions:
                subscription.push_delta(
                    stream.job_id,
                    stream.run_id,
                    stream.execution_id,
                    stream.message_id,
                    offset,
                    text,
                    thinking,
                )

    def close(self) -> None:
        self.hand_out()
        for subscription in tuple(self._subscriptions):
            subscription.close()
