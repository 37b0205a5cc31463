"""The store's rules (DESIGN §4-§6), as pure code: current records in, row changes and events out.

A store implementation (SQLite today, PostgreSQL next) does three things per operation, inside
one transaction: it fetches the records a rule needs, calls the rule, and writes the ``Plan``
the rule returns. Nothing here does I/O, and nothing here knows SQL. The rules decide:

- transitions (every one through ``runtime.states``, always from a state that was read);
- execution tokens (``check_token``) and compare-and-set on ``revision``;
- one active root run per job, idempotency replay, revision bumps (every change of a run row);
- the recovery policy for runs of dead owners;
- usage roll-ups into the run and its job, and the job's ``latest_run_state``;
- which durable events each change emits, in order.

Records passed in are trusted (they came out of the store); the plans construct records with
``replaced``/``trusted`` (``runtime.models``) so nothing is validated twice.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from dataclasses import fields as dataclass_fields
from typing import Any

from runtime import errors, hints
from runtime.canonical import canonical_hash
from runtime.events import (
    CheckpointCreated,
    DurableEvent,
    HistoryRepaired,
    JobArchived,
    MessageCommitted,
    RepairNote,
    RunNoted,
    RunStateChanged,
    ToolStateChanged,
)
from runtime.ids import new_id
from runtime.interrupted import not_waiting_for_input, retry_or_cancel, waits_for_retry
from runtime.models import (
    Checkpoint,
    Draft,
    DraftKind,
    Failure,
    InputRequest,
    InputRequestState,
    Job,
    Message,
    Role,
    Run,
    RunState,
    TextBlock,
    ToolCall,
    ToolCallState,
    Usage,
    replaced,
    trusted,
)
from runtime.states import (
    INPUT_INITIAL,
    RUN_INITIAL,
    TOOL_INITIAL,
    check_input,
    check_run,
    check_tool,
)
from runtime.store.base import (
    CutShortUsage,
    NewInputRequest,
    NewMessage,
    NewRun,
    NewToolCall,
    Pricing,
    ToolStateChange,
    cut_short_usage,
)

__all__ = [
    "TITLE_LENGTH",
    "Consumer",
    "JobChange",
    "NewJobRow",
    "Owner",
    "Plan",
    "Receipt",
    "canonical_hash",
    "check_token",
    "new_id",
]

TITLE_LENGTH = 80
IdFactory = Callable[[], str]


def fork_title(title: str, step: int, text: str | None) -> str:
    """A fork's job title, telling forks of one job apart in the browser (a trial saw two rows
    read "Fork of …"): its first message, or else the step it went on from."""
    if text is not None:
        return f"{title_from(text)[:50]} (fork of {title})"[:TITLE_LENGTH]
    return f"Fork of {title} at step {step}"[:TITLE_LENGTH]


def title_from(input_text: str | None) -> str:
    for line in (input_text or "").splitlines():
        line = line.strip()
        if line:
            if len(line) > TITLE_LENGTH:
                return line[: TITLE_LENGTH - 1].rstrip() + "…"
            return line
    return "Untitled"


# --- what a rule returns ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NewJobRow:
    job: Job
    latest_root_run_id: str


@dataclass(frozen=True, slots=True)
class JobChange:
    """A change of a job row: activity, usage added to its totals, and the state of its latest
    root run (set only when ``run_id`` is that run, or becomes it with ``becomes_latest``)."""

    job_id: str
    updated_at: float | None
    """The job's new activity time; None leaves it (``activity_stamp``: a commit in the same
    second as its run's last change), then only the totals change (``run_state`` is None)."""
    usage: Usage | None = None
    cost_usd: float = 0.0
    run_id: str | None = None
    run_state: RunState | None = None
    becomes_latest: bool = False


@dataclass(frozen=True, slots=True)
class Receipt:
    operation: str
    key: str
    input_hash: str
    result: str
    created_at: float


@dataclass(frozen=True, slots=True)
class Owner:
    owner_id: str
    lease_seconds: float
    lease_expires_at: float
    released: bool
    recovered_at: float | None


@dataclass(slots=True)
class Plan:
    """The row changes and events of one operation. A store writes them in this order: new jobs,
    new runs, run updates (compare-and-set on the revision the rule read), job changes,
    messages, new tool calls, tool call updates, new and changed requests, checkpoints,
    drafts deleted, drafts kept, receipts, then the events."""

    new_jobs: list[NewJobRow] = field(default_factory=list)
    new_runs: list[tuple[Run, str | None]] = field(default_factory=list)
    """A new run and its idempotency hash."""
    runs: list[tuple[Run, int]] = field(default_factory=list)
    """A changed run and the revision it had when read."""
    jobs: list[JobChange] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    new_tool_calls: list[ToolCall] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    new_requests: list[InputRequest] = field(default_factory=list)
    requests: list[InputRequest] = field(default_factory=list)
    checkpoints: list[Checkpoint] = field(default_factory=list)
    delete_drafts_of: str | None = None
    """The run whose drafts of its latest attempt go (a commit replaces them); kept ones stay."""
    keep_drafts: tuple[str, int] | None = None
    """(run, position): the run's drafts of its latest attempt are kept before that position."""
    receipts: list[Receipt] = field(default_factory=list)
    events: list[DurableEvent] = field(default_factory=list)

    def extend(self, other: Plan) -> Plan:
        """Append ``other``'s changes and events after this plan's own."""
        for name in _PLAN_FIELDS:
            mine = getattr(self, name)
            if isinstance(mine, list):
                mine.extend(getattr(other, name))
            elif getattr(other, name) is not None:
                setattr(self, name, getattr(other, name))
        return self


_PLAN_FIELDS = tuple(item.name for item in dataclass_fields(Plan))


# --- guards -------------------------------------------------------------------------------------


def check_token(run: Run, token: str) -> None:
    """An execution's write is allowed only with the run's current execution token."""
    if run.execution_token is None or run.execution_token != token:
        raise errors.OwnershipLost(f"run {run.id}: this execution no longer owns it")


