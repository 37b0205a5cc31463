"""One run's step loop: claim the run, then step until it completes, fails or waits for a
person. A step is: call the model with the history (``model_call``), then settle the tool calls
it asked for (``tool_calls``).

The execution reads the database when it starts (the run's history, the calls of an unsettled
message, its input requests, its job's step total) and again only if it lost and regained its
run; after that a step only writes (the assistant message, the tool results), whatever the
length of the history. The history lives in ``Execution.history``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

from runtime.config import AgentConfig
from runtime.engine.catalog import Catalog
from runtime.engine.delegation import Delegation
from runtime.engine.execution import GIVEN_BACK_REASON, Execution, Executions, RunFailed
from runtime.engine.extensions import Extensions, ExtensionState
from runtime.engine.hooked import notify_run_finished
from runtime.engine.model_call import ModelCall
from runtime.engine.pump import Pump
from runtime.engine.tool_calls import ToolCalls
from runtime.errors import (
    AgentTuiError,
    DatabaseFull,
    DatabaseUnreachable,
    OwnershipLost,
    RunStateConflict,
)
from runtime.events import RepairNote
from runtime.history import load_history
from runtime.images import RequestImages
from runtime.models import Failure, Job, Message, Role, Run, RunState, ToolCallState
from runtime.providers.base import ModelProvider, ModelRequest, ToolSpec
from runtime.store.base import Store, ToolStateChange
from runtime.tools.base import Tool

log = logging.getLogger("runtime.engine")

_WAITED_FOR = (DatabaseUnreachable, DatabaseFull)
"""The database errors that waiting mends (a server away, a full disk): a run's failure they
refuse is tried again until it is recorded. Any other (read-only, damaged, a table missing, a
permission revoked) would refuse it the same way next time: it is logged once, not retried."""

FINISH_RETRY_MIN = 0.5
FINISH_RETRY_MAX = 10.0
"""Seconds between tries at recording a run's failure in a database that cannot be reached."""


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


