"""The browser's state filter: a run state, or ``interrupted`` (a run a crash interrupted that
nobody has retried yet, shown ⚠).

The runtime filters jobs by the state of their latest run; "interrupted" is not a state, and the
Runtime API has no query for it, so :func:`interrupted_jobs` finds those jobs from the runs in
the states a crash leaves behind, a bounded number of them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from runtime.kinds import RunState
from tui.widgets._format import needs_resume
from tui.widgets.job_tree import interrupted_runs

if TYPE_CHECKING:
    from runtime.api import RuntimeApi
    from runtime.models import Job

INTERRUPTED: Literal["interrupted"] = "interrupted"
BrowserFilter = RunState | Literal["interrupted"] | None

FILTERS: list[BrowserFilter] = [
    None,
    RunState.RUNNING,
    RunState.INPUT_REQUIRED,
    INTERRUPTED,
    RunState.FAILED,
    RunState.COMPLETED,
    RunState.CANCELLED,
    RunState.QUEUED,
]
"""The order ``s`` cycles through."""

CRASH_STATES = (RunState.RUNNING, RunState.QUEUED, RunState.INPUT_REQUIRED, RunState.FAILED)
SCAN = 1000
"""Runs looked at per state, newest first: an interrupted run older than these is not found."""


def filter_name(state: BrowserFilter) -> str:
    if state is None:
        return "all"
    return state if isinstance(state, str) else state.value.replace("_", " ")


def empty_text(state: BrowserFilter) -> str:
    """The browser's only row when nothing matches."""
    if state is None:
        return ""  # a new database: the conversation pane says what to do
    return f"no job matches filter: {filter_name(state)} (s to change)"


async def interrupted_jobs(runtime: RuntimeApi, *, limit: int, scan: int = SCAN) -> list[Job]:
    """The (unarchived) jobs with an interrupted run nobody retried, most recently updated
    first, at most ``limit``."""
    job_ids: list[str] = []
    for state in CRASH_STATES:
        cursor: str | None = None
        seen = 0
        while seen < scan:
            page = await runtime.list_runs(cursor=cursor, limit=min(200, scan - seen), state=state)
            seen += len(page.items)
            for run in page.items:
                if needs_resume(run) and run.job_id not in job_ids:
                    job_ids.append(run.job_id)
            cursor = page.next_cursor
            if cursor is None:
                break
    jobs: list[Job] = []
    for job_id in job_ids:
        if interrupted_runs(await runtime.job_runs(job_id)):
            jobs.append(await runtime.get_job(job_id))
    jobs.sort(key=lambda job: job.updated_at, reverse=True)
    return jobs[:limit]