def check_draft_writer(run: Run, token: str, owner_id: str | None) -> None:
    """A draft is saved by the execution that streams it (its token), or, once its run was
    cancelled by another process, by the process that was executing it (the run's owner then),
    for the last words it showed before it heard of the cancel (DESIGN §5: every character
    shown is in the draft)."""
    if run.execution_token is not None and run.execution_token == token:
        return
    if owner_id is not None and run.state is RunState.CANCELLED and run.owner_id == owner_id:
        return
    raise errors.OwnershipLost(f"run {run.id}: this execution no longer owns it")


def check_revision(run: Run, expected: int | None) -> None:
    """Compare-and-set: a writer that states the revision it read loses to any change since."""
    if expected is not None and run.revision != expected:
        raise errors.RevisionConflict(
            f"run {run.id} changed since it was read (revision {run.revision}, "
            f"expected {expected}); read it again"
        )


def activity_stamp(run: Run, now: float) -> float | None:
    """The job's activity time for a step's commit of ``run``: ``now`` once per second of the
    run's work, None within the second of its last change (whose commit stamped the job, or
    left it stamped less than a second before). The job list orders by activity; stamping each
    commit rewrote two of its indexes twice per step for a change nobody can see."""
    return now if int(now) != int(run.updated_at) else None


_NO_USAGE = Usage()


def _changed_run(run: Run, now: float, **fields: Any) -> Run:
    """Every change of a run row bumps its revision."""
    return replaced(run, revision=run.revision + 1, updated_at=now, **fields)


def _run_event(
    run: Run,
    to_state: RunState,
    now: float,
    *,
    request: InputRequest | None = None,
    outcome: str | None = None,
    failure: Failure | None = None,
    reason: str | None = None,
    interrupted: bool = False,
) -> RunStateChanged:
    return RunStateChanged(
        job_id=run.job_id,
        run_id=run.id,
        created_at=now,
        from_state=run.state,
        to_state=to_state,
        request=request,
        outcome=outcome,
        failure=failure,
        reason=reason,
        interrupted=interrupted,
    )


def _transition(
    run: Run, to_state: RunState, now: float, *, event: RunStateChanged | None = None, **fields: Any
) -> Plan:
    """``run`` moves to ``to_state``: its row (revision + 1), its job's activity and state, and
    the event."""
    check_run(run.state, to_state)
    after = _changed_run(run, now, state=to_state, **fields)
    return Plan(
        runs=[(after, run.revision)],
        jobs=[JobChange(run.job_id, now, run_id=run.id, run_state=to_state)],
        events=[event or _run_event(run, to_state, now)],
    )


# --- drafts -------------------------------------------------------------------------------------


def drafts_from_parts(parts: Iterable[Mapping[str, Any]]) -> list[Draft]:
    """The drafts of a run from its saved parts (``run_id``, ``message_id``, ``kind``,
    ``start``, ``text``, ``updated_at``, ``before_position``): each message's text and
    thinking, each from its parts
    in the order of ``start`` (a part replaces whatever that kind held from its ``start`` on).
    Ordered by when each draft was last saved, then by id."""
    texts: dict[tuple[str, str], list[str]] = {}
    lengths: dict[tuple[str, str], int] = {}
    latest: dict[str, tuple[str, float]] = {}
    kept: dict[str, int] = {}
    for part in sorted(parts, key=lambda p: (p["message_id"], p["kind"], p["start"])):
        message_id, start = part["message_id"], part["start"]
        if part["before_position"] is not None:
            kept[message_id] = int(part["before_position"])
        key = (message_id, part["kind"])
        pieces = texts.setdefault(key, [])
        if start != lengths.get(key, 0):  # not where the last part ended: cut there
            held = "".join(pieces)[:start]
            pieces[:] = [held]
            lengths[key] = len(held)
        pieces.append(part["text"])
        lengths[key] = lengths.get(key, 0) + len(part["text"])
        updated = latest.get(message_id)
        if updated is None or part["updated_at"] > updated[1]:
            latest[message_id] = (part["run_id"], part["updated_at"])
    drafts = [
        Draft.model_construct(
            run_id=run_id,
            message_id=message_id,
            text="".join(texts.get((message_id, DraftKind.TEXT), ())),
            thinking="".join(texts.get((message_id, DraftKind.THINKING), ())),
            updated_at=updated_at,
            before_position=kept.get(message_id),
        )
        for message_id, (run_id, updated_at) in latest.items()
    ]
    drafts.sort(key=lambda d: (d.updated_at, d.message_id))
    return drafts


# --- owners -------------------------------------------------------------------------------------


def heartbeat(owner: Owner | None, owner_id: str, now: float) -> float:
    """The new lease expiry of a live owner; ``OwnershipLost`` for one that is gone."""
    if owner is None:
        raise errors.OwnershipLost(f"owner {owner_id} is not registered")
    if owner.released or owner.recovered_at is not None:
        raise errors.OwnershipLost(f"owner {owner_id} was released or recovered")
    if owner.lease_expires_at < now:
        raise errors.OwnershipLost(f"the lease of owner {owner_id} expired")
    return now + owner.lease_seconds


# --- runs ---------------------------------------------------------------------------------------


def idempotent_replay(
    existing: Run | None, existing_hash: str | None, input_hash: str
) -> Run | None:
    """The run an idempotency key already created with the same input; a conflict for another
    input; None when the key is new."""
    if existing is None:
        return None
    if existing_hash != input_hash:
        raise errors.IdempotencyConflict(
            f"idempotency key {existing.idempotency_key!r} was used for a different run"
        )
    return existing


def active_root_conflict(active_root: Run) -> errors.RunStateConflict:
    """The refusal of a second root run in a job while ``active_root`` is not finished, naming
    its state as a person sees it: one a crash or a quit interrupted waits for a retry (DESIGN
    §5), so waiting for it would be waiting forever."""
    where = f"run {active_root.id} of job {active_root.job_id}"
    if waits_for_retry(active_root):
        return errors.RunStateConflict(
            f"{where} was interrupted and waits for a retry; retry that one "
            f"({hints.command('retry', active_root.id)}) or cancel it first"
        )
    return errors.RunStateConflict(
        f"{where} is {active_root.state.value}; wait for it, answer it or cancel it first"
    )


