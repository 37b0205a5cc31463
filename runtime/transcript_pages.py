"""A job's transcript around one run, a page at a time (DESIGN §12: a bounded window).

A conversation pane shows a run and, before it, what ``runtime.transcript.run_context`` puts
there: a fork's inherited history, then the job's earlier root runs under their headers, then
the run's own header, its messages and its partial answer. For a run of thousands of messages
(or a job of many runs) the pane loads the tail first and the rest as the person scrolls, so
this module gives the same items in pages, each with a key that orders the whole sequence:

- ``ItemKey(segment, position)``: segment 0 is a fork's inherited history (empty for a job that
  is not a fork), segments 1, 2, … the job's root runs up to the shown run, in creation order;
  within a run, its header is at ``HEADER``, its messages at their positions, its partial answer
  at ``PARTIAL``, and the partial answers of attempts that stopped before it went on (a crash,
  a close) each just before the message it came before: ``ItemKey(segment, position, -n)``.
- ``before(key, limit)`` / ``after(key, limit)``: the ``limit`` items just before or after
  ``key``, in reading order; one keyset query on the messages per run crossed. The context's
  messages (not the shown run's) come with their tool call records (``TranscriptMessage
  .tool_calls``), read for the page's messages only.

A sub-run is shown alone (it sits under its delegation block): one segment, no header.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported when a pager is opened: the TUI's first frame needs only the keys
    from runtime.models import Message, Run
    from runtime.store.base import Store
    from runtime.transcript import RunHeader, TranscriptItem, TranscriptMessage

__all__ = ["HEADER", "PARTIAL", "ItemKey", "Keyed", "TranscriptPager"]

HEADER = -1
"""The key position of a run's header (and of a fork's origin line)."""
PARTIAL = 2**62
"""The key position of a run's partial answer: after all of its messages."""


@dataclass(frozen=True, order=True)
class ItemKey:
    segment: int
    position: int
    before: int = 0
    """Negative for a kept partial answer: it comes before the message at ``position`` (the
    earliest of several at one position has the lowest)."""


Keyed = tuple[ItemKey, "TranscriptItem"]


@dataclass
class _Segment:
    run: Run | None
    """None for the inherited history."""
    index: int = 0
    """The root run's number in the job (1, 2, …), for its header; 0: no header."""
    current: bool = False
    loaded: list[TranscriptItem] | None = None
    """The inherited history, loaded once when first reached."""
    partial: list[Keyed] | None = None
    """The run's partial answers, keyed, asked for once: those of attempts that stopped before
    it went on, and its own (zero or one, at ``PARTIAL``)."""


