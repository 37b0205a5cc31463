"""Runs a kill or a crash left, from the command line (new-user trials).

Once recovered, such a run waits for a retry, and `retry` / `follow-up` of its job say so
instead of "is queued; wait for it".
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from runtime.api import Runtime
from runtime.config import Config
from runtime.models import Run, RunState
from runtime.store.sqlite import SqliteStore
from tests.cli.harness import Cli
from tests.store.helpers import new_run

pytestmark = pytest.mark.slow


def _line_of(table: str, run_id: str) -> str:
    [line] = [line for line in table.splitlines() if line.startswith(run_id)]
    return line


async def _open_and_close(cli: Cli) -> None:
    """What an agent-tui that may execute runs does on open: recover the runs of gone owners."""
    runtime = await Runtime.open(
        db_path=cli.db, workspace=cli.workspace, config=Config(), model="demo", env={}
    )
    await runtime.close()


async def _cancelled_then_interrupted(cli: Cli) -> tuple[Run, Run]:
    """A job whose first run was cancelled and whose newer run a crash interrupted (queued by a
    process that died before running it, then recovered when agent-tui opened)."""
    cli.db.parent.mkdir(parents=True, exist_ok=True)
    runtime = await Runtime.open(
        db_path=cli.db, workspace=cli.workspace, config=Config(), model="demo:instant", env={}
    )
    try:
        first = await runtime.start("hello")
        await runtime.wait(first.id, timeout=60)  # the demo asks a question
        first = await runtime.cancel(first.id, reason="not now")
    finally:
        await runtime.close()
    store = SqliteStore(cli.db)
    await store.open()
    try:
        newer = await store.create_run(
            new_run(
                "and now?",
                job_id=first.job_id,
                workspace=str(cli.workspace),
                owner_id="elsewhere:1:x-crashed",
            )
        )
    finally:
        await store.close()
    await _open_and_close(cli)
    return first, newer


def _rows(db: Path) -> dict[str, Any]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return {
            table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("jobs", "runs", "messages", "events")
        }


def test_retrying_an_old_run_of_a_job_whose_newer_run_waits_for_retry_names_it_interrupted(
    cli: Cli,
) -> None:
    first, newer = asyncio.run(_cancelled_then_interrupted(cli))
    assert first.state is RunState.CANCELLED
    assert "interrupted (waits for retry)" in _line_of(cli.run("runs").stdout, newer.id)
    counts = _rows(cli.db)

    refusal = (
        f"agent-tui: error: run {newer.id} of job {first.job_id} was interrupted and waits for a"
        f" retry; retry that one (agent-tui retry {newer.id}) or cancel it first\n"
    )
    retried = cli.run("retry", first.id)
    assert (retried.returncode, retried.stdout, retried.stderr) == (2, "", refusal)
    followed = cli.run("follow-up", first.job_id, "and then?")
    assert (followed.returncode, followed.stdout, followed.stderr) == (2, "", refusal)
    assert _rows(cli.db) == counts  # nothing was created