def create_run(
    new_run: NewRun,
    *,
    input_hash: str,
    active_root: Run | None,
    job_archived: bool = False,
    now: float,
    ids: IdFactory = new_id,
) -> tuple[Plan, Run]:
    """A queued run (and its job when ``job_id`` is None) with its input message. ``active_root``
    is the job's queued, running or waiting root run, if any: a second root run while one is
    active (a double submit, two processes) would interleave two histories. A new root run of
    an archived job (``job_archived``) is refused: its work would be hidden from the browser
    and from ``agent-tui runs``."""
    is_root = new_run.parent_run_id is None
    run_id = ids()
    job_id = new_run.job_id
    plan = Plan()
    if job_id is None:
        job_id = ids()
        plan.new_jobs.append(NewJobRow(_new_job(new_run, job_id, now), run_id))
    elif is_root:
        if job_archived:
            raise errors.ConflictError(
                f"job {job_id} is archived; `{hints.command('unarchive', job_id)}` brings it"
                " back first"
            )
        if active_root is not None:
            raise active_root_conflict(active_root)
        plan.jobs.append(
            JobChange(job_id, now, run_id=run_id, run_state=RUN_INITIAL, becomes_latest=True)
        )
    else:
        plan.jobs.append(JobChange(job_id, now))
    run = _queued_run(new_run, run_id, job_id, now)
    plan.new_runs.append((run, input_hash if new_run.idempotency_key is not None else None))
    plan.events.append(
        RunStateChanged(
            job_id=job_id, run_id=run_id, created_at=now, from_state=None, to_state=RUN_INITIAL
        )
    )
    if new_run.input is not None:
        message = _input_message(new_run.input, ids(), run_id, job_id, now)
        plan.messages.append(message)
        plan.events.append(
            MessageCommitted(job_id=job_id, run_id=run_id, created_at=now, message=message)
        )
    return plan, run


def _new_job(new_run: NewRun, job_id: str, now: float) -> Job:
    """The job a run without one creates, titled after its input unless given a title."""
    return Job.model_construct(
        id=job_id,
        title=new_run.title or title_from(new_run.input),
        workspace=new_run.workspace,
        agent=new_run.agent,
        created_at=now,
        updated_at=now,
        usage=Usage(),
        cost_usd=0.0,
        archived=False,
        latest_run_state=RUN_INITIAL,
    )


def _queued_run(new_run: NewRun, run_id: str, job_id: str, now: float) -> Run:
    """The record of a run just created: queued, revision 1, no usage yet."""
    return Run.model_construct(
        id=run_id,
        job_id=job_id,
        agent=new_run.agent,
        model=new_run.model,
        state=RUN_INITIAL,
        revision=1,
        input=new_run.input,
        parent_run_id=new_run.parent_run_id,
        parent_tool_call_id=new_run.parent_tool_call_id,
        history_run_id=new_run.history_run_id,
        history_position=new_run.history_position,
        forked_from_checkpoint_id=new_run.forked_from_checkpoint_id,
        retry_of_run_id=new_run.retry_of_run_id,
        idempotency_key=new_run.idempotency_key,
        owner_id=new_run.owner_id,
        execution_token=None,
        step=0,
        max_steps=new_run.max_steps,
        interrupted=False,
        detached=new_run.detached,
        outcome=None,
        failure=None,
        cancel_reason=None,
        usage=Usage(),
        cost_usd=0.0,
        context_tokens=0,
        created_at=now,
        updated_at=now,
    )


def _input_message(text: str, message_id: str, run_id: str, job_id: str, now: float) -> Message:
    """The user's input, the first message (position 0) of a new run."""
    return Message.model_construct(
        id=message_id,
        run_id=run_id,
        job_id=job_id,
        position=0,
        role=Role.USER,
        content=[TextBlock(text=text)],
        model=None,
        usage=None,
        cost_usd=0.0,
        created_at=now,
    )


def claim_run(
    run: Run, *, owner_id: str, token: str, now: float, next_position: int | None = None
) -> Plan:
    """queued → running with a new execution token (and ``interrupted`` cleared). Drafts the
    run holds (``next_position``: the position of its next message, given when it has drafts
    of its latest attempt) are what an execution that ended streamed and never committed (a
    crash, a close): they are kept before that position, partial answers the new execution's
    commits do not replace."""
    if run.state is not RunState.QUEUED:
        raise errors.RunStateConflict(
            f"run {run.id} is {run.state}, not queued; it cannot be claimed"
        )
    plan = _transition(
        run, RunState.RUNNING, now, execution_token=token, owner_id=owner_id, interrupted=False
    )
    if next_position is not None:
        plan.keep_drafts = (run.id, next_position)
    return plan


FINISH_TARGETS = (RunState.COMPLETED, RunState.FAILED, RunState.QUEUED)


def finish_run(
    run: Run,
    *,
    token: str,
    to: RunState,
    outcome: str | None,
    failure: Failure | None,
    now: float,
) -> Plan:
    """running → completed | failed | queued by the execution holding ``token``. A run sent back
    to ``queued`` is marked interrupted: nobody goes on with it until a person does."""
    if to not in FINISH_TARGETS:
        raise errors.InvalidInput(f"finish_run goes to completed, failed or queued, not {to}")
    check_token(run, token)
    if run.state is not RunState.RUNNING:
        raise errors.IllegalTransition("run", run.state, to)
    fields: dict[str, Any] = {"execution_token": None}
    if to is RunState.COMPLETED:
        fields["outcome"] = outcome
    if to is RunState.FAILED:
        fields["failure"] = failure
    if to is RunState.QUEUED:
        fields["interrupted"] = True
    event = _run_event(
        run,
        to,
        now,
        outcome=outcome if to is RunState.COMPLETED else None,
        failure=failure if to is RunState.FAILED else None,
        interrupted=to is RunState.QUEUED,
    )
    return _transition(run, to, now, event=event, **fields)


