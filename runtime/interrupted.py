"""Runs a crash interrupted (DESIGN §5): recovered runs wait for a person to resume them, and a
run that failed because of the crash (a tool whose outcome is unknown) waits for a retry or a
fork. The browser's ``interrupted`` filter and ``agent-tui runs --state interrupted`` find them
here. A run that ended and that later runs of its job went on past (``superseded``) waits for
nothing: a retry would go on from its checkpoint without their turns, so ``retry`` refuses it
(``superseded_error``) and points to a fork instead."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import TYPE_CHECKING

from runtime.errors import RunStateConflict, RunSuperseded
from runtime.hints import command
from runtime.kinds import RunState
from runtime.owners import ACTIVE_STATES, gone_owners

if TYPE_CHECKING:
    from runtime.api import RuntimeApi
    from runtime.models import Checkpoint, Run
    from runtime.store.base import Store

CRASH_STATES = (RunState.RUNNING, RunState.QUEUED, RunState.INPUT_REQUIRED, RunState.FAILED)
"""The states a crash leaves a run in."""
SCAN = 1000
"""Runs looked at per state, newest first: an interrupted run older than these is not found."""
CRASH_FAILURES = ("tool_indeterminate", "interrupted")


def _recoverable(run: Run) -> bool:
    """Recovery would act on the run if its owner were gone."""
    return run.owner_id is not None and run.state.value in ACTIVE_STATES


def owner_gone(run: Run, gone: Collection[str]) -> bool:
    """A queued or running run whose owner is one of the ``gone`` (``gone_owners_of``): the
    store still says queued or running, but nothing runs it; recovery interrupts it when a
    process that may execute runs next opens the database (one that only reads never does)."""
    return _recoverable(run) and run.owner_id in gone


async def gone_owners_of(store: Store, runs: Iterable[Run]) -> frozenset[str]:
    """The owners that are provably gone (``runtime.owners``), for ``owner_gone`` over
    ``runs``; nothing is read unless one of them is queued or running with an owner."""
    if not any(_recoverable(run) for run in runs):
        return frozenset()
    return frozenset(await gone_owners(store))


def waits_for_retry(run: Run) -> bool:
    """Put back in the queue by recovery or a quit (DESIGN §5): the store says queued, but
    nothing runs it until a person retries it. Messages call it interrupted, never "queued",
    which reads as about to start (as ``runs`` and ``show`` label it)."""
    return run.interrupted and run.state is RunState.QUEUED


def state_as_seen(run: Run) -> str:
    """The run's state as a person sees it: ``interrupted (waits for retry)`` for one that
    ``waits_for_retry``, else the state's name."""
    return "interrupted (waits for retry)" if waits_for_retry(run) else run.state.value


def retry_or_cancel(run_id: str) -> str:
    """What a person can do with a run that ``waits_for_retry``, as commands to copy."""
    return f"retry it ({command('retry', run_id)}) or cancel it ({command('cancel', run_id)})"


def not_waiting_for_input(run: Run) -> str:
    """Why an answer to ``run`` is refused: it does not wait for one (``respond``)."""
    if waits_for_retry(run):
        return (
            f"run {run.id} is not waiting for input: it was interrupted and waits for a retry,"
            f" so there is nothing to answer; {retry_or_cancel(run.id)}"
        )
    failure = run.failure if run.state is RunState.FAILED else None
    if failure is not None:
        # Why it failed, not only that it did: a form whose MCP session ended fails its run
        # (DESIGN §4.1), and `respond` is where a person finds out.
        again = (
            f"; retry it to be asked again ({command('retry', run.id)})"
            if failure.code == "input_unanswerable"
            else ""
        )
        return f"run {run.id} is not waiting for input: it failed — {failure.message}{again}"
    return f"run {run.id} is not waiting for input (it is {run.state.value}): nothing to answer"


def needs_resume(run: Run) -> bool:
    """A run a crash interrupted: resumable by a person (retry) or forkable."""
    if run.interrupted and not run.state.is_terminal:
        return True
    return (
        run.state is RunState.FAILED
        and run.failure is not None
        and run.failure.code in CRASH_FAILURES
    )


def before_its_first_checkpoint(run: Run) -> bool:
    """No step of ``run`` has ended: it has no checkpoint to fork from (each step ends with
    one), and a retry goes on from its start. (One stopped in its first step's tools has none
    either, and its ``step`` reads 1: a fork asked for says so then.)"""
    return run.step == 0


