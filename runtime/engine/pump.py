"""The event pump: durable events this process commits are published on the bus as they commit
(the store reports them, ``Store.on_commit``); those other processes commit are read by cursor
on a poll. Transient events are published directly. Waiters use ``await_progress`` to wake when
anything was published (or ``notify`` says something changed here)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable

from runtime.bus import EventBus, Overflowed
from runtime.engine.execution import POLL_INTERVAL, Executions
from runtime.events import (
    DURABLE_KINDS,
    LIVE_DETAIL_KINDS,
    DurableEvent,
    Event,
    RunStateChanged,
)
from runtime.models import RunState
from runtime.store.base import Store

log = logging.getLogger("runtime.engine")

MIRRORED_RUNS = 20
"""At most this many running runs of other processes have their drafts handed out per poll."""


def stop_once(task: asyncio.Task[None] | None) -> bool:
    """Cancel an execution's task unless it is done or already being cancelled (one cancel
    path per execution). Whether this call cancelled it."""
    if task is None or task.done() or task.cancelling():
        return False
    task.cancel()
    return True


class Pump:
    def __init__(self, store: Store, bus: EventBus, executions: Executions) -> None:
        self._store = store
        self._bus = bus
        self._executions = executions
        self._pumped = 0
        """Every durable event up to this seq has been published."""
        self._lock = asyncio.Lock()
        self._changed = asyncio.Event()
        self._progress = asyncio.Event()
        self._run_changed = asyncio.Event()
        """Set (and replaced) when a run's state may have changed: a ``run_state_changed``
        committed here, events read from other processes, or ``notify``."""
        self.on_answered: Callable[[str], None] | None = None
        """Told the id of each run that an answer requeued: if it is this process's run
        (answered with ``--detach`` elsewhere, or while its calls ran here beside the
        request), it goes on here."""
        self._mirrored: dict[tuple[str, bool], int] = {}
        """(message id, thinking or not) → how much of that part of its draft, streamed by another
        process, was handed out."""
        store.on_commit(self._committed)
        # A store that hears other processes commit (PostgreSQL LISTEN/NOTIFY) wakes the loop at
        # once; polling every POLL_INTERVAL stays the fallback.
        on_remote_commit = getattr(store, "on_remote_commit", None)
        if on_remote_commit is not None:
            on_remote_commit(lambda _seq: self._changed.set())

    def start_after(self, seq: int) -> None:
        """Publish durable events after ``seq`` only (those before happened before we opened)."""
        self._pumped = seq

    def notify(self) -> None:
        """Something changed in this process that waiters should look at (an execution ended,
        a run was claimed). Committed events need no call: they are published as they commit."""
        self._wake()

    def publish(self, event: Event) -> None:
        try:
            self._bus.publish(event)
        except Exception:  # a subscriber must never break a run
            log.exception("publishing %s failed", event.kind)

    def _committed(self, before: int, events: list[DurableEvent]) -> None:
        """The store committed ``events`` here: publish them now, unless another process
        committed events since the last we published (then the loop reads all by cursor, in
        order)."""
        if before > self._pumped:
            self._changed.set()
            return
        for event in events:
            if event.seq > self._pumped:
                self._publish_durable(event)
        self._wake(runs=any(isinstance(event, RunStateChanged) for event in events))

    def _publish_durable(self, event: DurableEvent) -> None:
        self._pumped = event.seq
        self.publish(event)
        if (
            isinstance(event, RunStateChanged)
            and event.from_state is RunState.INPUT_REQUIRED
            and event.to_state is RunState.QUEUED
            and self.on_answered is not None
        ):
            self.on_answered(event.run_id)
        if (
            isinstance(event, RunStateChanged)
            and event.to_state is RunState.CANCELLED
            and event.run_id in self._executions
        ):
            # Cancelled by another process: stop its model stream and tools now. Once:
            # `Runtime.cancel` here may have cancelled it already, and a second cancel would
            # cut the tools' clean stop short (a shell's process group killed without waiting).
            stop_once(self._executions[event.run_id].task)

    def _wake(self, *, runs: bool = True) -> None:
        progress, self._progress = self._progress, asyncio.Event()
        progress.set()
        if runs:
            changed, self._run_changed = self._run_changed, asyncio.Event()
            changed.set()

    async def pump(self) -> None:
        """Read and publish the durable events committed after the last one published (by
        other processes, or here while a gap was being filled)."""
        async with self._lock:
            while True:
                events = await self._store.read_events(after=self._pumped, limit=1000)
                for event in events:
                    if event.seq > self._pumped:
                        self._publish_durable(event)
                if len(events) < 1000:
                    break
        self._wake()

    async def await_progress(self) -> None:
        """Until events were published (here or from another process), at most two poll
        intervals. (``asyncio.timeout``, not ``wait_for``: on 3.11 ``wait_for`` can swallow a
        cancel.)"""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(POLL_INTERVAL * 2):
                await self._progress.wait()

    async def await_run_change(self) -> None:
        """Like ``await_progress``, but only for events that may change a run's state: a
        waiter for a run's boundary does not look at the run again after every message."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(POLL_INTERVAL * 2):
                await self._run_changed.wait()

    async def loop(self, closing: asyncio.Event) -> None:
        failing = False  # a database that cannot be reached is logged once, not twice a second
        while not closing.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(POLL_INTERVAL):
                    await self._changed.wait()
            self._changed.clear()
            try:
                await self.pump()
                await self.mirror_drafts()
            except asyncio.CancelledError:
                raise
            except Exception:
                if not failing:
                    log.exception("reading events failed (not logged again until it works)")
                failing = True
                await asyncio.sleep(POLL_INTERVAL)
            else:
                if failing:
                    log.warning("reading events works again")
                failing = False

    async def mirror_drafts(self) -> None:
        """Text that another process streams reaches this one's observers too: its drafts (in
        the store within DRAFT_INTERVAL of being shown, DESIGN §5) handed out as deltas of the
        runs a subscriber wants the live detail of, so a second TUI shows an answer as it grows
        (in steps of a quarter second), not only once it is committed. Reading only."""
        mirrored: dict[tuple[str, bool], int] = {}
        if self._bus.has_subscribers:
            page = await self._store.list_runs(
                state=RunState.RUNNING, limit=MIRRORED_RUNS, archived=None
            )
            for run in page.items:
                if run.id in self._executions or not self._bus.wants_live(run.job_id, run.id):
                    continue  # streamed here (its deltas are published as they come), or unwatched
                for draft in await self._store.get_drafts(run.id):
                    if draft.before_position is not None:
                        continue  # an earlier attempt's, kept: not streaming
                    for thinking, text in ((True, draft.thinking), (False, draft.text)):
                        key = (draft.message_id, thinking)
                        handed = self._mirrored.get(key, 0)
                        if len(text) > handed:
                            self._bus.publish_delta(
                                run.job_id,
                                run.id,
                                run.execution_token or "",
                                draft.message_id,
                                handed,
                                text[handed:],
                                thinking=thinking,
                            )
                        mirrored[key] = max(handed, len(text))
        # Only what is still streaming and watched: a run watched again starts from its start.
        self._mirrored = mirrored

    async def observe(
        self,
        run_id: str | None = None,
        *,
        job_id: str | None = None,
        after: int | None = None,
        live: Callable[[str], bool] | None = None,
    ) -> AsyncIterator[Event]:
        """Durable events from the cursor on (read back from the store) interleaved with live
        transient ones from the bus; a subscriber that overflows reads back by cursor.

        ``live(run_id)``, when given, says whose live detail (deltas, tool progress) to hand
        out, asked as each piece arrives: the others are never buffered for this subscriber and
        never wake it."""

        def accept(event: Event) -> bool:
            if run_id is not None and event.run_id != run_id:
                return False
            if live is not None and event.kind in LIVE_DETAIL_KINDS and not live(event.run_id):
                return False
            return job_id is None or event.job_id == job_id

        def accept_run(event_job_id: str, event_run_id: str) -> bool:
            if run_id is not None and event_run_id != run_id:
                return False
            if live is not None and not live(event_run_id):
                return False  # only deltas are asked about this way
            return job_id is None or event_job_id == job_id

        subscription = self._bus.subscribe(accept, accept_run)
        try:
            cursor = await self._store.last_seq() if after is None else after
            replay = after is not None
            while True:
                while replay:
                    page = await self._store.read_events(
                        after=cursor, limit=500, run_id=run_id, job_id=job_id
                    )
                    for durable in page:
                        cursor = durable.seq
                        yield durable
                    replay = len(page) == 500
                try:
                    event = await subscription.get()
                except EOFError:
                    return
                except Overflowed:
                    replay = True  # too far behind: read the durable events back by cursor
                    continue
                if event.kind in DURABLE_KINDS:
                    seq: int = getattr(event, "seq", 0)
                    if seq <= cursor:
                        continue
                    cursor = seq
                yield event
        finally:
            subscription.close()