def _tool_change(
    call: ToolCall,
    to: ToolCallState,
    now: float,
    *,
    said: tuple[str | None, str | None] | None = None,
    **fields: Any,
) -> tuple[ToolCall, ToolStateChanged]:
    """The call moved to ``to`` with ``fields`` changed, and its event; the event tells
    ``said`` (result, error) when given, else the result and error of ``fields``."""
    check_tool(call.state, to)
    after = replaced(call, state=to, **fields)
    result, error = said if said is not None else (fields.get("result"), fields.get("error"))
    event = trusted(
        ToolStateChanged,
        {
            "job_id": call.job_id,
            "run_id": call.run_id,
            "created_at": now,
            "tool_call_id": call.id,
            "name": call.name,
            "from_state": call.state,
            "to_state": to,
            "result": result,
            "error": error,
        },
    )
    return after, event


def cancel_run(
    run: Run,
    *,
    open_calls: Sequence[ToolCall],
    pending_requests: Sequence[InputRequest],
    reason: str | None,
    expected_revision: int | None,
    now: float,
    cut_short: CutShortUsage | None = None,
    cut_short_committed: bool = False,
) -> Plan:
    """Cancel from queued, running or input_required: open tool calls and pending requests are
    cancelled with it, all in one plan. ``RunStateConflict`` for a terminal run. The usage of
    the message the cancel cuts short (``cut_short``) is added to the run's and the job's
    totals in the same plan, unless that message was committed after all
    (``cut_short_committed``: its own usage counted then)."""
    check_revision(run, expected_revision)
    if run.state.is_terminal:
        raise errors.RunStateConflict(f"run {run.id} is already {run.state}")
    plan = Plan()
    for call in open_calls:
        after, event = _tool_change(
            call, ToolCallState.CANCELLED, now, finished_at=now, error=call.error or "cancelled"
        )
        plan.tool_calls.append(after)
        plan.events.append(event.model_copy(update={"error": "cancelled"}))
    for request in pending_requests:
        check_input(request.state, InputRequestState.CANCELLED)
        plan.requests.append(
            request.model_copy(update={"state": InputRequestState.CANCELLED, "answered_at": now})
        )
    cancelled = _run_event(run, RunState.CANCELLED, now, reason=reason)
    transition = _transition(
        run,
        RunState.CANCELLED,
        now,
        event=cancelled,
        execution_token=None,
        cancel_reason=reason,
    )
    if cut_short is not None and _cut_short_adds(cut_short, committed=cut_short_committed):
        transition = _with_cut_short(transition, run, [cut_short], now)
    return plan.extend(transition)


def _with_cut_short(
    plan: Plan, run: Run, spent: Sequence[CutShortUsage], now: float, *, recovered: bool = False
) -> Plan:
    """``plan``, whose first row change is ``run``'s, with the usage of the messages ``spent``
    cut short added to that row and to its job's totals, each noted before the plan's own
    events (``recovered``: counted by recovery, from the saved draft)."""
    if not spent:
        return plan
    usage = sum((cut.usage for cut in spent), Usage())
    cost_usd = sum(cut.cost_usd for cut in spent)
    changed, read = plan.runs[0]
    totals = {"usage": changed.usage + usage, "cost_usd": changed.cost_usd + cost_usd}
    plan.runs[0] = (changed.model_copy(update=totals), read)
    if plan.jobs:
        job = plan.jobs[0]
        plan.jobs[0] = replace(
            job, usage=(job.usage or Usage()) + usage, cost_usd=job.cost_usd + cost_usd
        )
    else:
        plan.jobs.append(JobChange(run.job_id, None, usage=usage, cost_usd=cost_usd))
    notes = [_cut_short_noted(run, cut, now, recovered=recovered) for cut in spent]
    plan.events[:0] = notes
    return plan


def _cut_short_adds(
    cut_short: CutShortUsage | None, *, committed: bool
) -> tuple[Usage, float] | None:
    """What a message cut short adds to its run's totals: nothing when it was committed after
    all (the commit counted its own usage) or when it counted nothing."""
    if cut_short is None or committed:
        return None
    if cut_short.usage.total_tokens == 0 and cut_short.cost_usd == 0:
        return None
    return cut_short.usage, cut_short.cost_usd


def note_cut_short(
    run: Run,
    *,
    token: str,
    owner_id: str | None,
    cut_short: CutShortUsage,
    committed: bool,
    now: float,
) -> Plan:
    """The usage of a message cut short before its end (its stream failed, the process closing,
    a cancel by another process) added to the run's and the job's totals: written by the
    execution that streamed it, or once another process cancelled the run by the process that
    was executing it (``check_draft_writer``). Nothing when the message was committed after all
    (``committed``) or counted nothing."""
    check_draft_writer(run, token, owner_id)
    spent = _cut_short_adds(cut_short, committed=committed)
    if spent is None:
        return Plan()
    usage, cost_usd = spent
    plan = note_usage(run, usage=usage, cost_usd=cost_usd, now=now)
    plan.events.append(_cut_short_noted(run, cut_short, now))
    return plan


def _cut_short_noted(
    run: Run, cut_short: CutShortUsage, now: float, *, recovered: bool = False
) -> RunNoted:
    """The note of an answer cut short whose usage the run's totals take: after another
    process's cancel, the only event that tells whoever shows the run that its totals (and its
    partial answer, saved just before) changed. ``recovered``: counted by the recovery after
    its process died, from the draft alone (``data["recovered"]``)."""
    usage = cut_short.usage
    cost = f" (${cut_short.cost_usd:.4f})" if cut_short.cost_usd else ""
    data: dict[str, Any] = {
        "message_id": cut_short.message_id,
        **usage.model_dump(mode="json"),
        "cost_usd": cut_short.cost_usd,
    }
    if not recovered:
        text = f"the answer cut short used about {usage.total_tokens:,} tokens{cost}: in the totals"
    else:
        data["recovered"] = True
        text = (
            f"the answer cut short when its process stopped used about {usage.total_tokens:,}"
            f" tokens{cost}, estimated from its saved text (its input is not known):"
            " in the totals"
        )
    return RunNoted(
        job_id=run.job_id, run_id=run.id, created_at=now, note="cut_short", text=text, data=data
    )