class TranscriptPager:
    """Pages of the items a pane shows for ``run`` (see the module docstring)."""

    def __init__(self, store: Store, run: Run, segments: list[_Segment]) -> None:
        self.store = store
        self.run = run
        self._segments = segments

    @classmethod
    async def open(cls, store: Store, run: Run) -> TranscriptPager:
        if run.parent_run_id is not None:
            return cls(store, run, [_Segment(run=run, current=True)])
        roots = [r for r in await store.job_runs(run.job_id) if r.parent_run_id is None]
        segments = [_Segment(run=None)]
        for index, root in enumerate(roots, start=1):
            segments.append(_Segment(run=root, index=index, current=root.id == run.id))
            if root.id == run.id:
                break
        else:  # not a root run of its job after all: shown alone
            return cls(store, run, [_Segment(run=run, current=True)])
        return cls(store, run, segments)

    @property
    def run_segment(self) -> int:
        """The segment of the shown run (its live messages belong there)."""
        return len(self._segments) - 1

    def key_of(self, position: int) -> ItemKey:
        """The key of the shown run's message at ``position``."""
        return ItemKey(self.run_segment, position)

    async def tail(self, limit: int) -> list[Keyed]:
        return await self.before(None, limit)

    async def before(self, key: ItemKey | None, limit: int) -> list[Keyed]:
        """Up to ``limit`` items just before ``key`` (None: the end), in reading order."""
        found: list[Keyed] = []  # newest first
        bound = ItemKey(self.run_segment, PARTIAL + 1) if key is None else key
        while bound.segment >= 0 and len(found) < limit:
            found.extend(await self._segment_before(bound, limit - len(found)))
            bound = ItemKey(bound.segment - 1, PARTIAL + 1)
        found.reverse()
        return await self._with_tool_calls(found)

    async def after(self, key: ItemKey, limit: int) -> list[Keyed]:
        """Up to ``limit`` items just after ``key``, in reading order."""
        found: list[Keyed] = []
        bound = key
        while bound.segment < len(self._segments) and len(found) < limit:
            found.extend(await self._segment_after(bound, limit - len(found)))
            bound = ItemKey(bound.segment + 1, HEADER - 1)
        return await self._with_tool_calls(found)

    async def _with_tool_calls(self, page: list[Keyed]) -> list[Keyed]:
        """``page`` with the tool call records of its context messages (earlier runs, a fork's
        inherited history): their state and result, shown as the run's own calls are. One
        query per message with tool calls, on the page's messages only: a long earlier run's
        results are read as its pages are, never all at once. (The shown run's calls come
        with the run, and live.)"""
        from dataclasses import replace

        from runtime.kinds import Role
        from runtime.transcript import TranscriptMessage

        found: list[Keyed] = []
        for key, item in page:
            if (
                isinstance(item, TranscriptMessage)
                and item.run.id != self.run.id
                and item.message.role is Role.ASSISTANT
                and item.message.tool_uses
                and not item.tool_calls
            ):
                calls = await self.store.list_tool_calls(item.run.id, message_id=item.message.id)
                item = replace(item, tool_calls=tuple(calls))
            found.append((key, item))
        return found

    # --- one segment ---------------------------------------------------------------------------
    async def _segment_before(self, bound: ItemKey, limit: int) -> list[Keyed]:
        """Up to ``limit`` items of ``bound``'s segment before ``bound``, newest first."""
        index = bound.segment
        segment = self._segments[index]
        if segment.run is None:
            items = await self._inherited(segment)
            keyed = [(ItemKey(index, HEADER + n), item) for n, item in enumerate(items)]
            return [pair for pair in reversed(keyed) if pair[0] < bound][:limit]
        run = segment.run
        found = [pair for pair in await self._partials(index) if pair[0] < bound]
        messages: list[Message] = []
        if bound.position > HEADER + 1:
            # Messages whose key is below the bound: before its position, or at it when the
            # bound comes after that message (a key of ``before`` > 0 is never handed out).
            upto = bound.position + (1 if bound.before > 0 else 0)
            messages = await self.store.list_messages(
                run.id, before_position=min(upto, PARTIAL), limit=limit
            )
            for message in messages:
                found.append((ItemKey(index, message.position), self._message(segment, message)))
        found.sort(key=lambda pair: pair[0], reverse=True)
        if len(messages) == limit:
            # Perhaps more messages before them: what is older than the oldest one read waits
            # for the next page (a kept partial answer among them included).
            oldest = ItemKey(index, min(message.position for message in messages))
            return [pair for pair in found if pair[0] >= oldest][:limit]
        header = self._header(segment)
        if header is not None and ItemKey(index, HEADER) < bound:
            found.append((ItemKey(index, HEADER), header))
        return found[:limit]

    async def _segment_after(self, bound: ItemKey, limit: int) -> list[Keyed]:
        """Up to ``limit`` items of ``bound``'s segment after ``bound``, oldest first."""
        index = bound.segment
        segment = self._segments[index]
        if segment.run is None:
            items = await self._inherited(segment)
            keyed = [(ItemKey(index, HEADER + n), item) for n, item in enumerate(items)]
            return [pair for pair in keyed if pair[0] > bound][:limit]
        run = segment.run
        found: list[Keyed] = []
        header = self._header(segment)
        if header is not None and ItemKey(index, HEADER) > bound:
            found.append((ItemKey(index, HEADER), header))
        messages: list[Message] = []
        if bound.position < PARTIAL:
            # Messages whose key is above the bound: after its position, or at it when the
            # bound is a kept partial answer before that message.
            after = bound.position - (1 if bound.before < 0 else 0)
            messages = await self.store.list_messages(
                run.id, after_position=max(after, HEADER), limit=limit
            )
            for message in messages:
                found.append((ItemKey(index, message.position), self._message(segment, message)))
        found.extend(pair for pair in await self._partials(index) if pair[0] > bound)
        found.sort(key=lambda pair: pair[0])
        if len(messages) == limit:
            newest = ItemKey(index, max(message.position for message in messages))
            return [pair for pair in found if pair[0] <= newest][:limit]
        return found[:limit]

    def _header(self, segment: _Segment) -> RunHeader | None:
        from runtime.transcript import RunHeader

        if segment.run is None or segment.index == 0:
            return None
        return RunHeader(run=segment.run, index=segment.index, current=segment.current)

    @staticmethod
    def _message(segment: _Segment, message: Message) -> TranscriptMessage:
        from runtime.transcript import TranscriptMessage

        assert segment.run is not None
        return TranscriptMessage(message=message, run=segment.run)

    async def _partials(self, index: int) -> list[Keyed]:
        """The partial answers of segment ``index``'s run, keyed: each kept one just before the
        message it came before (several there in their order), then its own at ``PARTIAL``."""
        from runtime.transcript import kept_partials, partial_answer

        segment = self._segments[index]
        if segment.partial is None:
            assert segment.run is not None
            # The shown run's row may have moved on since the pager opened: ask about it now.
            run = await self.store.get_run(segment.run.id) if segment.current else segment.run
            kept = await kept_partials(self.store, run)
            keyed: list[Keyed] = []
            for n, partial in enumerate(kept):
                position = partial.before_position or 0
                later = sum(1 for other in kept[n + 1 :] if other.before_position == position)
                keyed.append((ItemKey(index, position, -1 - later), partial))
            found = await partial_answer(self.store, run)
            if found is not None:
                keyed.append((ItemKey(index, PARTIAL), found))
            segment.partial = keyed
        return segment.partial

    async def _inherited(self, segment: _Segment) -> list[TranscriptItem]:
        from runtime.transcript import inherited_history

        if segment.loaded is None:
            first = next(s.run for s in self._segments if s.run is not None)
            assert first is not None
            origin, messages = await inherited_history(self.store, first)
            segment.loaded = [] if origin is None else [origin, *messages]
        return segment.loaded
