"""Retrying a run whose last call has an unknown outcome (issue 12 point 10): the caller must
choose to run it again or to continue without it; a call that ended keeps its result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime.api import Runtime
from runtime.config import Config, Permissions
from runtime.errors import InvalidInput, ToolOutcomeUnknown
from runtime.models import Role, RunState, ToolCallState, ToolResultBlock
from runtime.providers.base import ModelRequest
from runtime.tools.base import ToolContext, ToolOutput
from tests.fakes.scripted import ScriptedProvider, Turn

WAIT = 30


class Act:
    """A tool that acts; its first call stops with an unknown outcome."""

    name = "act"
    description = "acts on the world"
    read_only = False
    approval_default = "allow"
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": {"command": {"type": "string"}},
        "required": ["command"],
        "additionalProperties": False,
    }

    def __init__(self, reason: str = "the process running it stopped") -> None:
        self.calls = 0
        self.reason = reason

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        self.calls += 1
        if self.calls == 1:
            raise ToolOutcomeUnknown(self.reason)
        return ToolOutput(content=f"ran {arguments['command']}")

    def approval_detail(self, arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        return {}


class Look(Act):
    name = "look"
    read_only = True
    input_schema: dict[str, Any] = {"type": "object", "properties": {}}

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        return ToolOutput(content="looked")


def _results(request: ModelRequest) -> dict[str, tuple[str, bool]]:
    """tool_use id → (result text, is_error) in the last tool message the model saw."""
    [tool_message] = [m for m in request.messages if m.role is Role.TOOL][-1:]
    return {
        b.tool_use_id: (b.content if isinstance(b.content, str) else str(b.content), b.is_error)
        for b in tool_message.content
        if isinstance(b, ToolResultBlock)
    }


async def _failed_run(
    db_path: Path, workspace: Path, after: Turn, *, act: Act | None = None
) -> tuple[Any, ...]:
    provider = ScriptedProvider(
        [Turn("", [("act", {"command": "echo hi >> log"}), ("look", {})]), after]
    )
    act = act or Act()
    runtime = await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=Config(permissions=Permissions(allow=["act", "look"])),
        model="scripted:test",
        providers=lambda reference: provider,
        tools={"act": act, "look": Look()},
    )
    run = await runtime.start("do it")
    failed = await runtime.wait(run.id, timeout=WAIT)
    assert failed.state is RunState.FAILED
    assert failed.run.failure is not None and failed.run.failure.code == "tool_indeterminate"
    return runtime, provider, act, run


@pytest.mark.parametrize("choice", ["skip", "rerun"])
async def test_retry_after_an_unknown_outcome_runs_it_again_or_tells_the_model_it_is_unknown(
    db_path: Path, workspace: Path, choice: str
) -> None:
    runtime, provider, act, run = await _failed_run(db_path, workspace, Turn("all done"))
    try:
        [unknown] = await runtime.unknown_calls(run.id)
        assert (unknown.name, unknown.state) == ("act", ToolCallState.INDETERMINATE)
        with pytest.raises(InvalidInput, match=r"act echo hi >> log is unknown"):
            await runtime.retry(run.id)
        assert len(await runtime.job_runs(run.job_id)) == 1  # refused: nothing created

        retried = await runtime.retry(run.id, unknown=choice)  # type: ignore[arg-type]
        final = await runtime.wait(retried.id, timeout=WAIT)
        assert final.state is RunState.COMPLETED
        results = _results(provider.requests[-1])
        assert results["toolu_1_1"] == ("looked", False)  # ended: kept, not run again
        if choice == "skip":
            assert act.calls == 1
            text, is_error = results["toolu_1_0"]
            assert is_error and "outcome of this call is unknown" in text
            assert "act echo hi >> log" in text
        else:
            assert act.calls == 2
            assert results["toolu_1_0"] == ("ran echo hi >> log", False)
        calls = await runtime.tool_calls(retried.id)
        assert all(c.state.is_terminal for c in calls)
    finally:
        await runtime.close()


async def test_continuing_without_a_call_tells_the_model_why_its_outcome_is_unknown_as_recorded(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: the model was told "agent-tui stopped while it ran" of a call
    whose MCP server had crashed, while the recorded failure said so accurately."""
    crashed = (
        "MCP server 'flaky' exited while running 'crash' (code 3); the call may have had effects"
    )
    runtime, provider, _, run = await _failed_run(
        db_path, workspace, Turn("all done"), act=Act(crashed)
    )
    try:
        retried = await runtime.retry(run.id, unknown="skip")
        assert (await runtime.wait(retried.id, timeout=WAIT)).state is RunState.COMPLETED
        text, is_error = _results(provider.requests[-1])["toolu_1_0"]
        assert is_error
        assert text.startswith(f"The outcome of this call is unknown: {crashed}. ")
        assert "agent-tui stopped" not in text
        assert "act echo hi >> log" in text
    finally:
        await runtime.close()