def recovered_partials(
    run: Run, drafts: Iterable[Draft], *, counted: Iterable[str], price: Pricing | None
) -> list[CutShortUsage]:
    """What the answers ``run`` was streaming when its process died used, for recovery to
    count: each of its drafts (``drafts``: those no later commit replaced) with its output
    estimated from the text and thinking saved, as a cancel estimates it (``cut_short_usage``;
    the provider's own figures died with the process), priced by the run's model. Not a draft
    a ``cut_short`` note already counted (``counted``: their message ids; the process counted
    it when its stream failed or it closed, or a recovery did), nor one that shows nothing:
    recovery may run again, and counts each answer once."""
    already = set(counted)
    found: list[CutShortUsage] = []
    for draft in drafts:
        if draft.before_position is not None:
            continue  # an earlier attempt's, counted when that one was recovered or closed
        if draft.message_id in already or not (draft.text.strip() or draft.thinking.strip()):
            continue
        chars = len(draft.text) + len(draft.thinking)
        usage = cut_short_usage(Usage(), streamed_chars=chars)
        cost_usd = price(run.model, usage) if price is not None else 0.0
        found.append(CutShortUsage(message_id=draft.message_id, usage=usage, cost_usd=cost_usd))
    return found


def set_run_step(run: Run, *, token: str, step: int, now: float) -> Plan:
    """The step counter changes the run row (revision + 1) and emits nothing."""
    check_token(run, token)
    return Plan(runs=[(_changed_run(run, now, step=step), run.revision)])


def note_usage(run: Run, *, usage: Usage, cost_usd: float, now: float) -> Plan:
    """A model call that made no message (a compaction's summary): its usage is added to the
    run and its job like a message's, without touching the run's context fill."""
    after = _changed_run(run, now, usage=run.usage + usage, cost_usd=run.cost_usd + cost_usd)
    return Plan(
        runs=[(after, run.revision)],
        jobs=[JobChange(run.job_id, now, usage=usage, cost_usd=cost_usd)],
    )


# --- messages and tool calls --------------------------------------------------------------------


def commit_message(
    run: Run,
    *,
    token: str,
    position: int,
    message: NewMessage,
    tool_calls: Sequence[NewToolCall],
    step: int | None,
    now: float,
    ids: IdFactory = new_id,
) -> tuple[Plan, Message, list[ToolCall]]:
    """A message at ``position`` (the run's next one) with its tool calls reserved as pending
    (and started at once when asked); usage added to the run and its job; the run's context
    fill set; the run's drafts deleted (the committed message replaces the draft it streamed
    under and those of dropped attempts)."""
    check_token(run, token)
    message_id = message.id or ids()
    call_step = run.step if step is None else step
    committed = trusted(
        Message,
        {
            "id": message_id,
            "run_id": run.id,
            "job_id": run.job_id,
            "position": position,
            "role": message.role,
            "content": message.content,
            "model": message.model,
            "usage": message.usage,
            "cost_usd": message.cost_usd,
            "created_at": now,
        },
    )
    events: list[DurableEvent] = [
        trusted(
            MessageCommitted,
            {"job_id": run.job_id, "run_id": run.id, "created_at": now, "message": committed},
        )
    ]
    calls = _reserved_calls(run, message_id, tool_calls, call_step, now, ids, events)
    usage = message.usage or _NO_USAGE
    fields: dict[str, Any] = {
        # A tool message has no usage: the run's totals stay what they are (no new record).
        "usage": run.usage if usage is _NO_USAGE else run.usage + usage,
        "cost_usd": run.cost_usd + message.cost_usd,
    }
    if message.usage is not None:
        fields["context_tokens"] = message.usage.context_tokens
    if step is not None:
        fields["step"] = step
    after = _changed_run(run, now, **fields)
    stamp = activity_stamp(run, now)
    # ``is not`` first: the tool message's case, without pydantic's field-by-field ``!=``.
    adds = (usage is not _NO_USAGE and usage != _NO_USAGE) or message.cost_usd != 0
    plan = Plan(
        runs=[(after, run.revision)],
        jobs=[JobChange(run.job_id, stamp, usage=usage, cost_usd=message.cost_usd)]
        if stamp is not None or adds
        else [],
        messages=[committed],
        new_tool_calls=calls,
        delete_drafts_of=run.id,
        events=events,
    )
    return plan, committed, calls


def _reserved_calls(
    run: Run,
    message_id: str,
    tool_calls: Sequence[NewToolCall],
    step: int,
    now: float,
    ids: IdFactory,
    events: list[DurableEvent],
) -> list[ToolCall]:
    """The tool calls of message ``message_id``, reserved as pending (and started at once when
    asked); their events are appended to ``events``."""
    calls: list[ToolCall] = []
    for index, new_call in enumerate(tool_calls):
        call = trusted(
            ToolCall,
            {
                "id": new_call.id or ids(),
                "run_id": run.id,
                "job_id": run.job_id,
                "message_id": message_id,
                "index": index,
                "provider_id": new_call.provider_id,
                "name": new_call.name,
                # A copy, as validating made one: the record shares no dict with the input.
                "arguments": dict(new_call.arguments),
                "state": TOOL_INITIAL,
                "idempotent": new_call.idempotent,
                "step": int(step),
                "result": None,
                "error": None,
                "child_run_id": None,
                "created_at": now,
                "started_at": None,
                "finished_at": None,
            },
        )
        events.append(
            trusted(
                ToolStateChanged,
                {
                    "job_id": run.job_id,
                    "run_id": run.id,
                    "created_at": now,
                    "tool_call_id": call.id,
                    "name": call.name,
                    "from_state": None,
                    "to_state": TOOL_INITIAL,
                    "arguments": call.arguments,
                },
            )
        )
        if new_call.start:
            # Started with its message: written once, in its final state, with both
            # transitions in the log.
            call, started = _tool_change(call, ToolCallState.RUNNING, now, started_at=now)
            events.append(started)
        calls.append(call)
    return calls