def later_roots(run: Run, runs: Sequence[Run]) -> list[Run]:
    """The root runs of ``run``'s job created after it; ``runs`` are the job's runs in the
    order they were created (as ``job_runs`` lists them). Runs it delegated are not roots."""
    for index, other in enumerate(runs):
        if other.id == run.id:
            return [later for later in runs[index + 1 :] if later.parent_run_id is None]
    return []


def superseded(run: Run, runs: Sequence[Run]) -> bool:
    """``run`` ended and later root runs of its job (``runs``, in creation order) went on
    past it: a follow-up, a retry. Its retry would start from its own checkpoint, so the
    model would no longer see their turns; it waits for no retry."""
    return run.state.is_terminal and bool(later_roots(run, runs))


def superseded_error(
    run: Run, runs: Sequence[Run], checkpoints: Sequence[Checkpoint]
) -> RunStateConflict | None:
    """Why ``run`` cannot be retried when it is ``superseded`` in ``runs`` (its job's runs, in
    creation order), naming the latest of the later runs and how to branch from ``run``
    instead (a fork of the last of its ``checkpoints``); None when it is not. While that
    latest run has not ended, the refusal is the one any new run of the job gets: wait for
    it, retry it or cancel it (``active_root_conflict``)."""
    later = later_roots(run, runs) if run.state.is_terminal else []
    if not later:
        return None
    if not later[-1].state.is_terminal:
        from runtime.store.rules import active_root_conflict  # it reads this module

        return active_root_conflict(later[-1])
    went_on = "a later run" if len(later) == 1 else f"{len(later)} later runs"
    if checkpoints:
        branch = (
            "to go on from this run instead, fork its last checkpoint into a new job: "
            f"{command('fork', checkpoints[-1].id, '[PROMPT]')}"
        )
    else:
        branch = "it has no checkpoint to fork from"
    return RunSuperseded(
        f"run {run.id} cannot be retried: {went_on} continued its job (the latest is run "
        f"{later[-1].id}), and a retry would go on from this run without their turns; "
        f"{branch}; or continue the job: {command('follow-up', run.job_id, 'PROMPT')}"
    )


def not_retried(runs: Sequence[Run], *, gone: Collection[str] = ()) -> list[Run]:
    """The runs of one job (in creation order) that a crash interrupted and nobody has
    retried yet, nor gone on past (``superseded``); with ``gone``, also those a killed process
    left that nothing has recovered yet (``owner_gone``)."""
    retried = {run.retry_of_run_id for run in runs if run.retry_of_run_id}
    roots = [index for index, run in enumerate(runs) if run.parent_run_id is None]
    last_root = roots[-1] if roots else -1  # a run before it is gone past (once it ended)
    return [
        run
        for index, run in enumerate(runs)
        if (needs_resume(run) or owner_gone(run, gone))
        and run.id not in retried
        and not (run.state.is_terminal and index < last_root)
    ]


async def interrupted_runs(
    runtime: RuntimeApi, *, limit: int | None, scan: int = SCAN, gone: Collection[str] = ()
) -> list[Run]:
    """The (unarchived) runs a crash interrupted that nobody retried, newest first, at most
    ``limit`` (None: all found): up to ``scan`` runs of each state a crash leaves are looked at.
    With ``gone`` (the owners ``gone_owners_of`` found), also the queued and running runs of
    those owners: a process that only reads sees them before anything recovers them."""
    found: dict[str, Run] = {}
    for state in CRASH_STATES:
        cursor: str | None = None
        seen = 0
        while seen < scan:
            page = await runtime.list_runs(cursor=cursor, limit=min(200, scan - seen), state=state)
            seen += len(page.items)
            found.update(
                (run.id, run) for run in page.items if needs_resume(run) or owner_gone(run, gone)
            )
            cursor = page.next_cursor
            if cursor is None:
                break
    jobs: dict[str, list[Run]] = {}
    for run in found.values():
        jobs.setdefault(run.job_id, []).append(run)
    waiting: list[Run] = []
    for job_id in jobs:
        waiting.extend(not_retried(await runtime.job_runs(job_id), gone=gone))
    waiting.sort(key=lambda run: run.created_at, reverse=True)
    return waiting if limit is None else waiting[:limit]
