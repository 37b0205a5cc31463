"""The ``Store`` protocol (DESIGN §5, §15).

A store keeps jobs, runs, messages, tool calls, input requests, checkpoints, drafts, receipts,
owners and the event log. It decides nothing itself: every method that changes state fetches
the records involved, asks ``runtime.store.rules`` (pure code over ``runtime.states``) for the
row changes and events, and writes them in ONE transaction — all of it or nothing. A second
backend implements the same fetch and write steps and gets the same behaviour.

Execution tokens: ``claim_run`` gives the claiming owner a fresh token. Every write an execution
makes passes that token; a write whose token is no longer the run's current token raises
``OwnershipLost`` and changes nothing. Methods that a person triggers (``cancel_run``,
``answer_input_request``) take no token.

The conformance suite and the state machine in ``tests/store`` run against every backend listed
in ``tests/store/backends.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Literal, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from runtime import errors
from runtime.events import DurableEvent, HistoryRepaired, RepairNote, RunNoted
from runtime.models import (
    Checkpoint,
    ContentBlock,
    Draft,
    DraftKind,
    Failure,
    InputKind,
    InputRequest,
    Job,
    Message,
    Role,
    Run,
    RunState,
    SearchHit,
    ToolCall,
    ToolCallState,
    Usage,
)
from runtime.results import CHARS_PER_TOKEN

T = TypeVar("T")

Pricing = Callable[[str, Usage], float]
"""What ``usage`` of a model cost, by the model reference a run records (``provider:model``)."""


class _Input(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class NewRun(_Input):
    """What ``create_run`` needs. With ``job_id`` None a new job is created for the run."""

    agent: str
    model: str
    input: str | None
    workspace: str
    job_id: str | None = None
    title: str | None = None
    parent_run_id: str | None = None
    parent_tool_call_id: str | None = None
    history_run_id: str | None = None
    history_position: int | None = None
    forked_from_checkpoint_id: str | None = None
    retry_of_run_id: str | None = None
    idempotency_key: str | None = None
    owner_id: str | None = None
    """The process that will execute the run (DESIGN §5: queued runs run where they were queued)."""
    max_steps: int = 50
    detached: bool = False
    """For workers, not this process (``Run.detached``); ``owner_id`` is then None."""


class NewMessage(_Input):
    id: str | None = None
    """The id deltas were published under while it streamed; generated when None."""
    role: Role
    content: list[ContentBlock]
    model: str | None = None
    usage: Usage | None = None
    cost_usd: float = 0.0


def cut_short_usage(reported: Usage, *, streamed_chars: int) -> Usage:
    """The usage of a message cut short before its end: what the provider reported by then
    (Anthropic's ``message_start`` carries the input and cache tokens; an OpenAI-compatible
    server may report nothing before the end; after a crash nothing of it was kept) with the
    output tokens an *estimate* from the characters streamed (``CHARS_PER_TOKEN`` a token)
    whenever that is more than the provider said: output is counted at a message's end, and
    the figure in ``message_start`` is a placeholder. The one estimate of a message cut short:
    a cancel's, a failed stream's and recovery's (from the saved draft)."""
    estimate = -(-streamed_chars // CHARS_PER_TOKEN)
    if estimate <= reported.output_tokens:
        return reported
    return reported.model_copy(update={"output_tokens": estimate})


class CutShortUsage(_Input):
    """What a model message cut short before its end (cancelled, its stream failed, the
    process closing) used, as far as it was known: providers report usage at a message's end,
    so without it a run cancelled mid-stream counted no tokens and cost nothing. ``usage`` is
    what the provider reported by then (Anthropic: the input and cache tokens) with its output
    estimated from the characters streamed (``Fold.usage_so_far``); ``cost_usd`` is priced from
    it."""

    message_id: str
    """The id the message streamed under (never committed: a commit counts its own usage)."""
    usage: Usage
    cost_usd: float = 0.0


class NewToolCall(_Input):
    """A tool call reserved with the assistant message that asked for it."""

    id: str | None = None
    provider_id: str
    name: str
    arguments: dict[str, Any]
    idempotent: bool = False
    start: bool = False
    """Start it in the same transaction (pending → running): a call nothing needs to decide on
    first, such as an allowed read-only tool."""


class FileContent(_Input):
    """A file's bytes at one moment (``data`` None: there was no file), its path relative to
    the workspace."""

    path: str
    data: bytes | None = None


class ToolStateChange(_Input):
    """One tool call transition, for methods that commit several in one transaction.

    ``file_before`` (a file-writing call starting) snapshots the file the call is about to
    change, and ``file_after`` (its result) what the call left there, in the same transaction
    as the transition: a call is never recorded as running without the content it may undo."""

    tool_call_id: str
    to: ToolCallState
    result: str | None = None
    error: str | None = None
    child_run_id: str | None = None
    file_before: FileContent | None = None
    file_after: FileContent | None = None


class NewInputRequest(_Input):
    kind: InputKind
    prompt: str
    options: list[str] = []
    answer_schema: dict[str, Any] = Field(default_factory=dict, alias="schema")
    tool_call_id: str | None = None
    arguments_digest: str | None = None
    detail: dict[str, Any] = Field(default_factory=dict)


class Page(BaseModel, Generic[T]):
    """One page of a keyset-paged query; pass ``next_cursor`` back for the next page."""

    items: list[T]
    next_cursor: str | None = None


@dataclass(frozen=True, slots=True)
class StepCommit:
    """What one step transaction committed, so the engine keeps its history in memory and
    publishes the events directly, without reading any of it back."""

    run: Run
    """The run as the transaction left it (revision, step, usage totals, context fill)."""
    message: Message | None
    tool_calls: list[ToolCall]
    """The calls reserved with the message, or the calls the transaction changed, in order."""
    checkpoint: Checkpoint | None
    events: list[DurableEvent]
    """The durable events committed, in order, each with its ``seq``."""


class RecoveryReport(BaseModel):
    requeued: list[str] = []
    """Runs put back in ``queued`` and marked interrupted (no tool side effect in doubt)."""
    failed: list[str] = []
    """Runs failed because a tool call's outcome became indeterminate."""
    interrupted_queued: list[str] = []
    """Runs that were queued by a process that died before running them."""


class FileSnapshot(BaseModel):
    """A file an approved ``write_file``/``edit_file`` changed: its content before (and, once
    the call finished, after) as blob digests; ``None`` digests mean "no file"."""

    model_config = ConfigDict(frozen=True)

    n: int
    job_id: str
    run_id: str
    tool_call_id: str
    path: str
    """Relative to the job's workspace."""
    before_sha256: str | None
    after_sha256: str | None
    after_recorded: bool
    """Whether ``after_sha256`` is known (False if the process stopped during the write)."""
    checkpoint_n: int
    created_at: float


@runtime_checkable
class Store(Protocol):
    @property
    def location(self) -> Path | str:
        """The database: an SQLite file, or the ``postgresql://`` URL it was opened with."""
        ...

    # --- lifecycle ---------------------------------------------------------------------------
    async def open(self) -> None:
        """Open (creating and migrating if needed). Refuses non-databases and newer schemas."""
        ...

    async def close(self) -> None: ...

    # --- owners and recovery -----------------------------------------------------------------
    async def register_owner(self, owner_id: str, *, lease_seconds: float) -> None: ...

    async def heartbeat(self, owner_id: str) -> None:
        """Extend the lease. Raises ``OwnershipLost`` if it expired and was recovered."""
        ...

    async def release_owner(self, owner_id: str) -> None:
        """Say the owner is gone (a quit): one that held a lease, or that never did but left
        drafts, which are then another process's to restore (``runtime.drafts``). Nothing is
        written for an owner that did neither."""
        ...

    async def live_owners(self) -> list[str]:
        """Owner ids whose lease has not expired and that have not been released."""
        ...

    async def recover_expired(self, *, price: Pricing | None = None) -> RecoveryReport:
        """Recover runs of owners whose lease expired, exactly as DESIGN §4.1/§4.2 say. The
        answer a recovered run was streaming (its draft, never committed) counts in the run's
        and the job's totals as a cancel's does, its output estimated from the saved text
        (``cut_short_usage``) and priced by ``price`` (None: at 0), with a ``cut_short``
        note; once: not what a note of the run already counted (``rules.recovered_partials``)."""
        ...

    # --- runs --------------------------------------------------------------------------------
    async def create_run(self, new_run: NewRun) -> Run:
        """Create a queued run (and its job when ``job_id`` is None) with its input message.

        Idempotent by ``idempotency_key``: the same key and input return the existing run;
        the same key with another input raises ``IdempotencyConflict``.
        """
        ...

    async def claim_run(self, run_id: str, *, owner_id: str) -> Run:
        """queued → running with a new execution token (and ``interrupted`` cleared)."""
        ...

    async def finish_run(
        self,
        run_id: str,
        *,
        token: str,
        to: RunState,
        outcome: str | None = None,
        failure: Failure | None = None,
    ) -> Run:
        """running → completed | failed | queued, by the execution holding ``token``. A run sent
        back to ``queued`` is marked interrupted: nobody goes on with it until a person does."""
        ...

    async def cancel_run(
        self,
        run_id: str,
        *,
        reason: str | None = None,
        expected_revision: int | None = None,
        cut_short: CutShortUsage | None = None,
    ) -> Run:
        """Cancel from queued, running or input_required: pending tool calls become cancelled,
        running ones cancelled too (the engine stops them), pending requests cancelled; all in
        one transaction. Raises ``RunStateConflict`` for a terminal run. With ``cut_short``
        (the message this process was streaming for the run) its usage is added to the run's
        and the job's totals in the same transaction, unless that message was committed
        meanwhile (``rules.cancel_run``)."""
        ...

    async def note_cut_short(
        self, run_id: str, *, token: str, owner_id: str | None = None, cut_short: CutShortUsage
    ) -> Run:
        """Add the usage of a message cut short (its stream failed, the process closing, a
        cancel by another process) to the run's and the job's totals, by the execution
        holding ``token`` or, once another process cancelled the run, by its executing owner
        ``owner_id`` (``rules.note_cut_short``). No event."""
        ...

    async def set_run_step(self, run_id: str, *, token: str, step: int) -> Run: ...

    # --- messages ------------------------------------------------------------------------------
    async def commit_message(
        self,
        run_id: str,
        *,
        token: str,
        message: NewMessage,
        tool_calls: list[NewToolCall] | None = None,
        step: int | None = None,
    ) -> tuple[Message, list[ToolCall]]:
        """Commit a message at the run's next position; with ``tool_calls`` reserve them as
        ``pending`` in the same transaction. Adds ``usage``/``cost_usd`` to the run and job
        totals, sets the run's context fill, and deletes the run's drafts. With ``step``
        the run's step counter is set in the same transaction (the step the message ends)."""
        ...

    async def save_draft(
        self,
        run_id: str,
        *,
        token: str,
        message_id: str,
        text: str,
        start: int = 0,
        kind: DraftKind = DraftKind.TEXT,
        owner_id: str | None = None,
    ) -> None:
        """Save what streamed of a message not yet committed (no event): ``text`` is its
        ``kind`` (the answer's text, or its thinking) from character ``start`` on; what was
        saved before ``start`` stays. A draft saved as it streams sends only what came since
        the last save; each save is one part, written once (``start=0`` replaces the whole of
        that kind). With ``owner_id``, a run another process cancelled still takes the save of
        the process that was executing it (``rules.check_draft_writer``)."""
        ...

    async def get_drafts(self, run_id: str) -> list[Draft]: ...

    # --- tool calls ----------------------------------------------------------------------------
    async def set_tool_state(
        self,
        tool_call_id: str,
        *,
        token: str,
        to: ToolCallState,
        result: str | None = None,
        error: str | None = None,
        child_run_id: str | None = None,
    ) -> ToolCall: ...

    async def set_tool_states(
        self, run_id: str, *, token: str, changes: list[ToolStateChange]
    ) -> list[ToolCall]:
        """Several transitions of the run's tool calls, in order, in one transaction (a group
        of calls starting together, or results that are ready together)."""
        ...

    async def finish_step(
        self,
        run_id: str,
        *,
        token: str,
        tool_changes: list[ToolStateChange],
        message: NewMessage | None,
        checkpoint_step: int,
    ) -> tuple[list[ToolCall], Message | None, Checkpoint]:
        """The end of a step in one transaction: the last tool results (in call order), the
        tool message that carries them to the model, and the step's checkpoint."""
        ...

    # --- one step in two transactions (issue 13: constant work per step) ----------------------

    async def commit_assistant_message_with_calls(
        self,
        run_id: str,
        *,
        token: str,
        message: NewMessage,
        tool_calls: list[NewToolCall],
        step: int,
    ) -> StepCommit:
        """The first write of a step, ONE transaction: the assistant message at the run's next
        position, its calls reserved (those with ``start`` running), the run's step, usage and
        context fill, the job's totals, the run's drafts dropped. Returns the run after it, the
        message, the calls and the events with their seq."""
        ...

    async def commit_final_message(
        self,
        run_id: str,
        *,
        token: str,
        message: NewMessage,
        step: int,
        outcome: str | None,
    ) -> StepCommit:
        """The last write of a run that ends with ``message`` (no tool calls), ONE transaction:
        the message (as ``commit_assistant_message_with_calls`` writes it), the step's
        checkpoint, and running → completed with ``outcome`` (rule:
        ``rules.complete_with_message``). Observers get the three events together, so the
        last words and the end of the run arrive at once. Returns the completed run, the
        message, the checkpoint and the events with their seq."""
        ...

    async def commit_tool_states(
        self, run_id: str, *, token: str, changes: list[ToolStateChange]
    ) -> StepCommit:
        """``set_tool_states`` that also returns the run, the changed calls and the events."""
        ...

    async def commit_step_results(
        self,
        run_id: str,
        *,
        token: str,
        tool_changes: list[ToolStateChange],
        message: NewMessage | None,
        checkpoint_step: int,
    ) -> StepCommit:
        """The last write of a step, ONE transaction: the remaining results (in call order),
        the tool message carrying every result (where the results then live), the run and job
        totals, and the checkpoint. Returns the run after it, the tool message, the changed
        calls, the checkpoint and the events with their seq."""
        ...

    # --- input requests ------------------------------------------------------------------------
    async def open_input_request(
        self, run_id: str, *, token: str, request: NewInputRequest
    ) -> tuple[Run, InputRequest]:
        """Create a pending request and move the run running → input_required, together."""
        ...

    async def answer_input_request(
        self,
        request_id: str,
        *,
        answer: Any,
        idempotency_key: str | None = None,
        expected_revision: int | None = None,
        owner_id: str | None = None,
    ) -> tuple[Run, InputRequest]:
        """pending → answered and the run input_required → queued (compare-and-set).

        Methods a person triggers take ``expected_revision``: the run's revision they read.
        If the run changed since, ``RevisionConflict`` and nothing changes.

        A second answer raises ``AlreadyAnswered``. With ``idempotency_key`` a retried call
        with the same answer returns the first result (a receipt). ``owner_id`` names the
        process that goes on with the run; None leaves it with its owner
        (``rules.answer_input_request``)."""
        ...

    async def cancel_input_request(
        self, request_id: str, *, token: str | None = None, reason: str
    ) -> InputRequest: ...

    async def fail_unanswerable_request(self, request_id: str, *, reason: str) -> Run:
        """input_required → failed (DESIGN §4.1) when the pending request can no longer be
        answered and its tool call, which may have acted, cannot be retried: the run's pending
        requests are cancelled, the call fails, and the run fails naming the request, in one
        transaction (rule: ``rules.fail_unanswerable_request``). For a caller that checked the
        run's owner is gone. ``RunStateConflict`` unless the run is ``input_required``."""
        ...

    # --- checkpoints ---------------------------------------------------------------------------
    async def create_checkpoint(self, run_id: str, *, token: str, step: int) -> Checkpoint:
        """Mark the end of a step: covers the run's messages so far; never copies them."""
        ...

    async def record_history_repair(
        self, run_id: str, *, token: str, repairs: list[RepairNote]
    ) -> HistoryRepaired:
        """Record that the execution holding ``token`` repaired the run's transcript before
        calling the model (a ``history_repaired`` event, no row changes; rule:
        ``rules.history_repaired``)."""
        ...

    # --- events --------------------------------------------------------------------------------
    async def read_events(
        self,
        *,
        after: int = 0,
        limit: int = 500,
        run_id: str | None = None,
        job_id: str | None = None,
    ) -> list[DurableEvent]:
        """Durable events with ``seq > after``, oldest first. ``after`` beyond the log raises
        ``CursorOutOfRange``."""
        ...

    async def last_seq(self) -> int: ...

    async def running_since(self, run_id: str) -> float | None:
        """When the run last went into ``running``: the time of its latest
        ``run_state_changed`` to running (a retry, a resume after an answer), None when it
        never ran. A client that did not see the run start counts its working time from
        here, not from its creation."""
        ...

    async def record_note(
        self,
        run_id: str,
        *,
        token: str | None,
        note: RunNoted,
        usage: Usage | None = None,
        cost_usd: float = 0.0,
    ) -> RunNoted:
        """Commit a ``run_noted`` event for the run this execution owns (DESIGN §16), or, with
        no token, for a run that has ended (``/compact``); else ``RunStateConflict``. With
        ``usage`` (the model call that made the note: a compaction's summary) it and
        ``cost_usd`` are added to the run's and the job's totals in the same transaction."""
        ...

    async def list_notes(
        self, *, run_ids: Sequence[str] = (), job_id: str | None = None
    ) -> list[RunNoted]:
        """The ``run_noted`` events of these runs (or of every run of ``job_id``), oldest
        first."""
        ...

    # --- queries -------------------------------------------------------------------------------
    async def get_job(self, job_id: str) -> Job: ...

    async def get_run(self, run_id: str) -> Run: ...

    async def get_tool_call(self, tool_call_id: str) -> ToolCall: ...

    async def get_input_request(self, request_id: str) -> InputRequest: ...

    async def get_checkpoint(self, checkpoint_id: str) -> Checkpoint: ...

    async def list_jobs(
        self,
        *,
        cursor: str | None = None,
        limit: int = 50,
        state: RunState | None = None,
        archived: bool | None = False,
        interrupted: bool | None = None,
    ) -> Page[Job]:
        """Jobs newest first (by last activity), keyset-paged; ``state`` filters on the job's
        latest root run; ``archived``: False (default) hides archived jobs, True lists only
        them, None lists both; ``interrupted``: True lists only the jobs whose latest root run
        a crash or a quit interrupted (``Run.interrupted``), False only the others, None both.
        With ``state=QUEUED, interrupted=False``: the jobs about to start (an interrupted run
        stays queued, but waits for a person to retry it)."""
        ...

    async def list_runs(
        self,
        *,
        cursor: str | None = None,
        limit: int = 50,
        state: RunState | None = None,
        archived: bool | None = False,
    ) -> Page[Run]:
        """Runs newest first across jobs, keyset-paged; ``archived`` as in ``list_jobs`` (on
        the run's job)."""
        ...

    async def job_runs(self, job_id: str) -> list[Run]:
        """A job's runs in creation order; ``parent_run_id`` makes the tree."""
        ...

    async def list_messages(
        self,
        run_id: str,
        *,
        after_position: int = -1,
        before_position: int | None = None,
        limit: int = 200,
    ) -> list[Message]:
        """Messages of a run in position order. With ``before_position`` the ``limit`` messages
        just before it (for scrolling up); otherwise the first ``limit`` after
        ``after_position``."""
        ...

    async def list_tool_calls(
        self, run_id: str, *, message_id: str | None = None
    ) -> list[ToolCall]:
        """A run's tool calls in order; with ``message_id`` only those of that message."""
        ...

    async def list_checkpoints(self, run_id: str) -> list[Checkpoint]: ...

    async def pending_input_requests(
        self, *, run_id: str | None = None, limit: int = 100
    ) -> list[InputRequest]:
        """Open requests, oldest first (the inbox), or those of one run."""
        ...

    async def list_input_requests(self, run_id: str) -> list[InputRequest]:
        """Every request of a run (any state), oldest first: the engine reads answered
        approvals and questions from here when it resumes."""
        ...

    async def count_runs_by_state(self) -> dict[RunState, int]: ...

    async def search_messages(self, query: str, *, limit: int = 50) -> list[SearchHit]:
        """Full-text search over message text (FTS5), best match first; archived jobs'
        messages are left out, as the browser leaves the jobs out."""
        ...

    async def child_run_for_tool_call(self, tool_call_id: str) -> Run | None:
        """The child run a delegation tool call created, if any (recovery re-attaches)."""
        ...

    # --- archive and delete ------------------------------------------------------------------

    async def set_job_archived(self, job_id: str, archived: bool) -> Job:
        """Archive or unarchive a job; archived jobs are hidden from ``list_jobs`` and
        ``list_runs`` unless asked. A job with an open run cannot be archived. A change commits
        a ``job_archived`` event (naming the job's latest root run), so every browser on the
        database hears of it."""
        ...

    async def delete_job(self, job_id: str) -> dict[str, int]:
        """Remove an archived job and every row of it in one transaction; rows removed by kind."""
        ...

    # --- blobs and file snapshots --------------------------------------------------------------

    async def put_blob(self, data: bytes, media_type: str) -> str:
        """Store bytes once under their SHA-256 (hex), returned."""
        ...

    async def get_blob(self, sha256: str) -> tuple[str, bytes]:
        """The media type and bytes of a blob."""
        ...

    async def record_file_snapshot(
        self, tool_call_id: str, path: str, before: bytes | None
    ) -> FileSnapshot:
        """The content of a file before a tool call changes it (idempotent per call and path)."""
        ...

    async def record_file_after(self, tool_call_id: str, path: str, after: bytes | None) -> None:
        """What the tool call left in the file."""
        ...

    async def list_file_snapshots(self, job_id: str) -> list[FileSnapshot]: ...

    async def checkpoint_order(self, checkpoint_id: str) -> int:
        """The checkpoint's position in the global checkpoint order."""

    # --- composer drafts, id prefixes and prompt history (clients' conveniences) -------------
    # A draft is per writer: the owner id of the process that typed it (``runtime.drafts``
    # decides which a process may restore: its own, and those of writers that are gone).
    async def get_composer_drafts(self, job_id: str | None) -> list[WrittenDraft]:
        """The unsent composer texts (and queued messages) of ``job_id`` (None: the new-job
        composer), one per writer, oldest first."""
        ...

    async def save_composer_draft(
        self,
        job_id: str | None,
        text: str,
        *,
        writer: str,
        replacing: Sequence[str] = (),
        revision: int | None = None,
    ) -> None:
        """Keep ``text`` as ``writer``'s draft of ``job_id`` (blank text deletes it; its queued
        messages stay), and delete the drafts of ``replacing`` (gone writers' drafts just
        restored into this one), in one transaction. ``revision``: when ``text`` was taken
        from the box (``runtime.drafts.draft_revision``; None: now); a save older than one this
        store already wrote of the draft keeps the newer text (``replacing`` still goes)."""
        ...

    async def save_queued_messages(
        self, job_id: str, texts: Sequence[str], *, writer: str, revision: int | None = None
    ) -> None:
        """Keep ``texts`` as the messages ``writer`` queued for ``job_id`` (none: empty).
        ``revision``: when ``texts`` were taken from the composer (as ``save_composer_draft``'s;
        None: now); a save older than one this store already wrote keeps the newer queue."""
        ...

    async def get_answer_drafts(self, request_id: str) -> list[WrittenDraft]:
        """The unsent free-text answers to the question ``request_id``, one per writer, oldest
        first."""
        ...

    async def save_answer_draft(
        self,
        request_id: str,
        text: str,
        *,
        job_id: str,
        writer: str,
        replacing: Sequence[str] = (),
        revision: int | None = None,
    ) -> None:
        """Keep ``text`` as ``writer``'s answer being typed to ``request_id`` (of ``job_id``:
        deleted with it, and deleted, every writer's, when the request is answered); blank text
        deletes it. ``replacing`` and ``revision``: as ``save_composer_draft``."""
        ...

    async def ids_with_prefix(self, kind: str, prefix: str, *, limit: int = 2) -> list[str]:
        """Ids of ``kind`` ("job", "run", "checkpoint") that start with ``prefix``, sorted."""
        ...

    async def recent_prompts(self, *, workspace: str | None = None, limit: int = 100) -> list[str]:
        """The inputs of the latest root runs (in ``workspace``), newest first."""
        ...

    def on_commit(self, listener: Callable[[int, list[DurableEvent]], None]) -> None:
        """From now on, right after each write transaction of this store object commits, call
        ``listener(before, events)`` with the durable events it committed (in seq order) and
        the last seq before them (so a gap means another process committed in between). A
        transaction that rolls back reports nothing. The engine publishes these directly."""
        ...

    def on_damaged(self, listener: Callable[[errors.DatabaseCorrupt], None]) -> None:
        """From now on, when an operation first finds the database damaged (``DatabaseCorrupt``:
        found only when a damaged page is read, so by any operation), call ``listener(error)``
        before the operation raises it, on the thread that awaited the operation (at once if
        one already did). The store refuses every write after that."""
        ...

    async def stale_owners(self) -> list[StaleOwner]:
        """Owners named by queued or running runs whose lease is not live (no owner row,
        released, recovered, or expired). Read-only: recovery decides which are provably gone
        and passes those to ``recover_owners``."""
        ...

    async def recover_owners(
        self, owner_ids: Sequence[str], *, price: Pricing | None = None
    ) -> RecoveryReport:
        """Recover the queued and running runs of exactly these owners (as ``recover_expired``
        does, their partial answers counted too) and mark the owners released and recovered."""
        ...

    def lease_renewer(self, owner_id: str) -> LeaseRenewer:
        """A renewer of this owner's lease with a connection of its own (for a thread)."""
        ...

    async def stop_run(self, run_id: str, *, token: str, reason: str) -> Run:
        """A deliberate stop (the app closing): running → queued, interrupted, with ``reason``
        on its ``run_state_changed`` event. With a call still running, as recovery does."""
        ...

    # --- workers and durable consumers (DESIGN §15; added with issue 14) ------------------------

    async def queued_for_workers(self, *, limit: int = 20) -> list[Run]:
        """Detached runs (``Run.detached``) in ``queued``, interrupted or not, oldest first: the
        runs workers may take. Read-only; a worker takes one with ``claim_run``, which settles
        a race between workers (the loser gets ``RunStateConflict``)."""
        ...

    async def acquire_consumer(
        self,
        consumer_id: str,
        *,
        holder: str,
        lease_seconds: float,
        after: int | None = None,
        replace: str | None = None,
    ) -> int:
        """``rules.acquire_consumer`` in one transaction (creating the consumer's row when it
        is new): take or renew the consumer for ``holder``; returns its cursor. Raises
        ``ConsumerAlreadyActive`` while another holder (not ``replace``) has a live lease."""
        ...

    async def ack_consumer(self, consumer_id: str, *, holder: str, seq: int) -> int:
        """``rules.ack_consumer`` in one transaction: the cursor moves up to ``seq`` and the
        lease is renewed; returns the cursor. ``ConsumerAlreadyActive`` if ``holder`` lost it."""
        ...

    async def release_consumer(self, consumer_id: str, *, holder: str) -> None:
        """``rules.release_consumer``: let go, keeping the cursor (nothing if not the holder)."""
        ...


class StaleOwner(BaseModel):
    """An owner of queued or running runs whose lease is not live."""

    model_config = ConfigDict(frozen=True)

    owner_id: str
    released: bool
    """Released, recovered, or no owner row at all: it said (or shows) it is gone."""


class WrittenDraft(BaseModel):
    """A draft as one writer left it, with what the owners table says of that writer."""

    model_config = ConfigDict(frozen=True)

    writer: str
    """The owner id of the process that typed it ('' for drafts older than writers)."""
    text: str
    queued: tuple[str, ...] = ()
    """Messages it queued for the job, to send when its run finished (composer drafts)."""
    updated_at: float
    writer_released: bool
    """The writer released its lease (it quit) or was recovered by another process."""
    writer_lease_live: bool
    """The writer holds a lease that has not run out (a process that ran something)."""


class LeaseRenewer(Protocol):
    def renew(self, lease_seconds: float) -> Literal["renewed", "lost", "busy"]:
        """Extend the lease (even if it ran out, as long as nobody released or recovered it);
        ``lost`` when it was released or recovered; ``busy`` when the database could not be
        written just now (retry)."""
        ...

    def close(self) -> None: ...
