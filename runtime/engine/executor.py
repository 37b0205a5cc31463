"""One run's step loop: claim the run, then step until it completes, fails or waits for a
person. A step is: build the history and repair it, call the model (``model_call``), then
settle the tool calls it asked for (``tool_calls``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

from runtime.config import AgentConfig
from runtime.engine.catalog import Catalog
from runtime.engine.delegation import Delegation
from runtime.engine.execution import Execution, Executions, RunFailed
from runtime.engine.model_call import ModelCall
from runtime.engine.pump import Pump
from runtime.engine.tool_calls import ToolCalls
from runtime.errors import AgentTuiError, OwnershipLost, RunStateConflict
from runtime.events import Notice
from runtime.history import last_message, repair, run_history
from runtime.models import Failure, Job, Message, Role, Run, RunState, ToolCallState
from runtime.providers.base import ModelProvider, ModelRequest, ToolSpec
from runtime.store.base import Store, ToolStateChange
from runtime.tools.base import Tool

log = logging.getLogger("runtime.engine")


def system_prompt(run: Run, agent: AgentConfig, workspace: Path) -> str:
    if run.parent_run_id is not None:
        head = (
            f"You are a sub-agent ({run.agent}) working for another agent in the workspace "
            f"{workspace}. Do the task you are given and report back briefly."
        )
    else:
        head = (
            f"You are agent-tui's {run.agent} agent, working in the workspace {workspace}. "
            "Paths are relative to it."
        )
    return f"{head}\n\n{agent.instructions}".strip()


class Executor:
    def __init__(
        self,
        *,
        store: Store,
        owner_id: str,
        catalog: Catalog,
        pump: Pump,
        model_call: ModelCall,
        tool_calls: ToolCalls,
        delegation: Delegation,
        executions: Executions,
    ) -> None:
        self._store = store
        self._owner_id = owner_id
        self._catalog = catalog
        self._pump = pump
        self._model_call = model_call
        self._tool_calls = tool_calls
        self._delegation = delegation
        self._executions = executions

    async def execute(self, execution: Execution) -> None:
        """The body of an execution's task; always removes it from ``executions`` at the end."""
        run_id = execution.run_id
        try:
            try:
                run = await self._store.claim_run(run_id, owner_id=self._owner_id)
            except RunStateConflict:
                return
            execution.token = run.execution_token or ""
            self._pump.notify()
            try:
                await self._run_steps(execution, run)
            except RunFailed as failed:
                await self._close_open_calls(execution)
                await self._store.finish_run(
                    run_id, token=execution.token, to=RunState.FAILED, failure=failed.failure
                )
                await self._delegation.cancel_descendants(run, reason="its parent run failed")
        except OwnershipLost:
            log.info("run %s: execution superseded (cancelled or recovered)", run_id)
        except asyncio.CancelledError:
            # Cancelled by `cancel` (already committed) or by `close` (stays recoverable).
            raise
        except Exception as exc:
            log.exception("run %s failed inside the engine", run_id)
            await self._fail_internally(execution, exc)
        finally:
            self._executions.pop(run_id, None)
            self._pump.notify()

    async def _close_open_calls(self, execution: Execution) -> None:
        """A run that fails leaves no call open: one not started failed, one started (and
        stopped with the run) has an unknown outcome."""
        calls = await self._store.list_tool_calls(execution.run_id)
        changes = [
            ToolStateChange(
                tool_call_id=c.id,
                to=ToolCallState.FAILED,
                error="the run failed before this call ran",
            )
            if c.state is ToolCallState.PENDING
            else ToolStateChange(
                tool_call_id=c.id,
                to=ToolCallState.INDETERMINATE,
                error="the run failed while this call ran; its outcome is unknown",
            )
            for c in calls
            if c.state in (ToolCallState.PENDING, ToolCallState.RUNNING)
        ]
        if changes:
            await self._store.set_tool_states(
                execution.run_id, token=execution.token, changes=changes
            )

    async def _fail_internally(self, execution: Execution, exc: Exception) -> None:
        with contextlib.suppress(AgentTuiError):
            await self._close_open_calls(execution)
        with contextlib.suppress(AgentTuiError):
            ended = await self._store.finish_run(
                execution.run_id,
                token=execution.token,
                to=RunState.FAILED,
                failure=Failure(code="internal_error", message=f"{type(exc).__name__}: {exc}"),
            )
            await self._delegation.cancel_descendants(ended, reason="its parent run failed")

    async def _run_steps(self, execution: Execution, run: Run) -> None:
        job = await self._store.get_job(run.job_id)
        agent = self._catalog.agent(run.agent, job.workspace)
        provider = self._catalog.provider(run.model)
        tools = await self._catalog.tools_for(agent, workspace=job.workspace)
        system = system_prompt(run, agent, Path(job.workspace))
        specs = [
            ToolSpec(name=t.name, description=t.description, input_schema=t.input_schema)
            for t in tools.values()
        ]
        while True:
            last = await last_message(self._store, run.id)
            if last is not None and last.role is Role.ASSISTANT and last.tool_uses:
                if await self._tool_calls.settle(execution, run, last, tools, job):
                    return
                continue
            run = await self._store.get_run(run.id)
            if run.step >= run.max_steps:
                raise RunFailed(
                    "max_steps",
                    f"the agent used all {run.max_steps} steps without finishing",
                )
            await self._check_job_budget(run)
            request = await self._model_request(execution, run, job, system, specs)
            if await self._model_turn(execution, run, provider, request, tools):
                return

    async def _model_request(
        self, execution: Execution, run: Run, job: Job, system: str, specs: list[ToolSpec]
    ) -> ModelRequest:
        history, repairs = repair(await run_history(self._store, run))
        if repairs and not execution.repair_noted:
            execution.repair_noted = True
            names = ", ".join(sorted({r.name or r.tool_use_id for r in repairs}))
            text = f"history repaired before calling the model ({len(repairs)}): {names}"
            log.info("run %s: %s", run.id, text)
            self._pump.publish(Notice(job_id=run.job_id, run_id=run.id, level="info", text=text))
        return ModelRequest(
            model=run.model.partition(":")[2] or run.model,
            system=system,
            messages=history,
            tools=specs,
            workspace=job.workspace,
        )

    async def _model_turn(
        self,
        execution: Execution,
        run: Run,
        provider: ModelProvider,
        request: ModelRequest,
        tools: dict[str, Tool],
    ) -> bool:
        """Call the model once and act on how it stopped. True when the run completed."""
        step = run.step + 1
        message, stop_reason = await self._model_call.call(
            execution, run, provider, request, tools, step=step
        )
        if message.tool_uses and stop_reason == "max_tokens":
            await self._fail_cut_calls(execution, run, message)
        elif message.tool_uses:
            return False
        await self._store.create_checkpoint(run.id, token=execution.token, step=step)
        if stop_reason == "pause_turn":
            return False
        if stop_reason == "max_tokens":
            raise RunFailed(
                "max_tokens",
                "the model reached its output limit (max_tokens) before finishing its answer",
            )
        if stop_reason == "refusal":
            raise RunFailed("refusal", "the model declined to continue this task")
        await self._store.finish_run(
            run.id, token=execution.token, to=RunState.COMPLETED, outcome=message.text[:2000]
        )
        return True

    async def _fail_cut_calls(self, execution: Execution, run: Run, message: Message) -> None:
        cut = await self._store.list_tool_calls(run.id, message_id=message.id)
        await self._store.set_tool_states(
            run.id,
            token=execution.token,
            changes=[
                ToolStateChange(
                    tool_call_id=c.id,
                    to=ToolCallState.FAILED,
                    error="the model's output was cut off (max_tokens) before it ended",
                )
                for c in cut
            ],
        )

    async def _check_job_budget(self, run: Run) -> None:
        budget = self._catalog.config.defaults.job_step_budget
        runs = await self._store.job_runs(run.job_id)
        used = sum(r.step for r in runs)
        if used >= budget:
            raise RunFailed(
                "job_step_budget",
                f"the job used its budget of {budget} steps across all its runs "
                "(a runaway delegation chain?); raise [defaults] job_step_budget to allow more",
            )