class JobSteps:
    """The steps all runs of each job took, kept in memory while this process executes runs of
    the job: read once (one query) when the first execution of a job starts, then counted as
    the executions commit steps; dropped when the last one ends (the next reads it again)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._used: dict[str, list[int]] = {}
        """job id → [steps used, live executions]"""

    async def enter(self, job_id: str) -> None:
        entry = self._used.get(job_id)
        if entry is None:
            runs = await self._store.job_runs(job_id)
            if job_id in self._used:  # another execution of the job read it meanwhile
                self._used[job_id][1] += 1
                return
            self._used[job_id] = [sum(r.step for r in runs), 1]
        else:
            entry[1] += 1

    def leave(self, job_id: str) -> None:
        entry = self._used.get(job_id)
        if entry is not None:
            entry[1] -= 1
            if entry[1] <= 0:
                del self._used[job_id]

    def used(self, job_id: str) -> int:
        entry = self._used.get(job_id)
        return entry[0] if entry is not None else 0

    def count(self, job_id: str) -> None:
        entry = self._used.get(job_id)
        if entry is not None:
            entry[0] += 1


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
        extensions: Extensions,
    ) -> None:
        self._extensions = extensions
        self._store = store
        self._owner_id = owner_id
        self._catalog = catalog
        self._pump = pump
        self._model_call = model_call
        self._tool_calls = tool_calls
        self._delegation = delegation
        self._executions = executions
        self._job_steps = JobSteps(store)

    async def run_execution(self, execution: Execution) -> None:
        """The body of an execution's task; always removes it from ``executions`` at the end."""
        run_id = execution.run_id
        try:
            try:
                run = await self._store.claim_run(run_id, owner_id=self._owner_id)
            except RunStateConflict:
                return
            execution.token = run.execution_token or ""
            try:
                await self._run_steps(execution, run)
            except RunFailed as failed:
                await self._fail(execution, failed.failure)
        except OwnershipLost:
            log.info("run %s: execution superseded (cancelled or recovered)", run_id)
        except asyncio.CancelledError:
            # Cancelled by `cancel` (already committed) or by `close` (stays recoverable).
            raise
        except Exception as exc:
            log.exception("run %s failed inside the engine", run_id)
            failure = Failure(code="internal_error", message=f"{type(exc).__name__}: {exc}")
            await self._fail(execution, failure)
        finally:
            self._executions.pop(run_id, None)
            self._pump.notify()  # waiters look again: nobody executes the run here now

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

    async def _fail(self, execution: Execution, failure: Failure) -> None:
        """Record the failure. A database that cannot be reached (PostgreSQL restarting: what
        failed the run, often) is waited for: given up, the run would read ``running`` under
        this live process for as long as it lives, and nothing recovers that. So is a full disk:
        freeing space fixes it while the process lives, and the record is a few hundred bytes.
        Not any other database error (read-only, damaged, a table missing, a permission
        revoked: the same next time), nor a process going away (a worker stopping: its run is
        recovered once it is gone, as a close leaves it, and the worker stops without waiting
        out the outage). A failure not recorded is logged once, with what failed the run."""
        delay = FINISH_RETRY_MIN
        while True:
            try:
                await self._record_failure(execution, failure)
                return
            except (OwnershipLost, RunStateConflict):
                return  # cancelled or recovered meanwhile: nothing of this execution to record
            except _WAITED_FOR as error:
                if execution.release_at_step_end:
                    self._not_recorded(execution, failure, error)
                    return
                if delay == FINISH_RETRY_MIN:
                    log.warning(
                        "run %s failed (%s: %s); cannot record its failure yet (%s); trying "
                        "again until it works",
                        execution.run_id,
                        failure.code,
                        failure.message,
                        error.message,
                    )
            except AgentTuiError as error:
                self._not_recorded(execution, failure, error)
                return
            await asyncio.sleep(delay)
            delay = min(FINISH_RETRY_MAX, delay * 2)

    @staticmethod
    def _not_recorded(execution: Execution, failure: Failure, error: AgentTuiError) -> None:
        log.error(
            "run %s failed (%s: %s), and that is not recorded: %s",
            execution.run_id,
            failure.code,
            failure.message,
            error.message,
        )

    async def _record_failure(self, execution: Execution, failure: Failure) -> None:
        try:
            await self._close_open_calls(execution)
        except _WAITED_FOR:
            raise
        except AgentTuiError:
            # The run fails all the same (its calls' table refused: the run's row may not).
            log.warning("run %s: its open tool calls could not be closed", execution.run_id)
        ended = await self._store.finish_run(
            execution.run_id, token=execution.token, to=RunState.FAILED, failure=failure
        )
        with contextlib.suppress(AgentTuiError):
            await self._delegation.cancel_descendants(ended, reason="its parent run failed")

    async def _run_steps(self, execution: Execution, run: Run) -> None:
        job = await self._store.get_job(run.job_id)
        agent = self._catalog.agent(run.agent, job.workspace)
        provider = self._catalog.provider(run.model)
        all_tools = await self._catalog.tools_for(agent, workspace=job.workspace)
        self._tool_calls.publish_mcp_notices(run, job.workspace)
        self._tool_calls.publish_agent_notices(run, job.workspace)
        images = RequestImages(self._store)  # tool results' images, read once
        base_system = system_prompt(run, agent, Path(job.workspace))
        await self._job_steps.enter(run.job_id)
        try:
            await self._load(execution, run)
            extensions = await self._extensions.start(
                run,
                workspace=Path(job.workspace),
                token=execution.token,
                history=execution.history.messages,
            )
            system, tools, specs = self._step_setup(extensions, base_system, all_tools, job)
            while True:
                self._catalog.new_step()
                last = execution.history.last
                if last is not None and last.role is Role.ASSISTANT and last.tool_uses:
                    token = execution.token
                    if await self._tool_calls.settle(execution, run, last, tools, job):
                        return
                    if execution.token != token:
                        # It waited for a person inside a tool and claimed the run again:
                        # read what was committed meanwhile.
                        run = await self._store.get_run(run.id)
                        await self._load(execution, run)
                    if await self._extensions.note_phase_moves(
                        run, execution.token, extensions, execution.history.messages
                    ):
                        system, tools, specs = self._step_setup(
                            extensions, base_system, all_tools, job
                        )
                    continue
                if execution.release_at_step_end:
                    await self._store.stop_run(
                        run.id, token=execution.token, reason=GIVEN_BACK_REASON
                    )
                    return
                if run.step >= run.max_steps:
                    raise RunFailed(
                        "max_steps",
                        f"the agent used all {run.max_steps} steps without finishing",
                    )
                self._check_job_budget(run)
                messages = await self._extensions.request_messages(
                    run,
                    execution.token,
                    extensions,
                    provider=provider,
                    history=execution.history.messages,
                    system=system,
                    specs=specs,
                    context_window=self._catalog.context_window(provider, job.workspace),
                    share=self._catalog.config_for(job.workspace).defaults.compact_at,
                    workspace=job.workspace,
                )
                request = ModelRequest.model_construct(
                    model=run.model.partition(":")[2] or run.model,
                    system=system,
                    messages=await images.attach(messages),
                    tools=specs,
                    max_tokens=8192,
                    thinking_budget=None,
                    workspace=job.workspace,
                )
                if await self._model_turn(execution, run, provider, request, tools):
                    return
                run = run.model_copy(update={"step": run.step + 1})
        except RunFailed as failed:
            hooks, _ = self._catalog.hooks_for(job.workspace)
            notify_run_finished(hooks, run, job.workspace, RunState.FAILED, failed.failure.message)
            raise
        finally:
            self._job_steps.leave(run.job_id)

    def _step_setup(
        self, state: ExtensionState, base_system: str, all_tools: dict[str, Tool], job: Job
    ) -> tuple[str, dict[str, Tool], list[ToolSpec]]:
        """The system prompt, tools and offered tool specs of the next requests (until a phase
        move); compaction counts the tool definitions of a request from those specs."""
        system, tools, specs = self._extensions.step_setup(state, base_system, all_tools)
        return system, tools, self._catalog.offered(specs, job.workspace)

    async def _load(self, execution: Execution, run: Run) -> None:
        """Read what the execution keeps in memory: the history (repaired once), the calls of
        a message whose tool calls are not settled, the run's input requests."""
        history = await load_history(self._store, run)
        execution.history = history
        execution.calls.clear()
        last = history.last
        if last is not None and last.role is Role.ASSISTANT and last.tool_uses:
            execution.note_calls(await self._store.list_tool_calls(run.id, message_id=last.id))
        execution.requests = await self._store.list_input_requests(run.id)
        if history.repairs and not execution.repair_noted:
            execution.repair_noted = True  # once per execution (DESIGN §6)
            repairs = history.repairs
            names = ", ".join(sorted({r.name or r.tool_use_id for r in repairs}))
            log.info("run %s: history repaired (%d): %s", run.id, len(repairs), names)
            await self._store.record_history_repair(
                run.id,
                token=execution.token,
                repairs=[
                    RepairNote(
                        tool_use_id=r.tool_use_id,
                        tool_call_id=r.tool_call_id,
                        name=r.name,
                        action=r.action,
                    )
                    for r in repairs
                ],
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
        message, stop_reason, completed = await self._model_call.call(
            execution, run, provider, request, tools, step=step
        )
        execution.history.append(message)
        self._job_steps.count(run.job_id)
        if completed:
            hooks, _ = self._catalog.hooks_for(request.workspace)
            notify_run_finished(hooks, run, request.workspace, RunState.COMPLETED, message.text)
            return True
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
        # The last reason ``completes_run`` refuses (any other one completed the run above).
        raise RunFailed("refusal", "the model declined to continue this task")

    async def _fail_cut_calls(self, execution: Execution, run: Run, message: Message) -> None:
        cut = execution.calls_of(message.id) or []
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

    def _check_job_budget(self, run: Run) -> None:
        budget = self._catalog.config.defaults.job_step_budget
        if self._job_steps.used(run.job_id) >= budget:
            raise RunFailed(
                "job_step_budget",
                f"the job used its budget of {budget} steps across all its runs "
                "(a runaway delegation chain?); raise [defaults] job_step_budget to allow more",
            )