def complete_with_message(
    run: Run,
    *,
    token: str,
    position: int,
    message: NewMessage,
    step: int,
    outcome: str | None,
    pending_tool_call_ids: Sequence[str],
    now: float,
    ids: IdFactory = new_id,
) -> tuple[Plan, Message, Checkpoint]:
    """The message a run ends with, its step's checkpoint and running → completed: what
    ``commit_message``, ``checkpoint`` and ``finish_run`` do one after the other, as one
    write. The run row is written once, in its final form; the events keep their order
    (the message, the checkpoint, the state change)."""
    plan, committed, _ = commit_message(
        run,
        token=token,
        position=position,
        message=message,
        tool_calls=(),
        step=step,
        now=now,
        ids=ids,
    )
    with_message = plan.runs[0][0]
    marked, created = checkpoint(
        with_message,
        token=token,
        step=step,
        last_position=position,
        pending_tool_call_ids=pending_tool_call_ids,
        now=now,
        ids=ids,
    )
    finished = finish_run(
        with_message,
        token=token,
        to=RunState.COMPLETED,
        outcome=outcome,
        failure=None,
        now=now,
    )
    plan.extend(marked).extend(finished)
    plan.runs = [(finished.runs[0][0], run.revision)]
    return plan, committed, created


def tool_states(
    run: Run,
    *,
    token: str,
    calls: Mapping[str, ToolCall],
    changes: Sequence[ToolStateChange],
    now: float,
) -> tuple[Plan, list[ToolCall]]:
    """Several transitions of the run's tool calls, in order (one call may move twice).
    ``calls`` holds the current records of the calls named, by id."""
    check_token(run, token)
    current = {call_id: call for call_id, call in calls.items() if call.run_id == run.id}
    plan = Plan()
    changed: list[ToolCall] = []
    for change in changes:
        before = current.get(change.tool_call_id)
        if before is None:
            raise errors.ToolCallNotFound(f"tool call {change.tool_call_id} not found")
        target = ToolCallState(change.to)
        after, event = _tool_change(
            before,
            target,
            now,
            result=change.result if change.result is not None else before.result,
            error=change.error if change.error is not None else before.error,
            child_run_id=change.child_run_id or before.child_run_id,
            started_at=before.started_at or (now if target is ToolCallState.RUNNING else None),
            finished_at=now if target.is_terminal else None,
            said=(change.result, change.error),
        )
        plan.events.append(event)
        current[after.id] = after
        changed.append(after)
    plan.tool_calls = list({call.id: call for call in changed}.values())
    return plan, changed


def checkpoint(
    run: Run,
    *,
    token: str,
    step: int,
    last_position: int,
    pending_tool_call_ids: Sequence[str],
    now: float,
    ids: IdFactory = new_id,
) -> tuple[Plan, Checkpoint]:
    """The end of a step: covers the run's messages so far (never copies them)."""
    check_token(run, token)
    created = trusted(
        Checkpoint,
        {
            "id": ids(),
            "run_id": run.id,
            "job_id": run.job_id,
            "step": int(step),
            "last_position": int(last_position),
            "usage": run.usage,
            "pending_tool_call_ids": list(pending_tool_call_ids),
            "created_at": now,
        },
    )
    event = trusted(
        CheckpointCreated,
        {
            "job_id": run.job_id,
            "run_id": run.id,
            "created_at": now,
            "checkpoint_id": created.id,
            "step": created.step,
        },
    )
    return Plan(checkpoints=[created], events=[event]), created


def history_repaired(run: Run, *, token: str, repairs: Sequence[RepairNote], now: float) -> Plan:
    """The execution owning the run repaired its transcript (DESIGN §6): an event, no row."""
    check_token(run, token)
    event = HistoryRepaired(job_id=run.job_id, run_id=run.id, created_at=now, repairs=list(repairs))
    return Plan(events=[event])


# --- jobs ---------------------------------------------------------------------------------------


def archive_job(
    job: Job,
    *,
    archived: bool,
    open_run: Run | None,
    latest_root_run_id: str | None,
    now: float,
) -> list[DurableEvent]:
    """Archive (hide) or bring back ``job``: the event every browser on the database hears,
    none when nothing changes. ``open_run``: a run of the job still queued, running or waiting
    for input, which a job cannot be archived with (cancel it first)."""
    if archived and open_run is not None:
        raise _job_run_open(job, open_run)
    if job.archived == archived or latest_root_run_id is None:
        return []
    return [
        JobArchived(job_id=job.id, run_id=latest_root_run_id, created_at=now, archived=archived)
    ]


def _job_run_open(job: Job, open_run: Run) -> errors.JobRunOpen:
    """Why ``job`` is not archived: ``open_run`` has not ended; what to do, as commands."""
    run_id = open_run.id
    if waits_for_retry(open_run):
        # "Let it finish" never happens: nothing runs it until a person retries it.
        message = (
            f"job {job.id} has a run that was interrupted and waits for a retry ({run_id});"
            f" {retry_or_cancel(run_id)} before archiving"
        )
    elif open_run.state is RunState.INPUT_REQUIRED:
        message = (
            f"job {job.id} has a run that is input_required ({run_id}); answer it"
            f" ({hints.command('respond', run_id, 'ANSWER')}) or cancel it before archiving"
        )
    else:
        message = (
            f"job {job.id} has a run that is {open_run.state.value} ({run_id}); "
            "cancel it or let it finish before archiving"
        )
    return errors.JobRunOpen(
        message,
        job_id=job.id,
        run_id=run_id,
        run_state=open_run.state.value,
        waits_for_retry=waits_for_retry(open_run),
    )


# --- input requests -----------------------------------------------------------------------------


def open_input_request(
    run: Run,
    *,
    token: str,
    request: NewInputRequest,
    tool_call: ToolCall | None,
    now: float,
    ids: IdFactory = new_id,
) -> tuple[Plan, Run, InputRequest]:
    """A pending request, and the run running → input_required, together."""
    check_token(run, token)
    if request.tool_call_id is not None and tool_call is None:
        raise errors.ToolCallNotFound(f"tool call {request.tool_call_id} not found")
    created = InputRequest.model_construct(
        id=ids(),
        run_id=run.id,
        job_id=run.job_id,
        kind=request.kind,
        prompt=request.prompt,
        options=request.options,
        answer_schema=request.answer_schema,
        tool_call_id=request.tool_call_id,
        arguments_digest=request.arguments_digest,
        detail=request.detail,
        state=INPUT_INITIAL,
        answer=None,
        created_at=now,
        answered_at=None,
    )
    event = _run_event(run, RunState.INPUT_REQUIRED, now, request=created)
    plan = _transition(run, RunState.INPUT_REQUIRED, now, event=event)
    plan.new_requests.append(created)
    return plan, plan.runs[0][0], created


