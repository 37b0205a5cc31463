"""A job as one conversation (issue 11 points 1-3): the display items of a whole job, in order.

``job_transcript`` yields what a reader sees, top to bottom:

- for a fork, the history it inherited from another job (``ForkOrigin`` then the inherited
  messages, each a ``TranscriptMessage`` with ``inherited=True``);
- then each ROOT run of the job in creation order: a ``RunHeader`` (agent, model, state, usage),
  its messages, and a ``PartialAnswer`` when the run stopped (interrupted, cancelled, failed)
  while text was streaming: the draft that was never committed, marked as partial. A run that
  went on after a crash or a close (retried) keeps the partial answer of the attempt that
  stopped where it was cut short: before the first message the run committed after it.

Sub-runs are not listed at the top level: they belong under the delegation block that made them
(``Run.parent_run_id``). The conversation widget, exports and ``agent-tui show`` consume these
items, so all three say the same thing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from runtime.errors import CheckpointNotFound
from runtime.history import all_messages
from runtime.models import Draft, Job, Message, Run, RunState, ToolCall
from runtime.store.base import Store

__all__ = [
    "ForkOrigin",
    "PartialAnswer",
    "RunHeader",
    "TranscriptItem",
    "TranscriptMessage",
    "inherited_history",
    "job_transcript",
    "kept_partials",
    "partial_answer",
    "partial_label",
    "run_context",
    "run_transcript",
    "with_kept_partials",
]


@dataclass(frozen=True)
class ForkOrigin:
    """The job was forked from ``source_job`` at ``checkpoint_step`` of ``source_run``."""

    source_job: Job
    source_run: Run
    checkpoint_id: str | None
    checkpoint_step: int | None
    position: int | None
    """The last inherited message position of ``source_run`` (None: all of it)."""

    def label(self) -> str:
        step = f" at step {self.checkpoint_step}" if self.checkpoint_step is not None else ""
        return f"forked from job {self.source_job.id} ({self.source_job.title}){step}"

    def short_label(self) -> str:
        """For the screen: the source job by title (ids are in exports and ``show``)."""
        step = f" at step {self.checkpoint_step}" if self.checkpoint_step is not None else ""
        return f"forked from “{self.source_job.title}”{step}"


@dataclass(frozen=True)
class RunHeader:
    run: Run
    index: int
    """1 for the job's first root run, 2 for the next (a follow-up or retry), …"""
    current: bool = False
    """The header of the run a pane shows live: its state and usage are on the status line."""

    def label(self) -> str:
        run = self.run
        kind = "retry" if run.retry_of_run_id else ("follow-up" if self.index > 1 else "run")
        head = f"{kind} {self.index} · {run.agent} · {run.model}"
        if self.current:
            return head
        return f"{head} · {run.state.value} · {run.usage.total_tokens} tok · ${run.cost_usd:.2f}"


@dataclass(frozen=True)
class TranscriptMessage:
    message: Message
    run: Run
    inherited: bool = False
    tool_calls: tuple[ToolCall, ...] = ()
    """The records of the message's tool calls (name, arguments, final state, result), when
    the reader loaded them: a pane's pager does for the runs it shows as context (earlier runs
    of the job, a fork's inherited history), a page at a time."""


def partial_label(state: RunState) -> str:
    """What marks an answer a run (in ``state``) stopped before committing."""
    why = {RunState.CANCELLED: "cancelled", RunState.FAILED: "failed"}.get(state, "interrupted")
    return f"partial answer — the run was {why} before it finished"


KEPT_PARTIAL_LABEL = "partial answer — cut short when its process stopped; the run went on after it"
"""What marks the partial answer of an attempt that stopped (a crash, a close) in a run that
was then resumed."""


@dataclass(frozen=True)
class PartialAnswer:
    """What streamed but was never committed (the answer's text, its thinking): the run
    stopped first."""

    run: Run
    message_id: str
    text: str
    updated_at: float
    thinking: str = ""
    live: bool = False
    """The run is streaming it now: the answer so far (``show`` of a running run)."""
    before_position: int | None = None
    """The partial answer of an earlier attempt, kept when the run went on: it comes before the
    run's message at this position (``Draft.before_position``). None: the run's latest."""

    def label(self) -> str:
        if self.live:
            return "the answer so far — the run is streaming it now"
        if self.before_position is not None:
            return KEPT_PARTIAL_LABEL
        return partial_label(self.run.state)

    def as_json(self) -> dict[str, object]:
        """As ``show --json`` and a JSON export give it (a kept one with its place)."""
        data: dict[str, object] = {
            "label": self.label(),
            "text": self.text,
            "thinking": self.thinking,
            "partial": True,
            "streaming": self.live,
        }
        if self.before_position is not None:
            data["before_position"] = self.before_position
        return data


TranscriptItem = ForkOrigin | RunHeader | TranscriptMessage | PartialAnswer

_STREAMING_STATES = (RunState.RUNNING,)


