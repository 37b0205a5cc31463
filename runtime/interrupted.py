"""Runs a crash interrupted (DESIGN §5): recovered runs wait for a person to resume them, and a
run that failed because of the crash (a tool whose outcome is unknown) waits for a retry or a
fork. The browser's ``interrupted`` filter and ``agent-tui runs --state interrupted`` find them
here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from runtime.kinds import RunState

if TYPE_CHECKING:
    from runtime.api import RuntimeApi
    from runtime.models import Run

CRASH_STATES = (RunState.RUNNING, RunState.QUEUED, RunState.INPUT_REQUIRED, RunState.FAILED)
"""The states a crash leaves a run in."""
SCAN = 1000
"""Runs looked at per state, newest first: an interrupted run older than these is not found."""
CRASH_FAILURES = ("tool_indeterminate", "interrupted")


def needs_resume(run: Run) -> bool:
    """A run a crash interrupted: resumable by a person (retry) or forkable."""
    if run.interrupted and not run.state.is_terminal:
        return True
    return (
        run.state is RunState.FAILED
        and run.failure is not None
        and run.failure.code in CRASH_FAILURES
    )


def not_retried(runs: Sequence[Run]) -> list[Run]:
    """The runs of one job that a crash interrupted and nobody has retried yet."""
    retried = {run.retry_of_run_id for run in runs if run.retry_of_run_id}
    return [run for run in runs if needs_resume(run) and run.id not in retried]


async def interrupted_runs(
    runtime: RuntimeApi, *, limit: int | None, scan: int = SCAN
) -> list[Run]:
    """The (unarchived) runs a crash interrupted that nobody retried, newest first, at most
    ``limit`` (None: all found): up to ``scan`` runs of each state a crash leaves are looked at."""
    found: dict[str, Run] = {}
    for state in CRASH_STATES:
        cursor: str | None = None
        seen = 0
        while seen < scan:
            page = await runtime.list_runs(cursor=cursor, limit=min(200, scan - seen), state=state)
            seen += len(page.items)
            found.update((run.id, run) for run in page.items if needs_resume(run))
            cursor = page.next_cursor
            if cursor is None:
                break
    jobs: dict[str, list[Run]] = {}
    for run in found.values():
        jobs.setdefault(run.job_id, []).append(run)
    waiting: list[Run] = []
    for job_id in jobs:
        waiting.extend(not_retried(await runtime.job_runs(job_id)))
    waiting.sort(key=lambda run: run.created_at, reverse=True)
    return waiting if limit is None else waiting[:limit]
