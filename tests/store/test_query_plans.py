"""The browser's and the CLI's pages of runs walk an index in the page's order and stop at its
end, whatever the number of jobs (DESIGN §13: a first page within 100 ms at 100,000 jobs):
checked on the plans SQLite chooses, not by timing."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from runtime.models import RunState
from runtime.store.base import NewRun
from runtime.store.sqlite import SqliteStore, runs_page_query

JOBS = 300


@pytest.fixture
async def many_jobs(tmp_path: Path) -> Path:
    path = tmp_path / "store.db"
    async with SqliteStore(path) as store:
        for index in range(JOBS):
            run = await store.create_run(
                NewRun(agent="default", model="demo", input=f"task {index}", workspace="/w")
            )
            if index % 50 == 0:
                await store.cancel_run(run.id, reason="test")
                await store.set_job_archived(run.job_id, True)
    return path


def _plan(path: Path, sql: str, params: list[object]) -> str:
    with sqlite3.connect(path) as conn:
        conn.execute("ANALYZE")  # as a database that has lived a while: the planner knows sizes
        rows = conn.execute("EXPLAIN QUERY PLAN " + sql, params).fetchall()
    return "\n".join(str(row[-1]) for row in rows)


@pytest.mark.parametrize("state", [None, RunState.QUEUED])
async def test_a_page_of_runs_of_jobs_not_archived_walks_the_runs_in_order(
    many_jobs: Path, state: RunState | None
) -> None:
    sql, params = runs_page_query(cursor=None, limit=50, state=state, archived=False)
    plan = _plan(many_jobs, sql, params)
    assert "TEMP B-TREE" not in plan, plan  # no sort of every run found: an index in order
    assert "SCAN jobs" not in plan, plan  # and no list of every job first
    # The page itself is right: newest first, no run of an archived job.
    async with SqliteStore(many_jobs) as store:
        page = await store.list_runs(limit=50, state=state)
        archived = {job.id for job in (await store.list_jobs(limit=100, archived=True)).items}
    assert len(page.items) == 50
    assert not any(run.job_id in archived for run in page.items)
    assert [run.created_at for run in page.items] == sorted(
        (run.created_at for run in page.items), reverse=True
    )
