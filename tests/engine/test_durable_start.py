"""A sent task is durable before anything slow happens, and a model that cannot be used is a
clear configuration error that stores nothing (issue 12 points 11 and 12)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.api import Runtime
from runtime.config import Config
from runtime.errors import ConfigError
from runtime.models import Failure, RunState
from runtime.store.base import NewRun

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import asyncio, sqlite3, sys
from runtime.api import Runtime
from runtime.config import Config

async def main(db, workspace):
    runtime = await Runtime.open(
        db_path=db, workspace=workspace, config=Config(), model="anthropic:claude-test",
        env={"ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"},
    )
    run = await runtime.start("remember this task")
    # Right after `start` returns: nothing of the provider's SDK is loaded yet...
    loaded = sorted(m for m in sys.modules if m.split(".")[0] == "anthropic")
    # ...and the job, the run and the person's message are already in the file.
    with sqlite3.connect(db) as conn:
        jobs = conn.execute("SELECT count(*) FROM jobs").fetchone()[0]
        runs = conn.execute("SELECT count(*) FROM runs WHERE id = ?", (run.id,)).fetchone()[0]
        said = [r[0] for r in conn.execute(
            "SELECT content FROM messages WHERE run_id = ? AND role = 'user'", (run.id,))]
    print(loaded, jobs, runs, any("remember this task" in s for s in said), flush=True)
    await runtime.cancel(run.id)
    await runtime.close()

asyncio.run(main(*sys.argv[1:]))
"""


def test_the_job_run_and_message_are_committed_before_the_provider_sdk_is_imported(
    db_path: Path, workspace: Path
) -> None:
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(db_path), str(workspace)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["[]", "1", "1", "True"]


async def _open(db_path: Path, workspace: Path) -> Runtime:
    return await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=Config(),
        model="anthropic:claude-test",
        env={},  # no ANTHROPIC_API_KEY
    )


async def test_a_claude_task_without_a_key_is_a_config_error_that_stores_no_run(
    db_path: Path, workspace: Path
) -> None:
    runtime = await _open(db_path, workspace)
    try:
        with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY is not set"):
            await runtime.start("summarise this project")
        assert (await runtime.list_runs()).items == []
        assert (await runtime.list_jobs()).items == []
    finally:
        await runtime.close()


@pytest.mark.parametrize("state", [RunState.FAILED, RunState.QUEUED])
async def test_retrying_a_claude_run_without_a_key_adds_no_failed_run(
    db_path: Path, workspace: Path, state: RunState
) -> None:
    runtime = await _open(db_path, workspace)
    try:
        store = runtime.store
        run = await store.create_run(
            NewRun(
                agent="default", model="anthropic:claude-test", input="x", workspace=str(workspace)
            )
        )
        if state is RunState.FAILED:
            claimed = await store.claim_run(run.id, owner_id="elsewhere:1:x-1")
            await store.finish_run(
                run.id,
                token=claimed.execution_token or "",
                to=RunState.FAILED,
                failure=Failure(code="model_error", message="the model was unavailable"),
            )
        for _ in range(3):
            with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY is not set"):
                await runtime.retry(run.id)
        runs = await runtime.job_runs(run.job_id)
        assert [(r.id, r.state) for r in runs] == [(run.id, state)]
    finally:
        await runtime.close()
