"""The one module that turns runtime events into Textual messages.

A worker iterates ``runtime.observe()`` (every run, from now on) and posts past-tense messages to
the app. Deltas are coalesced per message for a short interval so a fast stream never floods the
message queue (keypresses share it): at most one ``DeltaReceived`` per streaming message per
flush. Durable events flush pending deltas first, so order is kept.

Keys first: only the run on screen gets its live detail (deltas and tool progress); for every
other run only its durable events are posted (state changes, commits, tool states, checkpoints),
so ten runs streaming in the background put a handful of messages in the queue keypresses
share, not hundreds a second. ``wants_live(run_id)`` (the screen's) says which run that is; the
runtime asks it as each piece is published (``observe(live=...)``), so the other runs' pieces
never even wake the bridge (with ten runs streaming flat out it woke 3,000 times in one
session of the keys benchmark, mostly to drop them).

Each flush of a streaming message costs the app a layout and a repaint of the conversation
(about 10-15 ms here, whatever the size of the piece), so a fast stream (more than
``FAST_CHARS`` in one flush: faster than anyone reads) is flushed ``FAST_INTERVAL`` apart
instead: fewer, bigger pieces, and the runtime keeps most of the CPU (DESIGN §13). Once a
message is past ``HUGE_CHARS`` it is flushed ``HUGE_INTERVAL`` apart: four updates a second are
plenty for the eye, and each one still costs a layout and a repaint of the whole screen.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.message import Message as TextualMessage

if TYPE_CHECKING:
    from textual.message_pump import MessagePump

    from runtime import events as rt
    from runtime.api import RuntimeApi

log = logging.getLogger(__name__)

FLUSH_INTERVAL = 1 / 30
FAST_INTERVAL = 1 / 12
FAST_CHARS = 2048
HUGE_INTERVAL = 0.25
HUGE_CHARS = 64 * 1024
MERGE_WAIT = 0.01
"""Seconds the bridge leaves the bus to merge deltas before it looks again, while a flush of
deltas is pending (at a few MB/s of text, well under the bus's 64 KiB per subscriber)."""


class RunStateChanged(TextualMessage):
    def __init__(self, event: rt.RunStateChanged) -> None:
        super().__init__()
        self.event = event


class MessageCommitted(TextualMessage):
    def __init__(self, event: rt.MessageCommitted) -> None:
        super().__init__()
        self.event = event


class DeltaReceived(TextualMessage):
    """Merged consecutive pieces of one streaming message (text or thinking)."""

    def __init__(
        self, *, run_id: str, message_id: str, offset: int, text: str, thinking: bool
    ) -> None:
        super().__init__()
        self.run_id = run_id
        self.message_id = message_id
        self.offset = offset
        self.text = text
        self.thinking = thinking


class ToolStateChanged(TextualMessage):
    def __init__(self, event: rt.ToolStateChanged) -> None:
        super().__init__()
        self.event = event


class ToolProgressed(TextualMessage):
    def __init__(self, event: rt.ToolProgress) -> None:
        super().__init__()
        self.event = event


class RunNotedReceived(TextualMessage):
    """Instructions used, a phase move or a compaction was recorded on a run."""

    def __init__(self, event: rt.RunNoted) -> None:
        super().__init__()
        self.event = event


class CheckpointCreated(TextualMessage):
    def __init__(self, event: rt.CheckpointCreated) -> None:
        super().__init__()
        self.event = event


class JobArchived(TextualMessage):
    """A job was archived or brought back, here or in another process."""

    def __init__(self, event: rt.JobArchived) -> None:
        super().__init__()
        self.event = event


class NoticeReceived(TextualMessage):
    def __init__(self, event: rt.Notice) -> None:
        super().__init__()
        self.event = event


class HistoryRepairReceived(TextualMessage):
    """A run's history was repaired before its model call (calls closed, results left out)."""

    def __init__(self, event: rt.HistoryRepaired) -> None:
        super().__init__()
        self.event = event


class ObservationFailed(TextualMessage):
    """The event stream ended with an error; the app reports it and resubscribes."""

    def __init__(self, error: BaseException) -> None:
        super().__init__()
        self.error = error


@dataclass
class _PendingDelta:
    run_id: str
    message_id: str
    offset: int
    text: list[str]
    thinking: bool


class Bridge:
    """Feeds ``target`` with Textual messages made from ``runtime.observe()``."""

    def __init__(
        self,
        runtime: RuntimeApi,
        target: MessagePump,
        *,
        wants_live: Callable[[str], bool] | None = None,
    ) -> None:
        self._runtime = runtime
        self._target = target
        self._wants_live = wants_live
        self._pending: list[_PendingDelta | TextualMessage] = []
        self._flush_handle: asyncio.TimerHandle | None = None
        self._interval = FLUSH_INTERVAL

    async def pump(self) -> None:
        """Run until cancelled; post one message per durable event, merged deltas."""
        try:
            async for event in self._runtime.observe(live=self._wants_live):
                self._accept(event)
                pending = self._flush_handle
                if pending is not None:
                    # The deltas wait for their flush anyway: meanwhile the bus merges what
                    # follows into one piece instead of waking this task for each (2,450 times
                    # for a 1 MB answer, once per turn of the streaming loop). Never long: a
                    # subscriber's buffer keeps at most MAX_TEXT of deltas, and a state change
                    # waits no more than this for its turn.
                    loop = asyncio.get_running_loop()
                    await asyncio.sleep(max(0.0, min(pending.when() - loop.time(), MERGE_WAIT)))
        finally:
            self._flush()

    def _accept(self, event: rt.Event) -> None:
        # Imported here, not with the module: the screens import this module's messages for the
        # first frame, and the runtime's events bring pydantic (the runtime is open by now).
        from runtime import events as rt

        if isinstance(event, rt.MessageDelta):
            last = self._pending[-1] if self._pending else None
            if (
                isinstance(last, _PendingDelta)
                and last.message_id == event.message_id
                and last.thinking == event.thinking
            ):
                last.text.append(event.text)
            else:
                self._pending.append(
                    _PendingDelta(
                        run_id=event.run_id,
                        message_id=event.message_id,
                        offset=event.offset,
                        text=[event.text],
                        thinking=event.thinking,
                    )
                )
            self._schedule()
            return
        message = _to_message(event)
        if message is None:
            return
        if isinstance(event, rt.ToolProgress):
            last = self._pending[-1] if self._pending else None
            if isinstance(last, ToolProgressed) and last.event.tool_call_id == event.tool_call_id:
                self._pending[-1] = message  # only the latest progress of a tool matters
            else:
                self._pending.append(message)
            self._schedule()
            return
        self._pending.append(message)
        self._flush()

    def _schedule(self) -> None:
        if self._flush_handle is None:
            loop = asyncio.get_running_loop()
            self._flush_handle = loop.call_later(self._interval, self._flush)

    def _flush(self) -> None:
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        pending, self._pending = self._pending, []
        interval = FLUSH_INTERVAL
        for item in pending:
            if isinstance(item, _PendingDelta):
                size = sum(map(len, item.text))
                if item.offset + size > HUGE_CHARS:
                    interval = max(interval, HUGE_INTERVAL)
                elif size > FAST_CHARS:
                    interval = max(interval, FAST_INTERVAL)
                self._target.post_message(
                    DeltaReceived(
                        run_id=item.run_id,
                        message_id=item.message_id,
                        offset=item.offset,
                        text="".join(item.text),
                        thinking=item.thinking,
                    )
                )
            else:
                self._target.post_message(item)
        if pending:
            self._interval = interval


def _to_message(event: rt.Event) -> TextualMessage | None:
    from runtime import events as rt  # see Bridge._accept

    if isinstance(event, rt.RunStateChanged):
        return RunStateChanged(event)
    if isinstance(event, rt.MessageCommitted):
        return MessageCommitted(event)
    if isinstance(event, rt.ToolStateChanged):
        return ToolStateChanged(event)
    if isinstance(event, rt.ToolProgress):
        return ToolProgressed(event)
    if isinstance(event, rt.CheckpointCreated):
        return CheckpointCreated(event)
    if isinstance(event, rt.RunNoted):
        return RunNotedReceived(event)
    if isinstance(event, rt.Notice):
        return NoticeReceived(event)
    if isinstance(event, rt.JobArchived):
        return JobArchived(event)
    if isinstance(event, rt.HistoryRepaired):
        return HistoryRepairReceived(event)
    return None