ANSWER_OPERATION = "answer_input_request"


def answer_input_request(
    request: InputRequest,
    run: Run,
    *,
    tool_call: ToolCall | None,
    answer: Any,
    expected_revision: int | None,
    idempotency_key: str | None,
    input_hash: str,
    now: float,
    owner_id: str | None = None,
) -> tuple[Plan, Run, InputRequest]:
    """pending → answered and the run input_required → queued (no token: a person answered).
    ``owner_id``: the process that goes on with the run, named in the same write (so the owner
    it had does not take it up too); None leaves the run with the owner it has, which goes on
    with it (an answer sent with ``--detach``)."""
    if request.state is InputRequestState.ANSWERED:
        raise errors.AlreadyAnswered(f"input request {request.id} is already answered")
    if request.state is InputRequestState.CANCELLED:
        raise errors.RunStateConflict(f"input request {request.id} was cancelled")
    check_revision(run, expected_revision)
    if run.state is not RunState.INPUT_REQUIRED:
        raise errors.RunStateConflict(not_waiting_for_input(run))
    if request.tool_call_id is not None and (
        tool_call is None or tool_call.state not in (ToolCallState.PENDING, ToolCallState.RUNNING)
    ):
        state = tool_call.state if tool_call is not None else "missing"
        raise errors.RunStateConflict(f"the tool call of input request {request.id} is {state}")
    check_input(request.state, InputRequestState.ANSWERED)
    answered = request.model_copy(
        update={"state": InputRequestState.ANSWERED, "answer": answer, "answered_at": now}
    )
    plan = _transition(
        run, RunState.QUEUED, now, execution_token=None, owner_id=owner_id or run.owner_id
    )
    plan.requests.append(answered)
    after = plan.runs[0][0]
    if idempotency_key is not None:
        result = json.dumps(
            {
                "run": after.model_dump(mode="json", by_alias=True),
                "request": answered.model_dump(mode="json", by_alias=True),
            },
            separators=(",", ":"),
            ensure_ascii=False,
        )
        plan.receipts.append(Receipt(ANSWER_OPERATION, idempotency_key, input_hash, result, now))
    return plan, after, answered


def answer_replay(receipt: Receipt | None, input_hash: str) -> tuple[Run, InputRequest] | None:
    """The first result of an answer retried with the same idempotency key and answer."""
    if receipt is None:
        return None
    if receipt.input_hash != input_hash:
        raise errors.IdempotencyConflict(
            f"idempotency key {receipt.key!r} was used for another answer"
        )
    stored = json.loads(receipt.result)
    return Run.model_validate(stored["run"]), InputRequest.model_validate(stored["request"])


def cancel_input_request(
    request: InputRequest,
    run: Run,
    *,
    token: str | None,
    others_pending: bool,
    reason: str,
    now: float,
) -> tuple[Plan, InputRequest]:
    """pending → cancelled. A run that waited for nothing else goes back to the queue (no
    token); a run that stays where it is emits nothing."""
    if token is not None:
        check_token(run, token)
    check_input(request.state, InputRequestState.CANCELLED)
    cancelled = request.model_copy(
        update={
            "state": InputRequestState.CANCELLED,
            "answered_at": now,
            "detail": {**request.detail, "cancel_reason": reason},
        }
    )
    plan = Plan(requests=[cancelled])
    if run.state is RunState.INPUT_REQUIRED and not others_pending:
        event = _run_event(run, RunState.QUEUED, now, reason=reason)
        plan.extend(_transition(run, RunState.QUEUED, now, event=event, execution_token=None))
    return plan, cancelled


def fail_unanswerable_request(
    run: Run,
    request: InputRequest,
    *,
    call: ToolCall | None,
    pending: Sequence[InputRequest],
    reason: str,
    now: float,
) -> Plan:
    """input_required → failed (DESIGN §4.1): ``request`` can no longer be answered (the MCP
    session that asked ended) and its ``call``, which may have acted, cannot be retried. In one
    plan: the run's ``pending`` requests are cancelled, the call fails, the run fails with a
    failure that names the request."""
    check_input(request.state, InputRequestState.CANCELLED)
    check_run(run.state, RunState.FAILED)
    plan = Plan()
    for each in {r.id: r for r in [request, *pending]}.values():
        check_input(each.state, InputRequestState.CANCELLED)
        plan.requests.append(
            each.model_copy(
                update={
                    "state": InputRequestState.CANCELLED,
                    "answered_at": now,
                    "detail": {**each.detail, "cancel_reason": reason},
                }
            )
        )
    if call is not None and call.run_id == run.id and call.state is ToolCallState.RUNNING:
        error = f"the request for input was cancelled: {reason}"
        after, failed = _tool_change(call, ToolCallState.FAILED, now, error=error, finished_at=now)
        plan.tool_calls.append(after)
        plan.events.append(failed)
    prompt = request.prompt.splitlines()[0] if request.prompt.strip() else request.kind.value
    failure = Failure(
        code="input_unanswerable",
        message=f"the request for input {prompt!r} can no longer be answered: {reason}",
    )
    event = _run_event(run, RunState.FAILED, now, failure=failure)
    return plan.extend(
        _transition(run, RunState.FAILED, now, event=event, execution_token=None, failure=failure)
    )


# --- recovery -----------------------------------------------------------------------------------


def interrupt_queued(run: Run, now: float, *, partials: Sequence[CutShortUsage] = ()) -> Plan:
    """A queued run whose owner died: nobody will run it; it waits for a person (no state
    change, no event; ``partials`` as ``recover_running``)."""
    plan = Plan(runs=[(_changed_run(run, now, interrupted=True, owner_id=None), run.revision)])
    return _with_cut_short(plan, run, partials, now, recovered=True)


