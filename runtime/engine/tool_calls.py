"""Settling the tool calls of an assistant message: carry out the plan of
``runtime.engine.tool_decision`` (open the question or approval a call waits for), run the calls
concurrently, and commit their results and the step's tool message."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from runtime.answers import question_schema
from runtime.engine.catalog import Catalog, DelegateTool
from runtime.engine.delegation import ChildRun, Delegation, Outcome
from runtime.engine.execution import (
    ASK_USER,
    POLL_INTERVAL,
    Execution,
    RunFailed,
    arguments_digest,
    reclaim,
)
from runtime.engine.extensions import RouteTool, branch_input, branch_key, fan_out_result
from runtime.engine.hooked import (
    checked_first,
    hooked_after,
    hooked_before,
    notify_input_required,
)
from runtime.engine.pump import Pump
from runtime.engine.tool_decision import Plan, Stop, plan_calls
from runtime.errors import AgentTuiError, OwnershipLost, RunStateConflict, ToolOutcomeUnknown
from runtime.events import Notice, ToolProgress
from runtime.images import store_images
from runtime.models import (
    ContentBlock,
    ImageBlock,
    InputKind,
    InputRequestState,
    Job,
    Message,
    Role,
    Run,
    ToolCall,
    ToolCallState,
    ToolResultBlock,
)
from runtime.phases import requested_targets
from runtime.rewind import FILE_WRITING_TOOLS, file_content
from runtime.store.base import (
    FileContent,
    NewInputRequest,
    NewMessage,
    Store,
    ToolStateChange,
)
from runtime.tools.base import Tool, ToolContext

log = logging.getLogger("runtime.engine")


async def _started(call: ToolCall, workspace: Path) -> ToolStateChange:
    """``call`` set running, with the file a write is about to change snapshotted."""
    return ToolStateChange(
        tool_call_id=call.id, to=ToolCallState.RUNNING, file_before=await _file_now(call, workspace)
    )


async def _file_now(call: ToolCall, workspace: Path) -> FileContent | None:
    """The content of the file a write_file / edit_file call names (None for other tools)."""
    if call.name not in FILE_WRITING_TOOLS:
        return None
    return await asyncio.to_thread(file_content, call.name, call.arguments, workspace)


def _runs_beside_a_request(tool: Tool) -> bool:
    """Whether a call allowed to run may run while its batch waits for a person. Not a
    delegation or a route to phases: their child runs wait on a parent that is running."""
    return not isinstance(tool, DelegateTool | RouteTool)


class ToolCalls:
    def __init__(
        self,
        *,
        store: Store,
        catalog: Catalog,
        pump: Pump,
        delegation: Delegation,
        owner_id: str,
    ) -> None:
        self._store = store
        self._catalog = catalog
        self._pump = pump
        self._delegation = delegation
        self._owner_id = owner_id
        self._images: dict[str, list[ImageBlock]] = {}
        """tool call id → the stored images of its result, until the tool message commits."""

    def publish_mcp_notices(self, run: Run, workspace: str) -> None:
        """What a person should see about the workspace's MCP servers (configuration warnings,
        start-up failures, server warnings), as notices of ``run``."""
        for level, text in self._catalog.take_mcp_notices(workspace):
            self._pump.publish(Notice(job_id=run.job_id, run_id=run.id, level=level, text=text))

    def publish_agent_notices(self, run: Run, workspace: str) -> None:
        """Names in the ``tools`` of ``run``'s agent that name no tool, as warnings of the
        first run of that agent here."""
        for text in self._catalog.take_agent_notices(run.agent, workspace):
            self._pump.publish(Notice(job_id=run.job_id, run_id=run.id, level="warning", text=text))

    async def settle(
        self, execution: Execution, run: Run, assistant: Message, tools: dict[str, Tool], job: Job
    ) -> bool:
        """Run the tool calls of ``assistant`` and commit their results. True when the run
        stopped (input required, or failed).

        Transitions decided before anything runs (unknown tools, bad arguments, denials,
        answered questions) commit together with the calls that start; each result commits as
        soon as its call ends; the last ones commit together with the tool message (results
        in call order) and the step's checkpoint."""
        calls = execution.calls_of(assistant.id)
        if calls is None:
            calls = await self._store.list_tool_calls(run.id, message_id=assistant.id)
            execution.note_calls(calls)
        requests = execution.requests
        allowed_here = self._catalog.allowed_for_run(run.id)
        plan = plan_calls(
            calls,
            requests,
            tools,
            started_here=execution.started,
            allowed=allowed_here,
            decide=self._catalog.decider(job.workspace),
            servers_down=self._catalog.mcp_down(job.workspace),
        )
        allowed_here |= plan.allowed
        if plan.stop is not None:
            beside = [(c, t) for c, t in plan.to_run if _runs_beside_a_request(t)]
            if plan.stop.kind != "wait" and beside:
                return await self._run_while_asking(execution, run, plan, plan.stop, beside, job)
            if plan.decided:
                execution.note_calls(
                    await self._store.set_tool_states(
                        run.id, token=execution.token, changes=plan.decided
                    )
                )
            await self._ask(execution, run, plan.stop, job)
            return True
        workspace = Path(job.workspace)
        await self._start(execution, run, plan, workspace)
        last_changes = await self._run_calls(execution, run, plan.to_run, workspace)
        # A form the calls asked for and that is still open can no longer be answered (its
        # server session ended with the call, or the call timed out): withdraw it.
        while execution.asked:
            await self._withdraw_request(execution, run, execution.asked.pop())
        return await self._commit_results(execution, run, assistant, calls, last_changes)

    async def _ask(self, execution: Execution, run: Run, stop: Stop, job: Job) -> None:
        """Open the question or approval the batch waits for (the run: ``input_required``)."""
        if stop.kind == "question" and stop.call is not None:
            await self._ask_question(execution, run, stop.call)
        elif stop.kind == "approval" and stop.call and stop.tool:
            await self._ask_approval(execution, run, stop.call, stop.tool, job)
        if stop.call is not None:
            notify_input_required(
                self._catalog.hooks_for(job.workspace)[0], run, stop.call, job.workspace
            )

    async def _run_while_asking(
        self,
        execution: Execution,
        run: Run,
        plan: Plan,
        stop: Stop,
        beside: list[tuple[ToolCall, Tool]],
        job: Job,
    ) -> bool:
        """Run the calls the policy allows while the batch waits for a person (``stop``):
        they start, the request opens, and each result commits as its call ends, as usual
        (never run twice after a crash; their progress streams meanwhile). The step's tool
        message waits until every call of the batch settled. True when the run stopped
        (nobody answered while they ran: the answer starts a new execution); False when the
        answer came meanwhile and this execution claimed the run again (``take_back``): the
        batch is settled again, with the answer."""
        workspace = Path(job.workspace)
        await self._start(execution, run, replace(plan, to_run=beside), workspace)
        execution.awaiting = asyncio.get_running_loop().create_future()
        try:
            await self._ask(execution, run, stop, job)
            last_changes = await self._run_calls(execution, run, beside, workspace)
            async with execution.writing:
                if last_changes:
                    try:
                        changed = await self._store.set_tool_states(
                            run.id, token=execution.token, changes=last_changes
                        )
                    except OwnershipLost:
                        # Answered from another process, and not handed back yet.
                        if not await reclaim(self._store, self._owner_id, execution):
                            raise
                        changed = await self._store.set_tool_states(
                            run.id, token=execution.token, changes=last_changes
                        )
                    execution.note_calls(changed)
                answered = execution.awaiting.done()
                # From here on, an answer starts a new execution: this one ends without
                # giving the event loop a turn (``Dispatch.go_on``).
                execution.awaiting = None
        finally:
            execution.awaiting = None
        return not answered

    async def _start(self, execution: Execution, run: Run, plan: Plan, workspace: Path) -> None:
        """Commit the decided transitions, and start the calls about to run. A call that
        before-tool hooks check first stays ``pending`` until they let it through
        (``_hooked``): a slow hook showed the call running, and a kill meanwhile left a call
        that never ran indeterminate."""
        hooks, _ = self._catalog.hooks_for(str(workspace))
        starting = plan.decided + [
            await _started(call, workspace)
            for call, _ in plan.to_run
            if call.id not in plan.already_running and not checked_first(hooks, call.name)
        ]
        if starting:
            execution.note_calls(
                await self._store.set_tool_states(run.id, token=execution.token, changes=starting)
            )

    async def _commit_results(
        self,
        execution: Execution,
        run: Run,
        assistant: Message,
        calls: list[ToolCall],
        last_changes: list[ToolStateChange],
    ) -> bool:
        final = dict(execution.calls)
        for change in last_changes:
            final[change.tool_call_id] = final[change.tool_call_id].model_copy(
                update={"state": change.to, "result": change.result, "error": change.error}
            )
        settled = [final[c.id] for c in calls]
        doubtful = [c for c in settled if c.state is ToolCallState.INDETERMINATE]
        if doubtful or any(not c.state.is_terminal for c in settled):
            if last_changes:
                execution.note_calls(
                    await self._store.set_tool_states(
                        run.id, token=execution.token, changes=last_changes
                    )
                )
            if not doubtful:
                return True
            for call in settled:
                self._images.pop(call.id, None)
            names = ", ".join(c.name for c in doubtful)
            raise RunFailed(
                "tool_indeterminate",
                f"the outcome of {names} is unknown (it may have acted); retry from the last "
                "checkpoint or fork once you have checked",
            )
        blocks: list[ContentBlock] = [
            ToolResultBlock(
                tool_use_id=c.provider_id,
                tool_call_id=c.id,
                content=(c.result if c.state is ToolCallState.COMPLETED else c.error) or "",
                is_error=c.state is not ToolCallState.COMPLETED,
                images=self._images.pop(c.id, []),
            )
            for c in settled
        ]
        finished, tool_message, _ = await self._store.finish_step(
            run.id,
            token=execution.token,
            tool_changes=last_changes,
            message=NewMessage(role=Role.TOOL, content=blocks),
            checkpoint_step=calls[0].step if calls else run.step,
        )
        execution.note_calls(finished)
        if tool_message is not None:
            execution.history.append(tool_message)
        return False

    async def _ask_question(self, execution: Execution, run: Run, call: ToolCall) -> None:
        options = [str(o) for o in call.arguments.get("options") or []]
        free = bool(call.arguments.get("allow_free_text", True))
        await self._store.open_input_request(
            run.id,
            token=execution.token,
            request=NewInputRequest(
                kind=InputKind.QUESTION,
                prompt=str(call.arguments.get("question", "")),
                options=options,
                answer_schema=question_schema(options, allow_free_text=free),
                tool_call_id=call.id,
                arguments_digest=arguments_digest(call.arguments),
                detail={"tool": ASK_USER, "allow_free_text": free},
            ),
        )

    async def _ask_approval(
        self, execution: Execution, run: Run, call: ToolCall, tool: Tool, job: Job
    ) -> None:
        from runtime.answers import APPROVAL_SCHEMA

        ctx = ToolContext(workspace=Path(job.workspace), run_id=run.id, job_id=run.job_id)
        try:
            detail = dict(tool.approval_detail(call.arguments, ctx))
        except AgentTuiError as exc:
            detail = {"note": str(exc)}
        detail.update({"tool": call.name, "arguments": call.arguments})
        await self._store.open_input_request(
            run.id,
            token=execution.token,
            request=NewInputRequest(
                kind=InputKind.APPROVAL,
                prompt=f"Allow {call.name}?",
                options=["allow_once", "allow_run", "allow_always", "deny"],
                answer_schema=APPROVAL_SCHEMA,
                tool_call_id=call.id,
                arguments_digest=arguments_digest(call.arguments),
                detail=detail,
            ),
        )

    async def _run_one(
        self, execution: Execution, run: Run, call: ToolCall, tool: Tool, workspace: Path
    ) -> Outcome:
        if isinstance(tool, DelegateTool):
            return await self._hooked(
                run,
                call,
                workspace,
                lambda: self._delegation.delegate(execution, run, call, tool),
                execution=execution,
                delegation=True,
            )
        if isinstance(tool, RouteTool):
            targets = tool.parallel_targets(call.arguments) or await self._fanned_out(call)
            if targets:
                return await self._hooked(
                    run,
                    call,
                    workspace,
                    lambda: self._route_in_parallel(run, call, tool.source, targets),
                    execution=execution,
                    delegation=True,
                )
        ctx = ToolContext(
            workspace=workspace,
            run_id=run.id,
            job_id=run.job_id,
            tool_call_id=call.id,
            progress=self._progress_publisher(run, call),
            request_input=self._input_requester(execution, run, call),
            shell_network=self._catalog.config_for(str(workspace)).permissions.shell_network,
        )
        return await self._hooked(
            run, call, workspace, lambda: self._run_tool(run, call, tool, ctx), execution=execution
        )

    async def _hooked(
        self,
        run: Run,
        call: ToolCall,
        workspace: Path,
        carry_out: Callable[[], Awaitable[Outcome]],
        *,
        execution: Execution,
        delegation: bool = False,
    ) -> Outcome:
        """``carry_out`` between the workspace's before-tool and after-tool hooks. A delegation
        call that already has its child run (re-attached after a restart) was let through
        before: its before-tool hooks do not run again. A call still ``pending`` (checked by
        hooks first) is ``running`` from when they let it through; meanwhile it shows which
        hook it waits for (``tool_progress``)."""
        hooks, _ = self._catalog.hooks_for(str(workspace))
        if hooks.before_tool and not (
            delegation and await self._store.child_run_for_tool_call(call.id) is not None
        ):
            publish = self._progress_publisher(run, call)
            refusal = await hooked_before(
                hooks, run, call, workspace, checking=lambda text: publish(0, None, text)
            )
            if refusal is not None:
                return ToolCallState.FAILED, None, refusal
        if execution.calls.get(call.id, call).state is ToolCallState.PENDING:
            started = await _started(call, workspace)
            execution.note_calls(
                await self._store.set_tool_states(run.id, token=execution.token, changes=[started])
            )
        outcome = await carry_out()
        if hooks.after_tool and outcome[0] is not ToolCallState.INDETERMINATE:
            outcome = await hooked_after(hooks, run, call, workspace, outcome)
        return outcome

    async def _fanned_out(self, call: ToolCall) -> tuple[str, ...] | None:
        """The phases of a ``route`` call that already started its child runs (a resumed
        parent): the fan-out was decided when the call was made, so the parent waits for them
        even if the phases changed since, rather than deciding again and leaving them behind."""
        targets = requested_targets(call.arguments.get("phase"))
        if targets is None or len(targets) < 2:
            return None
        if await self._store.child_run_for_tool_call(call.id) is None:
            return None
        return targets

    async def _route_in_parallel(
        self, run: Run, call: ToolCall, source: str, targets: tuple[str, ...]
    ) -> Outcome:
        """A ``route`` to several phases: each runs as a child run in its phase (the
        delegation machinery: durable, re-attached after a restart); their answers are the
        call's result, and the run goes on in ``source``."""
        children = [
            ChildRun(
                input=branch_input(source, target, call.arguments),
                idempotency_key=branch_key(call.id, target),
            )
            for target in targets
        ]
        ended = await self._delegation.run_children(run, call, children)
        return fan_out_result(
            source, [(t, child, o) for t, (child, o) in zip(targets, ended, strict=True)]
        )

    async def _run_tool(self, run: Run, call: ToolCall, tool: Tool, ctx: ToolContext) -> Outcome:
        try:
            output = await tool.run(dict(call.arguments), ctx)
        except ToolOutcomeUnknown as exc:
            return ToolCallState.INDETERMINATE, None, str(exc)
        except AgentTuiError as exc:
            return ToolCallState.FAILED, None, str(exc)
        except Exception as exc:
            log.exception("tool %s crashed", call.name)
            return ToolCallState.FAILED, None, f"{call.name} crashed: {exc}"
        finally:
            self.publish_mcp_notices(run, str(ctx.workspace))
        if output.is_error:
            return ToolCallState.FAILED, None, output.content
        if output.images:
            # Stored once by hash; the result refers to them and the model gets them as images.
            self._images[call.id] = await store_images(self._store, output.images)
        return ToolCallState.COMPLETED, output.content, None

    async def _run_calls(
        self,
        execution: Execution,
        run: Run,
        to_run: list[tuple[ToolCall, Tool]],
        workspace: Path,
    ) -> list[ToolStateChange]:
        """Run the calls concurrently (bounded). Each result commits as soon as its call ends,
        in whatever order they finish; the last ones are returned uncommitted, to commit with
        the tool message (whose results are in call order)."""
        if not to_run:
            return []
        limit = asyncio.Semaphore(self._catalog.config.defaults.max_parallel_tools)

        left: dict[str, FileContent] = {}

        async def one(call: ToolCall, tool: Tool) -> Outcome:
            async with limit:
                try:
                    return await self._run_one(execution, run, call, tool, workspace)
                finally:
                    # What a write left in its file, recorded with its result.
                    after = await _file_now(call, workspace)
                    if after is not None:
                        left[call.id] = after

        tasks = {asyncio.create_task(one(call, tool)): call for call, tool in to_run}
        ready: list[ToolStateChange] = []
        try:
            pending = set(tasks)
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                ready += [
                    self._change(tasks[task], task.result(), left.get(tasks[task].id))
                    for task in done
                ]
                if pending:
                    # Each result commits as soon as it is in (a finished call is never left
                    # to look indeterminate after a crash); the last ones commit with the
                    # tool message, which lists them in call order.
                    try:
                        execution.note_calls(
                            await self._store.set_tool_states(
                                run.id, token=execution.token, changes=ready
                            )
                        )
                    except OwnershipLost:
                        if execution.awaiting is None:
                            raise
                        continue  # answered meanwhile, not handed back yet: commit them later
                    ready = []
        finally:
            unfinished: list[asyncio.Task[Outcome]] = []
            for task in tasks:
                if not task.done():
                    task.cancel()
                    unfinished.append(task)
                elif not task.cancelled():
                    task.exception()  # retrieved (as gathering it would): never logged as lost
            if unfinished:
                # Gathering calls that all ended would only cost a turn of the loop.
                await asyncio.gather(*unfinished, return_exceptions=True)
        return ready

    def _change(
        self, call: ToolCall, outcome: Outcome, file_after: FileContent | None = None
    ) -> ToolStateChange:
        state, result, error = outcome
        return ToolStateChange(
            tool_call_id=call.id,
            to=state,
            result=result,
            error=error,
            child_run_id=self._delegation.take_child(call.id),
            file_after=file_after,
        )

    def _progress_publisher(
        self, run: Run, call: ToolCall
    ) -> Callable[[float, float | None, str | None], None]:
        def publish(done: float, total: float | None, message: str | None) -> None:
            self._pump.publish(
                ToolProgress(
                    job_id=run.job_id,
                    run_id=run.id,
                    tool_call_id=call.id,
                    progress=done,
                    total=total,
                    message=message,
                )
            )

        return publish

    def _input_requester(
        self, execution: Execution, run: Run, call: ToolCall
    ) -> Callable[[NewInputRequest], Awaitable[Any]]:
        async def request_input(new_request: NewInputRequest) -> Any:
            if new_request.tool_call_id is None:
                new_request = new_request.model_copy(update={"tool_call_id": call.id})
            _, request = await self._store.open_input_request(
                run.id, token=execution.token, request=new_request
            )
            execution.asked.add(request.id)
            future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            execution.elicitations[request.id] = future
            try:
                return await self._await_answer(execution, run, request.id, future)
            finally:
                execution.elicitations.pop(request.id, None)

        return request_input

    async def _await_answer(
        self, execution: Execution, run: Run, request_id: str, future: asyncio.Future[Any]
    ) -> Any:
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(POLL_INTERVAL * 2):
                    return await asyncio.shield(future)
            # The answer may come from another process (`agent-tui respond` in a shell): this
            # process holds the server session, so it picks it up.
            stored = await self._store.get_input_request(request_id)
            if stored.state is InputRequestState.PENDING:
                continue
            try:
                claimed = await self._store.claim_run(run.id, owner_id=self._owner_id)
            except RunStateConflict:
                if stored.state is InputRequestState.ANSWERED:
                    continue  # answered in this process: `respond` claimed it
                return {"action": "cancel"}
            execution.token = claimed.execution_token or ""
            if stored.state is InputRequestState.ANSWERED:
                return stored.answer
            return {"action": "cancel"}

    async def _withdraw_request(self, execution: Execution, run: Run, request_id: str) -> None:
        with contextlib.suppress(AgentTuiError):
            stored = await self._store.get_input_request(request_id)
            if stored.state is not InputRequestState.PENDING:
                return
            await self._store.cancel_input_request(
                request_id,
                token=execution.token,
                reason="the tool that asked stopped before it was answered",
            )
            # The run went back to the queue with the request; this execution goes on.
            claimed = await self._store.claim_run(run.id, owner_id=self._owner_id)
            execution.token = claimed.execution_token or ""