async def partial_answer(
    store: Store, run: Run, *, live: bool = False, owner_gone: bool = False
) -> PartialAnswer | None:
    """The run's uncommitted streamed text, if the run is not streaming it right now (a running
    run's draft is live text, not a partial answer); with ``live``, that live text too, marked
    as such (its last flush: at most a quarter of a second old). ``owner_gone``: the process
    executing the run is provably gone (``runtime.owners``), so nothing streams it any more."""
    streaming = run.state in _STREAMING_STATES and not run.interrupted and not owner_gone
    if streaming and not live:
        return None
    drafts = [d for d in await _shown_drafts(store, run) if d.before_position is None]
    if not drafts:
        return None
    last = drafts[-1]
    return PartialAnswer(
        run=run,
        message_id=last.message_id,
        text=last.text,
        updated_at=last.updated_at,
        thinking=last.thinking,
        live=streaming,
    )


async def kept_partials(store: Store, run: Run) -> list[PartialAnswer]:
    """The partial answers of the run's earlier attempts (a crash or a close cut them short,
    then the run went on), in the order they belong: each before the run's message at its
    ``before_position``."""
    kept = [
        PartialAnswer(
            run=run,
            message_id=draft.message_id,
            text=draft.text,
            updated_at=draft.updated_at,
            thinking=draft.thinking,
            before_position=draft.before_position,
        )
        for draft in await _shown_drafts(store, run)
        if draft.before_position is not None
    ]
    kept.sort(key=lambda partial: (partial.before_position, partial.updated_at))
    return kept


async def _shown_drafts(store: Store, run: Run) -> list[Draft]:
    return [d for d in await store.get_drafts(run.id) if d.text.strip() or d.thinking.strip()]


def with_kept_partials(
    messages: Sequence[Message], kept: Sequence[PartialAnswer]
) -> list[Message | PartialAnswer]:
    """``messages`` of a run (in position order) with its ``kept`` partial answers each before
    the first message at or after its ``before_position`` (after them all when none is)."""
    waiting = list(kept)
    items: list[Message | PartialAnswer] = []
    for message in messages:
        while waiting and (waiting[0].before_position or 0) <= message.position:
            items.append(waiting.pop(0))
        items.append(message)
    return [*items, *waiting]


async def inherited_history(
    store: Store, run: Run
) -> tuple[ForkOrigin | None, list[TranscriptMessage]]:
    """The messages ``run`` inherits from runs of OTHER jobs (a fork's source chain), oldest
    first, and where the fork was made. Follow-ups and retries inherit from their own job,
    whose runs the transcript shows anyway: they give (None, [])."""
    segments: list[tuple[Run, int | None]] = []
    source_id, position = run.history_run_id, run.history_position
    while source_id is not None:
        source = await store.get_run(source_id)
        segments.append((source, position))
        source_id, position = source.history_run_id, source.history_position
    foreign = [(source, upto) for source, upto in segments if source.job_id != run.job_id]
    if not foreign:
        return None, []
    first_source, first_upto = foreign[0]
    step: int | None = None
    if run.forked_from_checkpoint_id:
        try:
            step = (await store.get_checkpoint(run.forked_from_checkpoint_id)).step
        except CheckpointNotFound:
            step = None
    origin = ForkOrigin(
        source_job=await store.get_job(first_source.job_id),
        source_run=first_source,
        checkpoint_id=run.forked_from_checkpoint_id,
        checkpoint_step=step,
        position=first_upto,
    )
    messages: list[TranscriptMessage] = []
    for source, upto in reversed(foreign):
        for message in await all_messages(store, source.id, upto=upto):
            messages.append(TranscriptMessage(message=message, run=source, inherited=True))
    return origin, messages


async def run_transcript(store: Store, run: Run) -> AsyncIterator[TranscriptItem]:
    """One run's own items: its messages (with the partial answers of attempts that stopped,
    each where it was cut short), then its partial answer if any."""
    kept = await kept_partials(store, run)
    for item in with_kept_partials(await all_messages(store, run.id), kept):
        yield item if isinstance(item, PartialAnswer) else TranscriptMessage(message=item, run=run)
    partial = await partial_answer(store, run)
    if partial is not None:
        yield partial


async def job_transcript(store: Store, job_id: str) -> AsyncIterator[TranscriptItem]:
    """Every display item of a job, in reading order (see the module docstring)."""
    runs = [run for run in await store.job_runs(job_id) if run.parent_run_id is None]
    if not runs:
        return
    origin, inherited = await inherited_history(store, runs[0])
    if origin is not None:
        yield origin
        for message in inherited:
            yield message
    for index, run in enumerate(runs, start=1):
        yield RunHeader(run=run, index=index)
        async for item in run_transcript(store, run):
            yield item


async def run_context(
    store: Store, run: Run, *, limit: int
) -> tuple[list[TranscriptItem], PartialAnswer | None]:
    """What a conversation pane shows around ``run``'s own messages: before them, the job's
    items that come earlier (a fork's inherited history, earlier root runs with their
    headers), the last ``limit`` of them, ending with ``run``'s own header; after them, its
    partial answer. A sub-run gets no context (it sits under its delegation block)."""
    partial = await partial_answer(store, run)
    if run.parent_run_id is not None:
        return [], partial
    before: list[TranscriptItem] = []
    async for item in job_transcript(store, run.job_id):
        if isinstance(item, RunHeader) and item.run.id == run.id:
            before.append(RunHeader(run=item.run, index=item.index, current=True))
            break
        before.append(item)
    else:
        return [], partial
    if limit <= 1:
        return before[-1:], partial
    return before[-limit:], partial
