"""Which model a run uses when an agent of the config names one (``[agents.NAME] model``):
found by a new-user trial, ``/agent fast`` in a job (``follow_up(agent="fast")``) ran the fast
agent on the previous run's model, not on the one the config gives it."""

from __future__ import annotations

from pathlib import Path

from runtime.api import Runtime
from runtime.config import AgentConfig, Config
from runtime.models import RunState
from tests.fakes.scripted import ScriptedProvider, Turn

WAIT = 30


async def _open(db_path: Path, workspace: Path) -> tuple[Runtime, dict[str, ScriptedProvider]]:
    providers = {
        "scripted:big": ScriptedProvider([Turn("big 1"), Turn("big 2")], reference="scripted:big"),
        "scripted:small": ScriptedProvider([Turn("small 1")], reference="scripted:small"),
    }
    config = Config(agents={"fast": AgentConfig(model="scripted:small")})
    runtime = await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=config,
        model="scripted:big",
        providers=lambda reference: providers[reference],
    )
    return runtime, providers


async def test_a_follow_up_switched_to_an_agent_with_a_model_runs_on_that_model(
    db_path: Path, workspace: Path
) -> None:
    runtime, providers = await _open(db_path, workspace)
    try:
        first = await runtime.start("first question")
        assert (await runtime.wait(first.id, timeout=WAIT)).state is RunState.COMPLETED
        assert first.model == "scripted:big"

        switched = await runtime.follow_up(first.job_id, "quick check", agent="fast")
        assert (await runtime.wait(switched.id, timeout=WAIT)).state is RunState.COMPLETED

        assert switched.agent == "fast" and switched.model == "scripted:small"
        assert len(providers["scripted:small"].requests) == 1
    finally:
        await runtime.close()


async def test_a_follow_up_keeps_the_model_of_the_run_before_when_the_agent_stays(
    db_path: Path, workspace: Path
) -> None:
    runtime, providers = await _open(db_path, workspace)
    try:
        first = await runtime.start("first question", agent="fast", model="scripted:big")
        assert (await runtime.wait(first.id, timeout=WAIT)).state is RunState.COMPLETED

        again = await runtime.follow_up(first.job_id, "and then?")
        assert (await runtime.wait(again.id, timeout=WAIT)).state is RunState.COMPLETED

        # A model chosen for the job (--model, /model) stays with it while the agent does.
        assert again.agent == "fast" and again.model == "scripted:big"
        assert providers["scripted:small"].requests == []
    finally:
        await runtime.close()
