"""The browser's state filter: a run state, or ``interrupted`` (a run a crash interrupted that
nobody has retried yet, shown ⚠).

The runtime filters jobs by the state of their latest run; "interrupted" is not a state:
:func:`interrupted_jobs` finds those jobs from ``runtime.interrupted``'s runs (a bounded number of
the runs in the states a crash leaves behind). ``queued`` lists the jobs about to start: a run a
crash or a quit interrupted stays queued in the store but waits for a person, and is listed by
``interrupted`` only (as ``agent-tui runs --state queued`` / ``--state interrupted``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from runtime.interrupted import interrupted_runs
from runtime.kinds import RunState

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


def filter_name(state: BrowserFilter) -> str:
    if state is None:
        return "all"
    # RunState is a StrEnum: asked first, or "input_required" showed as it is spelt in code.
    return state.value.replace("_", " ") if isinstance(state, RunState) else state


def interrupted_option(state: BrowserFilter) -> bool | None:
    """``list_jobs``'s ``interrupted`` for a state filter: queued leaves the interrupted out."""
    return False if state is RunState.QUEUED else None


def empty_text(state: BrowserFilter) -> str:
    """The browser's only row when nothing matches."""
    if state is None:
        return ""  # a new database: the conversation pane says what to do
    return f"no {filter_name(state)} job (s: next filter)"  # fits a narrow browser


async def interrupted_jobs(runtime: RuntimeApi, *, limit: int) -> list[Job]:
    """The (unarchived) jobs with an interrupted run nobody retried, most recently updated
    first, at most ``limit``."""
    runs = await interrupted_runs(runtime, limit=None)
    job_ids = dict.fromkeys(run.job_id for run in runs)
    jobs = [await runtime.get_job(job_id) for job_id in job_ids]
    jobs.sort(key=lambda job: job.updated_at, reverse=True)
    return jobs[:limit]
