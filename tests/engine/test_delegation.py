"""Jobs with several agents: delegation in parallel, roll-up, cancel, recovery (DESIGN §3, §8)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from runtime.answers import parse_cli_answer
from runtime.api import Runtime
from runtime.config import AgentConfig, Config, Defaults
from runtime.models import RunState, ToolCallState

WAIT = 20


def team_config(**defaults: int) -> Config:
    return Config(
        defaults=Defaults(**defaults),
        agents={
            "coordinator": AgentConfig(
                instructions="Split the work.", delegates=["researcher", "reviewer"]
            ),
            "researcher": AgentConfig(description="Looks things up."),
            "reviewer": AgentConfig(description="Reviews."),
        },
    )


async def open_runtime(db_path: Path, workspace: Path, config: Config) -> Runtime:
    return await Runtime.open(
        db_path=db_path, workspace=workspace, config=config, model="demo:instant"
    )


async def test_a_coordinator_delegates_to_two_agents_in_parallel_and_the_job_rolls_up(
    db_path: Path, workspace: Path
) -> None:
    runtime = await open_runtime(db_path, workspace, team_config())
    try:
        root = await runtime.start("survey the project", agent="coordinator")
        boundary = await runtime.wait(root.id, timeout=WAIT)
        # The first child asks the person something; it surfaces through the parent.
        assert boundary.state is RunState.INPUT_REQUIRED
        assert boundary.run.parent_run_id == root.id
        assert boundary.request is not None
        assert boundary.request.prompt == "Which part of the workspace matters most?"
        await runtime.respond(
            boundary.run.id, boundary.request.id, parse_cli_answer(boundary.request, "2")
        )
        final = await runtime.wait(root.id, timeout=WAIT)
        assert final.state is RunState.COMPLETED

        runs = await runtime.job_runs(root.job_id)
        assert len(runs) == 3
        children = [r for r in runs if r.parent_run_id == root.id]
        assert sorted(r.agent for r in children) == ["researcher", "reviewer"]
        assert all(r.state is RunState.COMPLETED for r in children)
        calls = {c.id: c for c in await runtime.tool_calls(root.id)}
        for child in children:
            assert child.parent_tool_call_id in calls
            assert calls[child.parent_tool_call_id].child_run_id == child.id
        assert "The docs" in (final.run.outcome or "")

        job = await runtime.get_job(root.job_id)
        total_input = sum(r.usage.input_tokens for r in runs)
        assert job.usage.input_tokens == total_input
        assert job.usage.input_tokens > (await runtime.get_run(root.id)).usage.input_tokens
    finally:
        await runtime.close()


async def test_cancelling_the_coordinator_cancels_its_children(
    db_path: Path, workspace: Path
) -> None:
    runtime = await open_runtime(db_path, workspace, team_config())
    try:
        root = await runtime.start("survey the project", agent="coordinator")
        boundary = await runtime.wait(root.id, timeout=WAIT)
        assert boundary.run.parent_run_id == root.id
        await runtime.cancel(root.id, reason="stop everything")
        runs = {r.id: r for r in await runtime.job_runs(root.job_id)}
        assert runs[root.id].state is RunState.CANCELLED
        assert runs[boundary.run.id].state is RunState.CANCELLED
        # The other child may have finished already; none is left running without a parent.
        assert all(r.state.is_terminal for r in runs.values())
        assert await runtime.inbox() == []
    finally:
        await runtime.close()


async def test_a_job_step_budget_stops_runaway_delegation(db_path: Path, workspace: Path) -> None:
    runtime = await open_runtime(db_path, workspace, team_config(job_step_budget=2))
    try:
        root = await runtime.start("survey the project", agent="coordinator")
        final = await runtime.wait(root.id, timeout=WAIT)
        while final.request is not None:
            await runtime.respond(final.run.id, final.request.id, "The code")
            final = await runtime.wait(root.id, timeout=WAIT)
        runs = await runtime.job_runs(root.job_id)
        failures = [r.failure.code for r in runs if r.failure is not None]
        assert "job_step_budget" in failures
        calls = await runtime.tool_calls(root.id)
        assert any(c.state is ToolCallState.FAILED for c in calls)
    finally:
        await runtime.close()


async def test_after_a_restart_the_parent_reattaches_to_its_children_without_starting_new_ones(
    db_path: Path, workspace: Path
) -> None:
    config = team_config()
    first = await open_runtime(db_path, workspace, config)
    root = await first.start("survey the project", agent="coordinator")
    boundary = await first.wait(root.id, timeout=WAIT)
    assert boundary.request is not None
    # Quit while a child waits for the person; the coordinator's delegation calls are open.
    await first.close()

    second = await open_runtime(db_path, workspace, config)
    try:
        parent = await second.get_run(root.id)
        assert parent.state is RunState.QUEUED and parent.interrupted
        request = (await second.inbox())[0]
        # Answering the child continues the child, then its parent.
        await second.respond(request.run_id, request.id, "The code")
        final = await second.wait(root.id, timeout=WAIT)
        assert final.state is RunState.COMPLETED
        runs = await second.job_runs(root.job_id)
        assert len(runs) == 3  # no child was started twice
    finally:
        await second.close()


async def test_no_child_keeps_running_when_its_parent_fails(db_path: Path, workspace: Path) -> None:
    runtime = await open_runtime(db_path, workspace, team_config())
    try:
        root = await runtime.start("survey the project", agent="coordinator")
        boundary = await runtime.wait(root.id, timeout=WAIT)
        assert boundary.request is not None
        waiting_child = boundary.run.id
        await runtime.cancel(waiting_child, reason="not this one")
        final = await runtime.wait(root.id, timeout=WAIT)
        # The cancelled child is an error the coordinator's model sees; the job still ends.
        assert final.state is RunState.COMPLETED
        assert "failed" in (final.run.outcome or "")
        async with asyncio.timeout(WAIT):
            runs = await runtime.job_runs(root.job_id)
        assert all(r.state.is_terminal for r in runs)
    finally:
        await runtime.close()
