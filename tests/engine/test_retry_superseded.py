"""Retrying a run that later runs of its job went on past (found by a new-user trial): a retry
continues from the run's own checkpoint, so the model would no longer see the later turns.
Such a retry is refused with a way to branch instead, and the run no longer counts as one that
waits to be resumed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime.api import Runtime
from runtime.config import Config, Permissions
from runtime.errors import RunStateConflict, RunSuperseded, ToolOutcomeUnknown
from runtime.interrupted import interrupted_runs, not_retried, superseded_error
from runtime.models import Run, RunState
from runtime.tools.base import ToolContext, ToolOutput
from tests.fakes.scripted import ScriptedProvider, Turn

WAIT = 30


class Act:
    """A tool that acts; every call ends with an unknown outcome (an MCP server that died)."""

    name = "act"
    description = "acts on the world"
    read_only = False
    approval_default = "allow"
    input_schema: dict[str, Any] = {"type": "object", "properties": {}}

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        raise ToolOutcomeUnknown("MCP server 'flaky' exited while running 'crash' (code 3)")

    def approval_detail(self, arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        return {}


class Look(Act):
    name = "look"
    read_only = True

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        return ToolOutput(content="looked")


async def _open(db_path: Path, workspace: Path, script: list[Turn]) -> Runtime:
    provider = ScriptedProvider(script)
    return await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=Config(permissions=Permissions(allow=["act", "look"])),
        model="scripted:test",
        providers=lambda reference: provider,
        tools={"act": Act(), "look": Look()},
    )


async def _failed_then_followed(runtime: Runtime, follow_ups: int) -> tuple[Run, list[Run]]:
    """A run that looked (a checkpoint), then failed with a call in doubt; then ``follow_ups``
    completed follow-ups in its job."""
    run = await runtime.start("do it")
    failed = await runtime.wait(run.id, timeout=WAIT)
    assert failed.state is RunState.FAILED
    assert failed.run.failure is not None and failed.run.failure.code == "tool_indeterminate"
    later = []
    for number in range(follow_ups):
        follow_up = await runtime.follow_up(run.job_id, f"and then {number}")
        assert (await runtime.wait(follow_up.id, timeout=WAIT)).state is RunState.COMPLETED
        later.append(follow_up)
    return failed.run, later


FAILING = [Turn("a look first", [("look", {})]), Turn("", [("act", {})])]


@pytest.mark.parametrize("unknown", [None, "skip", "rerun"])
async def test_retrying_a_failed_run_that_later_follow_ups_went_past_is_refused_and_adds_nothing(
    db_path: Path, workspace: Path, unknown: Any
) -> None:
    script = [*FAILING, Turn("one"), Turn("two"), Turn("three")]
    runtime = await _open(db_path, workspace, script)
    try:
        failed, later = await _failed_then_followed(runtime, 3)
        [*_, checkpoint] = await runtime.checkpoints(failed.id)
        runs_before = await runtime.job_runs(failed.job_id)
        seq_before = await runtime.last_seq()

        with pytest.raises(RunSuperseded) as refused:
            await runtime.retry(failed.id, unknown=unknown)

        assert refused.value.code == "run_superseded"
        assert isinstance(refused.value, RunStateConflict)
        message = str(refused.value)
        assert f"run {failed.id} cannot be retried: 3 later runs continued its job" in message
        assert f"the latest is run {later[-1].id}" in message
        assert f"agent-tui fork {checkpoint.id}" in message
        assert "\n" not in message
        assert await runtime.job_runs(failed.job_id) == runs_before
        assert await runtime.last_seq() == seq_before
    finally:
        await runtime.close()


async def test_a_failed_run_later_runs_went_past_no_longer_waits_to_be_resumed(
    db_path: Path, workspace: Path
) -> None:
    runtime = await _open(db_path, workspace, [*FAILING, Turn("one")])
    try:
        failed, _ = await _failed_then_followed(runtime, 0)
        # Before anything went on past it, it waits for a person (retry or fork).
        assert [r.id for r in await interrupted_runs(runtime, limit=None)] == [failed.id]
        assert [r.id for r in not_retried(await runtime.job_runs(failed.job_id))] == [failed.id]

        follow_up = await runtime.follow_up(failed.job_id, "go on anyway")
        assert (await runtime.wait(follow_up.id, timeout=WAIT)).state is RunState.COMPLETED

        assert await interrupted_runs(runtime, limit=None) == []
        assert not_retried(await runtime.job_runs(failed.job_id)) == []
    finally:
        await runtime.close()


async def test_the_last_failed_run_of_a_job_is_still_retried_and_then_its_first_try_is_not(
    db_path: Path, workspace: Path
) -> None:
    runtime = await _open(db_path, workspace, [*FAILING, Turn("recovered")])
    try:
        failed, _ = await _failed_then_followed(runtime, 0)
        retried = await runtime.retry(failed.id, unknown="skip")
        assert (await runtime.wait(retried.id, timeout=WAIT)).state is RunState.COMPLETED
        with pytest.raises(RunSuperseded, match=f"the latest is run {retried.id}"):
            await runtime.retry(failed.id, unknown="skip")
    finally:
        await runtime.close()


def _run(run_id: str, state: RunState, *, parent: str | None = None) -> Run:
    return Run.model_validate(
        {
            "id": run_id,
            "job_id": "job",
            "agent": "default",
            "model": "scripted:test",
            "state": state,
            "revision": 1,
            "input": None,
            "parent_run_id": parent,
            "created_at": 1.0,
            "updated_at": 1.0,
        }
    )


def test_runs_a_failed_run_delegated_do_not_count_as_going_past_it() -> None:
    failed = _run("root", RunState.FAILED)
    child = _run("child", RunState.COMPLETED, parent="root")
    assert superseded_error(failed, [failed, child], []) is None

    follow_up = _run("next", RunState.COMPLETED)
    refusal = superseded_error(failed, [failed, child, follow_up], [])
    assert refusal is not None and "the latest is run next" in str(refusal)
    assert "no checkpoint to fork from" in str(refusal)
    assert "agent-tui follow-up job PROMPT" in str(refusal)