def stop_running(
    run: Run, token: str, running_calls: Iterable[ToolCall], now: float, *, reason: str
) -> Plan:
    """A deliberate stop (the app closing): running → queued, interrupted, with ``reason`` on
    its event. With a call still running, the crash rules of ``recover_running`` apply (the
    call may have acted)."""
    check_token(run, token)
    if run.state is not RunState.RUNNING:
        raise errors.RunStateConflict(f"run {run.id} is {run.state.value}, not running")
    running = list(running_calls)
    if running:
        return recover_running(run, running, now)[0]
    event = _run_event(run, RunState.QUEUED, now, interrupted=True, reason=reason)
    return _transition(
        run,
        RunState.QUEUED,
        now,
        event=event,
        execution_token=None,
        owner_id=None,
        interrupted=True,
    )


def recover_running(
    run: Run,
    running_calls: Iterable[ToolCall],
    now: float,
    *,
    partials: Sequence[CutShortUsage] = (),
) -> tuple[Plan, bool]:
    """A running run whose owner died. Calls that declared themselves idempotent go back to
    pending; any other running call's outcome is unknown, so the call becomes indeterminate
    and the run fails (a person decides). Without such a call the run is re-queued and
    marked interrupted. The answers it was streaming (``partials``, from
    ``recovered_partials``) count in its and its job's totals, each noted. Returns the plan
    and whether the run failed."""
    plan = Plan()
    in_doubt: list[str] = []
    calls = list(running_calls)
    fails = any(not call.idempotent for call in calls)
    for call in calls:
        if call.idempotent and fails:
            # The run fails for another call: this one must not stay open on a failed run.
            message = "not finished: the run failed because another call's outcome is unknown"
            after, event = _tool_change(
                call, ToolCallState.FAILED, now, error=message, finished_at=now
            )
        elif call.idempotent:
            after, event = _tool_change(
                call, ToolCallState.PENDING, now, error=None, started_at=None, finished_at=None
            )
        else:
            message = f"the process running tool {call.name!r} stopped; its outcome is unknown"
            after, event = _tool_change(
                call, ToolCallState.INDETERMINATE, now, error=message, finished_at=now
            )
            in_doubt.append(call.name)
        plan.tool_calls.append(after)
        plan.events.append(event)
    if in_doubt:
        names = ", ".join(repr(name) for name in in_doubt)
        failure = Failure(
            code="tool_indeterminate",
            message=f"the process stopped while tool {names} ran; its outcome is unknown, "
            "so the run was not retried automatically",
        )
        run_event = _run_event(run, RunState.FAILED, now, failure=failure)
        failed = _transition(
            run, RunState.FAILED, now, event=run_event, execution_token=None, failure=failure
        )
        plan.extend(_with_cut_short(failed, run, partials, now, recovered=True))
        return plan, True
    run_event = _run_event(run, RunState.QUEUED, now, interrupted=True)
    requeued = _transition(
        run,
        RunState.QUEUED,
        now,
        event=run_event,
        execution_token=None,
        owner_id=None,
        interrupted=True,
    )
    plan.extend(_with_cut_short(requeued, run, partials, now, recovered=True))
    return plan, False


# --- durable consumers (Runtime.consume, DESIGN §15) ---------------------------------------------


@dataclass(frozen=True, slots=True)
class Consumer:
    """A durable consumer's row: its acknowledged cursor and who holds it until when.

    ``holder`` None: nobody holds it (released, or never held since it was created)."""

    consumer_id: str
    cursor: int
    holder: str | None
    lease_seconds: float
    lease_expires_at: float
    updated_at: float


def acquire_consumer(
    existing: Consumer | None,
    *,
    consumer_id: str,
    holder: str,
    lease_seconds: float,
    after: int | None,
    replace: str | None,
    now: float,
) -> Consumer:
    """``holder`` takes (or, holding it already, renews) the consumer. Another holder's live
    lease refuses it with ``ConsumerAlreadyActive`` unless that holder is ``replace`` (the
    caller proved it gone). ``after`` sets the cursor; None keeps the stored one (0 for a new
    consumer: every durable event)."""
    if lease_seconds <= 0:
        raise errors.InvalidInput("a consumer's lease must be longer than 0 seconds")
    if (
        existing is not None
        and existing.holder is not None
        and existing.holder != holder
        and existing.lease_expires_at >= now
        and existing.holder != replace
    ):
        raise errors.ConsumerAlreadyActive(
            f"consumer {consumer_id!r} is already active in another process "
            f"({existing.holder}); its lease ends in {existing.lease_expires_at - now:.0f} s "
            "unless it renews",
            holder=existing.holder,
        )
    if after is not None and after < 0:
        raise errors.InvalidInput("a consumer's cursor cannot be negative")
    cursor = after if after is not None else (existing.cursor if existing is not None else 0)
    return Consumer(consumer_id, cursor, holder, lease_seconds, now + lease_seconds, now)


def ack_consumer(existing: Consumer | None, *, holder: str, seq: int, now: float) -> Consumer:
    """The holder acknowledged every event up to ``seq``: the cursor moves there (never back;
    acknowledging an older event again changes nothing) and the lease is renewed. A process
    that no longer holds the consumer gets ``ConsumerAlreadyActive`` and changes nothing."""
    if existing is None or existing.holder != holder:
        owner = existing.holder if existing is not None else None
        raise errors.ConsumerAlreadyActive(
            f"consumer {existing.consumer_id if existing else '?'!r} is not held by this "
            "process any more" + (f" (held by {owner})" if owner else ""),
            holder=owner,
        )
    return Consumer(
        existing.consumer_id,
        max(existing.cursor, seq),
        holder,
        existing.lease_seconds,
        now + existing.lease_seconds,
        now,
    )


def release_consumer(existing: Consumer | None, *, holder: str, now: float) -> Consumer | None:
    """The holder lets go (the cursor stays); None when it does not hold it (nothing to do)."""
    if existing is None or existing.holder != holder:
        return None
    return Consumer(existing.consumer_id, existing.cursor, None, existing.lease_seconds, now, now)
