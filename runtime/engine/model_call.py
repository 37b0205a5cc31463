"""One model call: stream the provider (with retry and backoff on retryable errors), show the
text as deltas, keep a draft, and commit the assistant message with its tool calls reserved."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable

from runtime.bus import EventBus
from runtime.clock import Clock
from runtime.engine.catalog import Catalog, Decision, DelegateTool
from runtime.engine.execution import (
    ASK_USER,
    DRAFT_INTERVAL,
    MAX_MODEL_ATTEMPTS,
    OUTCOME_CHARS,
    Execution,
    RunFailed,
    SleepFn,
    completes_run,
)
from runtime.engine.hooked import checked_first
from runtime.engine.pump import Pump
from runtime.engine.stream_fold import Fold
from runtime.engine.tool_decision import argument_problem
from runtime.errors import AgentTuiError, ModelError
from runtime.events import Notice
from runtime.ids import new_id
from runtime.models import DraftKind, Message, Role, Run, ToolCallState, text_of
from runtime.providers.base import ModelProvider, ModelRequest
from runtime.rewind import FILE_WRITING_TOOLS
from runtime.store.base import CutShortUsage, NewMessage, NewToolCall, Store
from runtime.tools.base import Tool

log = logging.getLogger("runtime.engine")

GIVE_WAY_EVERY = 16
"""While a person's input waits (``ModelCall.input_pending``), a stream gives the event loop up
after this many of its events, not only when its provider waits (a local model streaming flat
out waits seldom: the instant demo model every 64 words)."""


def _no_input() -> bool:
    return False


class ModelCall:
    def __init__(
        self,
        *,
        store: Store,
        catalog: Catalog,
        pump: Pump,
        bus: EventBus,
        clock: Clock,
        sleep: SleepFn,
        owner_id: str = "",
    ) -> None:
        self._owner_id = owner_id
        self._store = store
        self._catalog = catalog
        self._pump = pump
        self._bus = bus
        self._clock = clock
        self._sleep = sleep
        self.input_pending: Callable[[], bool] = _no_input
        """Whether a person's input waits for this event loop (the program's keys: see
        ``Runtime.give_way_to_input``)."""

    async def call(
        self,
        execution: Execution,
        run: Run,
        provider: ModelProvider,
        request: ModelRequest,
        tools: dict[str, Tool],
        *,
        step: int,
    ) -> tuple[Message, str, bool]:
        """Stream until one attempt ends; commit its message. (message, stop reason, whether
        the run completed with it: a message that ends the run is committed with its
        checkpoint and the run's completion in one transaction)."""
        spent = await self._stream_with_retries(execution, run, provider, request)
        committed = False
        try:
            message, stop_reason, done = await self._commit(
                execution, run, provider, request, tools, spent, step=step
            )
            committed = True
        finally:
            # Until the commit returned, a cancel took the message's usage, or it is noted now
            # (the run cancelled by another process refused the commit). Either way the store
            # adds it only if the message was not committed after all: never twice.
            execution.save_shown = None
            cut_short = None if committed else spent.take()
            spent.ended = True
            await self._settle(execution, run.id, spent.draft, cut_short, committed=committed)
        return message, stop_reason, done

    async def _settle(
        self,
        execution: Execution,
        run_id: str,
        draft: DraftKeeper | None,
        cut_short: CutShortUsage | None,
        *,
        committed: bool,
    ) -> None:
        """After the commit, or in its place: the draft keeper stops and, not committed (the
        run cancelled by another process refused it), all that was shown stays as the partial
        answer, saved before its usage is noted (the note tells other processes to read both
        again). Recorded even when the task is cancelled once more meanwhile (the runtime
        closing), then the cancel goes on."""

        async def settle() -> None:
            if draft is not None:
                await draft.stop(keep_shown=not committed)
            await self._note_cut_short(execution, run_id, cut_short)

        if committed and cut_short is None:
            await settle()
            return
        recording = asyncio.ensure_future(settle())
        try:
            await asyncio.shield(recording)
        except asyncio.CancelledError:
            await asyncio.wait({recording}, timeout=2 * SAVE_ON_STOP_SECONDS)
            raise

    async def _commit(
        self,
        execution: Execution,
        run: Run,
        provider: ModelProvider,
        request: ModelRequest,
        tools: dict[str, Tool],
        spent: _Spent,
        *,
        step: int,
    ) -> tuple[Message, str, bool]:
        folded = spent.folded
        content, new_calls = folded.result(tools)
        committed = NewMessage(
            id=spent.message_id,
            role=Role.ASSISTANT,
            content=content,
            model=run.model,
            usage=folded.usage,
            cost_usd=provider.cost_usd(folded.usage),
        )
        if not new_calls and completes_run(folded.stop_reason):
            done = await self._store.commit_final_message(
                run.id,
                token=execution.token,
                message=committed,
                step=step,
                outcome=text_of(content)[:OUTCOME_CHARS],
            )
            assert done.message is not None
            execution.calls = {}
            return done.message, folded.stop_reason, True
        allowed_here = self._catalog.allowed_for_run(run.id)
        decide = self._catalog.decider(request.workspace)
        hooks, _ = self._catalog.hooks_for(request.workspace)
        if folded.stop_reason != "max_tokens" and all(
            self._starts_at_once(c, tools, allowed_here, decide)
            # A call that hooks check first starts once they let it through.
            and not checked_first(hooks, c.name)
            for c in new_calls
        ):
            # Nothing to decide or ask before these calls run: they start in the same
            # transaction as the message (a step then takes two commits instead of three).
            new_calls = [c.model_copy(update={"start": True}) for c in new_calls]
        message, calls = await self._store.commit_message(
            run.id, token=execution.token, message=committed, tool_calls=new_calls, step=step
        )
        execution.started.update(c.id for c in calls if c.state is ToolCallState.RUNNING)
        execution.calls = {c.id: c for c in calls}
        return message, folded.stop_reason, False

    async def _stream_with_retries(
        self, execution: Execution, run: Run, provider: ModelProvider, request: ModelRequest
    ) -> _Spent:
        attempt = 0
        while True:
            attempt += 1
            # Each attempt streams under its own message id: observers never see a retry's
            # text glued onto the dropped attempt's. The commit clears the run's drafts.
            message_id = new_id()
            folded = Fold()
            spent = _Spent(folded, provider, message_id)
            try:
                await self._stream_once(execution, run, provider, request, spent)
                return spent
            except ModelError as error:
                if not error.retryable or attempt >= MAX_MODEL_ATTEMPTS:
                    raise RunFailed(error.code, error.message) from None
                delay = error.retry_after
                if delay is None:
                    delay = min(30.0, 0.5 * 2 ** (attempt - 1)) * (0.8 + 0.4 * random.random())
                text = (
                    f"{error.message} — retrying in {delay:.1f} s "
                    f"(attempt {attempt + 1} of {MAX_MODEL_ATTEMPTS})"
                )
                self._pump.publish(
                    Notice(job_id=run.job_id, run_id=run.id, level="warning", text=text)
                )
                await self._sleep(delay)

    def _starts_at_once(
        self,
        call: NewToolCall,
        tools: dict[str, Tool],
        allowed: set[str],
        decide: Callable[[str, Tool, set[str]], Decision],
    ) -> bool:
        tool = tools.get(call.name)
        return (
            tool is not None
            and call.name != ASK_USER
            and not isinstance(tool, DelegateTool)
            # A write starts on its own, with its file's snapshot in the same transaction.
            and call.name not in FILE_WRITING_TOOLS
            and argument_problem(tool, call.arguments) is None
            and decide(call.name, tool, allowed) == "allow"
        )

    async def _stream_once(
        self,
        execution: Execution,
        run: Run,
        provider: ModelProvider,
        request: ModelRequest,
        spent: _Spent,
    ) -> None:
        """Stream one attempt into ``spent``'s fold. Ended, the message's usage is still handed
        to a cancel until the caller committed it (``call``); cut short, it is counted here
        unless a cancel took it."""
        bus = self._bus
        folded, message_id = spent.folded, spent.message_id
        # Observers read what streams from ``folded`` itself (see runtime.bus): a delta costs
        # nothing here unless one of them is waiting for the next.
        shown_to = bus.open_stream(run.job_id, run.id, execution.token, message_id, folded)
        draft = DraftKeeper(
            self._store, run.id, execution.token, message_id, folded, owner_id=self._owner_id
        )

        async def save_shown() -> CutShortUsage | None:
            # Observers get what was folded until now and nothing after it: the stream goes on
            # while the last save and the cancel's commit are written, and words shown then
            # would be on screen but in no draft (found by a new-user trial after Esc).
            bus.close_stream(shown_to)
            await draft.save_shown()
            return spent.take()  # counted by the cancel, in its transaction

        async def until_commit() -> CutShortUsage | None:
            # The stream ended: the commit is next, unless a cancel is. All of the message
            # was shown: all of it is the partial answer.
            await draft.save_shown()
            return spent.take()

        execution.save_shown = save_shown
        spent.draft = draft
        stream = provider.stream(request)
        ended = False
        count = 0
        try:
            async for event in stream:
                count += 1
                if not count % GIVE_WAY_EVERY and self.input_pending():
                    # A key waits: each of its steps through the loop (the app takes it, the box
                    # takes it, a frame draws it) would wait for a whole turn of every stream.
                    await asyncio.sleep(0)
                shown = folded.apply(event)
                if shown is None:
                    continue
                if bus.waiting:
                    bus.wake()
                draft.shown()
            ended = True
        finally:
            bus.close_stream(shown_to)
            execution.save_shown = until_commit if ended else None
            try:
                # A message cut short (the app closing, the stream failing) keeps in its draft
                # all that was shown, not only what the clock saved last, and counts what it
                # used so far (a cancel by this process counted it already).
                if ended:
                    await draft.hold()
                else:
                    await draft.stop(keep_shown=True)
                    await self._note_cut_short(execution, run.id, spent.take())
            finally:
                # Closing the generator closes the provider's HTTP stream (cancel, errors).
                close = getattr(stream, "aclose", None)
                if close is not None:
                    await close()

    async def _note_cut_short(
        self, execution: Execution, run_id: str, cut_short: CutShortUsage | None
    ) -> None:
        """Add the usage of a message cut short to its run's totals (bounded, like the draft's
        last save: the task may be on its way out of a cancel)."""
        if cut_short is None:
            return
        try:
            async with asyncio.timeout(SAVE_ON_STOP_SECONDS):
                await self._store.note_cut_short(
                    run_id,
                    token=execution.token,
                    owner_id=self._owner_id or None,
                    cut_short=cut_short,
                )
        except (AgentTuiError, TimeoutError) as exc:  # the run moved on (recovered elsewhere)
            log.info("usage of a message of run %s cut short not noted: %s", run_id, exc)


class _Spent:
    """The usage of the message streaming, should it be cut short before its commit: handed
    out once, to the cancel of this process (counted in the cancel's transaction) or else to
    the stream's failure or the commit's; never once the commit returned (it counted the
    provider's figures). The window between the stream's end and the commit is covered too:
    a cancel landing there stopped the commit, and the run recorded 0 tokens for the message.
    Handed out while the commit lands all the same, it adds nothing: the stores count a
    message cut short only if it was not committed (``rules.cancel_run``)."""

    def __init__(self, folded: Fold, provider: ModelProvider, message_id: str) -> None:
        self.folded = folded
        self.message_id = message_id
        self._provider = provider
        self._taken = False
        self.ended = False
        """The commit returned (or failed): nothing is handed out after it."""
        self.draft: DraftKeeper | None = None
        """The message's draft keeper, held from the stream's end to the commit."""

    def take(self) -> CutShortUsage | None:
        if self.ended or self._taken:
            return None
        self._taken = True
        usage = self.folded.usage_so_far()
        if usage.total_tokens == 0:
            return None  # cut before anything was reported or shown (a refused request)
        return CutShortUsage(
            message_id=self.message_id, usage=usage, cost_usd=self._provider.cost_usd(usage)
        )


SAVE_ON_STOP_SECONDS = 2.0
"""How long a message cut short waits for its last draft save (a store write: milliseconds)."""


class DraftKeeper:
    """Keeps the draft of a streaming message on a clock (DESIGN §5): text and thinking shown
    are saved within ``DRAFT_INTERVAL`` whether or not more follows. The first piece not yet
    saved starts a timer; when it fires, everything shown since the last save is saved, one
    write per kind that grew, as the next part of the draft (the store keeps the parts: a save
    costs what it adds, not the length of the whole draft)."""

    def __init__(
        self,
        store: Store,
        run_id: str,
        token: str,
        message_id: str,
        folded: Fold,
        *,
        owner_id: str | None = None,
    ) -> None:
        self._owner_id = owner_id or None
        """The process executing the run: its last save still counts once another process
        cancelled the run (``rules.check_draft_writer``)."""
        self._store = store
        self._run_id = run_id
        self._token = token
        self._message_id = message_id
        self._folded = folded
        self._timer: asyncio.TimerHandle | None = None
        """Due to start the save (a timer, not a task: most messages end before it fires)."""
        self._saving: asyncio.Task[None] | None = None
        self._saved = {DraftKind.TEXT: 0, DraftKind.THINKING: 0}
        """How much of the text and of the thinking the draft holds (where the last saves
        ended)."""
        self._closed = False
        """Set by the last save (``save_shown``) or the message's end (``stop``)."""
        self._limit: dict[DraftKind, int] | None = None
        """Where the last save ends (``save_shown``): the text shown when it was asked for."""
        self._held = False
        """The message ended, its commit next (``hold``): no timed save any more."""

    def shown(self) -> None:
        """New text was shown: make sure a save is due within the interval."""
        if self._closed or self._held or self._timer is not None:
            return
        if self._saving is None or self._saving.done():
            self._due()

    async def hold(self) -> None:
        """The message ended: its commit is next. No timed save from now on (one after the
        commit would leave a draft of a committed message); one being written finishes first,
        the commit deleting the drafts after it. What was shown is still saved by
        ``save_shown`` should a cancel come before the commit (a message streamed whole, then
        cancelled there, kept in its partial answer only what the clock had saved); ``stop``
        once the commit returned."""
        self._held = True
        self._cancel_timer()
        saving = self._saving
        if saving is not None and not saving.done():
            await asyncio.wait({saving})
        else:
            # A suspension point before the commit all the same: observers take the text
            # streamed so far before the committed message supersedes it.
            await asyncio.sleep(0)

    def _due(self) -> None:
        # Fire a little before the interval ends: the write itself takes a moment.
        self._timer = asyncio.get_running_loop().call_later(DRAFT_INTERVAL * 0.8, self._start_save)

    def _start_save(self) -> None:
        self._timer = None
        if not self._closed:
            self._saving = asyncio.get_running_loop().create_task(self._save())

    def _cancel_timer(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    def _unsaved(self, kind: DraftKind) -> str:
        """What of ``kind`` was shown since the last save of it."""
        folded, start = self._folded, self._saved[kind]
        if kind is DraftKind.TEXT:
            end, since = folded.text_length, folded.text_since
        else:
            end, since = folded.thinking_length, folded.thinking_since
        if self._limit is not None:
            end = min(end, self._limit[kind])
        return since(start)[: end - start] if end > start else ""

    async def _save(self) -> None:
        for kind in (DraftKind.THINKING, DraftKind.TEXT):  # the order they are shown in
            start, text = self._saved[kind], self._unsaved(kind)
            if not text:
                continue
            try:
                await self._store.save_draft(
                    self._run_id,
                    token=self._token,
                    message_id=self._message_id,
                    text=text,
                    start=start,
                    kind=kind,
                    owner_id=self._owner_id if self._closed else None,
                )
            except AgentTuiError as exc:  # the run moved on (cancelled, recovered): its commit says
                log.info("draft of run %s not saved: %s", self._run_id, exc)
                return
            self._saved[kind] = start + len(text)
        folded = self._folded
        behind = (
            folded.text_length > self._saved[DraftKind.TEXT]
            or folded.thinking_length > self._saved[DraftKind.THINKING]
        )
        if behind and self._timer is None and not self._closed and not self._held:
            self._due()  # shown while this save was written: saved within the interval too

    async def save_shown(self) -> None:
        """The last save: all that was shown and is not in the draft yet, because the message
        is about to be cut short (``Runtime.cancel`` before it commits the cancel, after which
        the run's token no longer writes; a close; a failed stream). No save follows it, and
        it ends where the text was when it was asked for: what streams meanwhile is not shown
        (the caller closed the bus's stream)."""
        self._limit = {
            DraftKind.TEXT: self._folded.text_length,
            DraftKind.THINKING: self._folded.thinking_length,
        }
        self._cancel_timer()
        saving = self._saving
        if saving is not None and not saving.done():
            await asyncio.wait({saving})
        self._cancel_timer()  # re-armed by that save if text came meanwhile
        if self._closed:
            return  # the message ended meanwhile: its commit replaces the draft
        self._closed = True
        # In the keeper's slot: a ``stop`` meanwhile (the message ending, its commit next)
        # cancels it instead of letting it write after the commit deleted the drafts.
        final = self._saving = asyncio.get_running_loop().create_task(self._save())
        await asyncio.wait({final})

    async def stop(self, *, keep_shown: bool = False) -> None:
        """The message ends (committed, failed or cancelled): no save after this. With
        ``keep_shown``, what was shown and not yet saved is saved first (bounded: the task may
        be on its way out of a cancel)."""
        if keep_shown and not self._closed:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(SAVE_ON_STOP_SECONDS):
                    await self.save_shown()
        self._closed = True
        self._cancel_timer()
        saving, self._saving = self._saving, None
        if saving is not None and not saving.done():
            saving.cancel()
            await asyncio.wait({saving})
        else:
            # A suspension point before the commit all the same: observers take the text
            # streamed so far before the committed message supersedes it (an instant model's
            # deltas would otherwise never be seen).
            await asyncio.sleep(0)
