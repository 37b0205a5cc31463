"""The public ``Runtime`` (DESIGN §7): a facade over the engine (``runtime.engine``).

One ``Runtime`` per process: it holds an owner lease on the store, executes the runs it queued
(start, respond, retry, fork, follow-up) as asyncio tasks, and fans events out to observers.
The engine keeps no state that matters outside the store: every execution can stop at any await
and the next one resumes from what was committed. ``Runtime.open`` (``runtime.compose``) builds
one from a database path and a workspace.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Unpack

from runtime.answers import checked_answer
from runtime.clock import Clock
from runtime.config import Config
from runtime.consumers import Consumer
from runtime.engine.assembly import build_engine
from runtime.engine.context_usage import ContextUsage, context_usage
from runtime.engine.delegation import next_boundary
from runtime.engine.execution import (
    LEASE_SECONDS,
    Execution,
    Launcher,
    ProviderFactory,
    SleepFn,
    arguments_digest,
)
from runtime.engine.extensions import ExtensionPoints
from runtime.engine.fairness import share_the_gil
from runtime.engine.pump import stop_once
from runtime.engine.retries import UnknownChoice, create_retry_run, unknown_calls
from runtime.errors import AgentTuiError, InvalidInput, RevisionConflict, RunStateConflict
from runtime.events import DurableEvent, Event, RunStateChanged
from runtime.history import all_messages, last_message
from runtime.models import (
    Boundary,
    Checkpoint,
    InputKind,
    InputRequest,
    InputRequestState,
    Job,
    Message,
    Run,
    RunState,
    SearchHit,
    ToolCall,
)
from runtime.store.base import NewRun, Page, RecoveryReport, Store
from runtime.store.rules import active_root_conflict, fork_title
from runtime.tools.base import Tool

if TYPE_CHECKING:
    from runtime.compose import OpenOptions
    from runtime.mcp.manager import McpManager

CLOSED_REASON = "stopped when agent-tui closed"
"""``RunStateChanged.reason`` of a run this process stopped on a deliberate close."""
DEMO_NOTICE = "Using the offline demo model — set ANTHROPIC_API_KEY to use Claude."


class Runtime:
    """One in-process runtime: an owner lease on a store, the engine, providers and tools."""

    recovery: RecoveryReport

    def __init__(
        self,
        store: Store,
        *,
        workspace: Path,
        config: Config,
        owner_id: str,
        default_model: str,
        providers: ProviderFactory,
        tools: dict[str, Tool],
        mcp: Any = None,
        clock: Clock,
        sleep: SleepFn = asyncio.sleep,
        lease_seconds: float = LEASE_SECONDS,
        read_only: bool = False,
        check_model: Callable[[str], None] | None = None,
    ) -> None:
        self.store = store
        self.workspace = workspace
        self.owner_id = owner_id
        self._default_model = default_model
        self._background: list[asyncio.Task[None]] = []
        self._closing = asyncio.Event()
        self._closed = False
        self.recovery = RecoveryReport()
        engine = build_engine(
            store=store,
            owner_id=owner_id,
            config=config,
            workspace=workspace,
            providers=providers,
            tools=tools,
            mcp=mcp,
            clock=clock,
            sleep=sleep,
            lease_seconds=lease_seconds,
            read_only=read_only,
            check_model=check_model,
            launcher=Launcher(launch=self._launch, cancel=self._cancel_for_engine),
        )
        self._bus = engine.bus
        self._executions = engine.executions
        self._catalog = engine.catalog
        self._pump = engine.pump
        self._leases = engine.leases
        self._executor = engine.executor
        self._model_call = engine.model_call
        self.dispatch = engine.dispatch  # where runs execute: here, or in workers
        self.extensions = ExtensionPoints(store, engine.catalog, workspace)

    # --- lifecycle -----------------------------------------------------------------------------
    @classmethod
    async def open(cls, **options: Unpack[OpenOptions]) -> Runtime:
        """Open the database (migrating it) and recover the runs of owners that are provably
        gone (``runtime.compose.open_runtime``, which documents the options). ``read_only``:
        never write (for commands and views that only look)."""
        from runtime.compose import open_runtime

        return await open_runtime(cls, **options)

    @property
    def config(self) -> Config:
        """This folder's configuration (with the "always allow" rules saved since open)."""
        return self._catalog.config

    @property
    def mcp(self) -> McpManager | None:
        return self._catalog.mcp

    async def start_engine(self) -> None:
        """Recover the runs of owners that are provably gone and start the event pump (and,
        unless read-only, the recovery loop). The owner lease is taken on the first execution."""
        loop = asyncio.get_running_loop()
        self._background.append(loop.create_task(share_the_gil(self._closing)))
        if self._leases.read_only:
            self._pump.start_after(await self.store.last_seq())
            self._background.append(loop.create_task(self._pump.loop(self._closing)))
            return
        self.recovery = await self._leases.recover()
        self._pump.start_after(await self.store.last_seq())
        await self._leases.settle(self.recovery)
        self._background.append(loop.create_task(self._leases.recovery_loop(self._closing)))
        self._background.append(loop.create_task(self._pump.loop(self._closing)))
        resume = self.recovery.requeued + self.recovery.interrupted_queued
        if self.config.defaults.auto_resume and resume:
            await self._leases.ensure()
            for run_id in resume:
                self._launch(run_id)

    @property
    def read_only(self) -> bool:
        """Opened to read only: it never writes to the database (no lease, no recovery)."""
        return self._leases.read_only

    async def close(self) -> None:
        """Stop executions (their runs stay recoverable) and release the owner lease."""
        if self._closed:
            return
        self._closing.set()
        executions = [e for e in self._executions.values() if e.task is not None]
        tasks = [e.task for e in executions if e.task is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=5)
        for execution in executions:
            # A deliberate close, not a crash: say so on the run (the next launch shows it).
            with contextlib.suppress(AgentTuiError, OSError):
                await self.store.stop_run(
                    execution.run_id, token=execution.token, reason=CLOSED_REASON
                )
        with contextlib.suppress(AgentTuiError, OSError):
            await self._pump.pump()
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        self._bus.close()
        with contextlib.suppress(AgentTuiError, OSError):
            await self._leases.release()
        await self._catalog.aclose()
        await self.store.close()
        self._closed = True

    async def __aenter__(self) -> Runtime:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- models --------------------------------------------------------------------------------
    @property
    def default_model(self) -> str:
        """The model reference new runs use (``demo`` when no API key is configured)."""
        return self._default_model

    @property
    def model_notice(self) -> str | None:
        """Plain words for people when the demo model is the default, else None."""
        return DEMO_NOTICE if self._default_model.startswith("demo") else None

    def context_window(self, model: str, *, workspace: str | None = None) -> int:
        """``[defaults] context_window`` of ``workspace``, else ``model``'s (or ConfigError)."""
        return self._catalog.context_window(self._catalog.provider(model), workspace)

    def check_model(self, model: str) -> None:
        """``ConfigError`` when ``start`` would refuse ``model`` (no such provider, no key)."""
        self._catalog.check_model(model)

    def check_agent(self, name: str) -> None:
        """``InvalidInput`` when ``start`` would refuse agent ``name`` (the config files read
        again when they changed: an agent added while the process runs is known)."""
        self._catalog.agent(name)

    # --- starting runs -------------------------------------------------------------------------
    async def start(
        self,
        input: str,
        *,
        agent: str | None = None,
        model: str | None = None,
        job_id: str | None = None,
        idempotency_key: str | None = None,
        detached: bool = False,
        title: str | None = None,
    ) -> Run:
        """Create a run in a new job (or ``job_id``; ``title``: the job's) and execute it."""
        if not isinstance(input, str) or not input.strip():
            raise InvalidInput("the prompt is empty: say what the agent should do")
        if job_id is not None:
            return await self.follow_up(job_id, input, agent=agent, model=model)
        agent_name = agent or self.config.defaults.agent
        agent_config = self._catalog.agent(agent_name)
        reference = model or agent_config.model or self._default_model
        self._catalog.check_model(reference, agent=None if model else agent_name)  # no run yet
        return await self.dispatch.create(
            NewRun(
                agent=agent_name,
                model=reference,
                input=input.strip(),
                workspace=str(self.workspace),
                idempotency_key=idempotency_key,
                owner_id=None if detached else self.owner_id,
                max_steps=agent_config.max_steps or self.config.defaults.max_steps,
                detached=detached,
                title=title,
            )
        )

    async def follow_up(
        self, job_id: str, input: str, *, agent: str | None = None, model: str | None = None
    ) -> Run:
        if not isinstance(input, str) or not input.strip():
            raise InvalidInput("the follow-up is empty: say what the agent should do next")
        job = await self.store.get_job(job_id)
        roots = [r for r in await self.store.job_runs(job_id) if r.parent_run_id is None]
        active = [r for r in roots if not r.state.is_terminal]
        if active:
            raise active_root_conflict(active[-1])
        previous = roots[-1] if roots else None
        agent_name = agent or (previous.agent if previous else job.agent)
        agent_config = self._catalog.agent(agent_name, job.workspace)
        reference = model or agent_config.model_after(agent_name, previous) or self._default_model
        self._catalog.check_model(reference)
        history_position, detached = None, previous is not None and previous.detached
        if previous is not None:
            last = await last_message(self.store, previous.id)
            history_position = last.position if last else -1
        return await self.dispatch.create(
            NewRun(
                job_id=job_id,
                agent=agent_name,
                model=reference,
                input=input.strip(),
                workspace=job.workspace,
                history_run_id=previous.id if previous else None,
                history_position=history_position,
                owner_id=None if detached else self.owner_id,
                max_steps=agent_config.max_steps or self.config.defaults.max_steps,
                detached=detached,
            )
        )

    async def retry(self, run_id: str, *, unknown: UnknownChoice | None = None) -> Run:
        """Interrupted run: execute it again from its committed state. Failed or cancelled run:
        a new run in the same job continuing from its last checkpoint. When its last step left
        a call whose outcome is unknown (``unknown_calls``), the caller chooses: ``rerun`` it
        or ``skip`` it (the model is told the outcome is unknown); without a choice this raises
        ``InvalidInput`` naming the call. Returns the run that executes."""
        run = await self.store.get_run(run_id)
        if run.state is RunState.QUEUED:
            if run_id not in self._executions and not run.detached:  # workers take those
                self._catalog.check_model(run.model)
                await self._leases.ensure()
                self._launch(run_id)
            return run
        if run.state in (RunState.RUNNING, RunState.INPUT_REQUIRED):
            raise RunStateConflict(
                f"run {run_id} is {run.state.value}; only an interrupted, failed or cancelled "
                "run can be retried"
            )
        if run.state is RunState.COMPLETED:
            raise RunStateConflict(f"run {run_id} completed; use follow-up to continue its job")
        self._catalog.check_model(run.model)  # a missing key adds no failed run
        new_run = await create_retry_run(
            self.store, run, owner_id=self.owner_id, unknown=unknown, ready=self._leases.ensure
        )
        self._launch(new_run.id)
        return new_run

    async def unknown_calls(self, run_id: str) -> list[ToolCall]:
        """The calls of the run's last step whose outcome is unknown (retry must choose)."""
        return (await unknown_calls(self.store, await self.store.get_run(run_id)))[1]

    async def fork(self, checkpoint_id: str, input: str | None = None) -> Run:
        """A new job whose history is the checkpoint's; runs at once. InvalidInput when its
        agent is unknown now, or with no ``input`` at the step where the run gave its answer."""
        checkpoint = await self.store.get_checkpoint(checkpoint_id)
        source = await self.store.get_run(checkpoint.run_id)
        job = await self.store.get_job(source.job_id)
        self._catalog.agent(source.agent, job.workspace)  # not a job whose run fails at once
        text = input.strip() if input and input.strip() else None
        if text is None and source.state is RunState.COMPLETED:
            last = (await self.store.list_checkpoints(source.id))[-1]
            if last.id == checkpoint.id:
                raise InvalidInput(
                    f"run {source.id[:8]} ended at step {checkpoint.step} with its answer: "
                    "give the fork a first message to go on with"
                )
        return await self.dispatch.create(
            NewRun(
                agent=source.agent,
                model=source.model,
                input=text,
                workspace=job.workspace,
                title=fork_title(job.title, checkpoint.step, text),
                history_run_id=source.id,
                history_position=checkpoint.last_position,
                forked_from_checkpoint_id=checkpoint.id,
                owner_id=self.owner_id,
                max_steps=source.max_steps,
            )
        )

    async def respond(
        self,
        run_id: str,
        request_id: str,
        value: Any,
        *,
        idempotency_key: str | None = None,
        detach: bool = False,
    ) -> Run:
        """Answer the open request (validated) and continue the run in this process; with
        ``detach``, leave it to the process that owns it (``RunStateConflict`` if none is
        alive) or, for a run queued for workers, to them."""
        request, run, answer = await checked_answer(
            self.store, run_id, request_id, value, idempotency_key=idempotency_key
        )
        elicitation = request.kind is InputKind.ELICITATION
        here = await self.dispatch.goes_on_here(run, elicitation=elicitation, detach=detach)
        run, request = await self.store.answer_input_request(
            request_id,
            answer=answer,
            idempotency_key=idempotency_key,
            expected_revision=None if idempotency_key else run.revision,
            owner_id=self.owner_id if here else None,
        )
        if (
            request.kind is InputKind.APPROVAL
            and answer["decision"] == "allow_always"
            and request.detail.get("tool")
        ):
            job = await self.store.get_job(run.job_id)
            self._catalog.save_always_rule(str(request.detail["tool"]), job.workspace)
        self._pump.notify()
        future = self._find_elicitation(request.id)
        if future is not None:
            execution = self._executions[run_id]
            try:
                claimed = await self.store.claim_run(run_id, owner_id=self.owner_id)
            except RunStateConflict:
                return await self.store.get_run(run_id)  # the waiting call claimed it first
            execution.token = claimed.execution_token or ""
            if not future.done():
                future.set_result(answer)
            return claimed
        if here and run.state is RunState.QUEUED:
            await self.dispatch.go_on(run)
        return run

    def _find_elicitation(self, request_id: str) -> asyncio.Future[Any] | None:
        for execution in self._executions.values():
            future = execution.elicitations.get(request_id)
            if future is not None:
                return future
        return None

    async def cancel(self, run_id: str, *, reason: str | None = None) -> Run:
        if self._leases.read_only:
            raise InvalidInput("this agent-tui was opened read-only; it cannot cancel runs")
        run = await self.store.get_run(run_id)
        if run.state.is_terminal:
            raise RunStateConflict(f"run {run_id} already {run.state.value}")
        execution = self._executions.get(run_id)
        save_shown = execution.save_shown if execution is not None else None
        # The last draft save while the token still writes (all that was shown), and the usage
        # of that message so far, for the cancel to count: providers report it at the end.
        cut_short = await save_shown() if save_shown is not None else None
        try:
            cancelled = await self.store.cancel_run(
                run_id, reason=reason, expected_revision=run.revision, cut_short=cut_short
            )
        except RevisionConflict:
            # It moved on since we read it (a step ended); cancel what it is now.
            cancelled = await self.store.cancel_run(run_id, reason=reason, cut_short=cut_short)
        self._pump.notify()
        execution = self._executions.get(run_id)
        if execution is not None and execution.task is not None:
            stop_once(execution.task)
            # Tools stop promptly (a shell's process group is killed); bounded all the same.
            await asyncio.wait({execution.task}, timeout=5)
        # The parent first, so it does not go on with its children's errors; then the children.
        for child in await self.store.job_runs(run.job_id):
            if child.parent_run_id == run_id and not child.state.is_terminal:
                with contextlib.suppress(RunStateConflict):
                    await self.cancel(child.id, reason="its parent run was cancelled")
        return cancelled

    # --- observing -----------------------------------------------------------------------------
    def observe(
        self,
        run_id: str | None = None,
        *,
        job_id: str | None = None,
        after: int | None = None,
        live: Callable[[str], bool] | None = None,
    ) -> AsyncIterator[Event]:
        """Durable events from the cursor on interleaved with live transient ones (§6).

        ``run_id`` None and ``job_id`` None: every run. ``after`` None: from now on.
        ``live(run_id)``: whose deltas and tool progress to deliver (None: every run's); the
        durable events of every run observed come whatever it says."""
        return self._pump.observe(run_id, job_id=job_id, after=after, live=live)

    async def wait(self, run_id: str, *, timeout: float | None = None) -> Boundary:
        """The run's next boundary: terminal, or input_required with its open request (of the
        run or of a delegated descendant)."""
        async with asyncio.timeout(timeout):
            while True:
                boundary = await self._boundary(run_id)
                if boundary is not None:
                    return boundary
                await self._pump.await_run_change()

    async def wait_answered(self, request_id: str, *, timeout: float | None = None) -> InputRequest:
        """Wait until a request is answered or cancelled, here or by another process."""
        async with asyncio.timeout(timeout):
            while True:
                request = await self.store.get_input_request(request_id)
                if request.state is not InputRequestState.PENDING:
                    return request
                await self._pump.await_progress()

    def holds_session(self, request: InputRequest) -> bool:
        """An MCP elicitation whose server session lives in this process: it can only be
        answered while this process runs (from here, or by `respond` from another shell)."""
        return request.kind is InputKind.ELICITATION and request.run_id in self._executions

    async def calls_ended(self, run_id: str) -> None:
        """Until the calls this process runs for ``run_id`` beside its open request ended: a
        client that leaves at ``input_required`` would cut them short."""
        await self.dispatch.calls_ended(run_id)

    def give_way_to_input(self, pending: Callable[[], bool]) -> None:
        """While ``pending()`` (a person's key waits for this event loop), the runs streaming
        here give the loop up every few events (as a browser's ``isInputPending``)."""
        self._model_call.input_pending = pending

    async def get_request(self, request_id: str) -> InputRequest:
        return await self.store.get_input_request(request_id)

    async def events(
        self,
        *,
        after: int = 0,
        limit: int = 500,
        run_id: str | None = None,
        job_id: str | None = None,
    ) -> list[DurableEvent]:
        """Durable events after a cursor, oldest first (paged); for clients that poll."""
        return await self.store.read_events(
            after=after, limit=_limit(limit), run_id=run_id, job_id=job_id
        )

    async def last_seq(self) -> int:
        """The cursor of the newest durable event (for ``observe(after=...)``)."""
        return await self.store.last_seq()

    async def _boundary(self, run_id: str) -> Boundary | None:
        found = await next_boundary(
            self.store, run_id, executing=self._executions, owner_id=self.owner_id
        )
        return None if found is None else Boundary(run=found[0], request=found[1])

    # --- queries -------------------------------------------------------------------------------
    async def get_job(self, job_id: str) -> Job:
        return await self.store.get_job(job_id)

    async def get_run(self, run_id: str) -> Run:
        return await self.store.get_run(run_id)

    async def list_jobs(
        self,
        *,
        cursor: str | None = None,
        limit: int = 50,
        state: RunState | None = None,
        interrupted: bool | None = None,
    ) -> Page[Job]:
        """``interrupted``: as ``Store.list_jobs`` (False with ``state=QUEUED``: the jobs about
        to start, not those an interrupted run holds until a person retries it)."""
        return await self.store.list_jobs(
            cursor=cursor, limit=_limit(limit), state=state, interrupted=interrupted
        )

    async def list_runs(
        self, *, cursor: str | None = None, limit: int = 50, state: RunState | None = None
    ) -> Page[Run]:
        return await self.store.list_runs(cursor=cursor, limit=_limit(limit), state=state)

    async def job_runs(self, job_id: str) -> list[Run]:
        await self.store.get_job(job_id)
        return await self.store.job_runs(job_id)

    async def messages(
        self,
        run_id: str,
        *,
        after_position: int = -1,
        before_position: int | None = None,
        limit: int = 200,
    ) -> list[Message]:
        return await self.store.list_messages(
            run_id,
            after_position=after_position,
            before_position=before_position,
            limit=_limit(limit, 10_000),
        )

    async def all_messages(self, run_id: str) -> list[Message]:
        """Every message of one run, in order (exports, `show`); paged reads underneath."""
        return await all_messages(self.store, run_id)

    async def tool_calls(self, run_id: str) -> list[ToolCall]:
        return await self.store.list_tool_calls(run_id)

    async def checkpoints(self, run_id: str) -> list[Checkpoint]:
        return await self.store.list_checkpoints(run_id)

    async def open_request(self, run_id: str) -> InputRequest | None:
        requests = await self.store.pending_input_requests(run_id=run_id, limit=1)
        return requests[0] if requests else None

    async def current_request(self, request: InputRequest) -> InputRequest:
        """``request`` as a client should show it now (``runtime.approval_detail.as_of_now``)."""
        from runtime.approval_detail import as_of_now

        return await as_of_now(self.store, request)

    async def inbox(self, *, limit: int = 100) -> list[InputRequest]:
        """Every open input request across jobs, oldest first."""
        return await self.store.pending_input_requests(limit=_limit(limit))

    async def search(self, query: str, *, limit: int = 50) -> list[SearchHit]:
        if not query.strip():
            return []
        return await self.store.search_messages(query, limit=_limit(limit))

    async def context_usage(self, job_id: str) -> ContextUsage:
        """What the job's next request would hold, estimated (``/context``)."""
        return await context_usage(self.store, self._catalog, job_id)

    async def counts(self) -> dict[RunState, int]:
        return await self.store.count_runs_by_state()

    async def export_job(self, job_id: str, *, format: Literal["md", "json"] = "md") -> str:
        from runtime.export import export_job

        return await export_job(self.store, job_id, format=format)

    def consume(self, consumer_id: str, *, after: int | None = None) -> Consumer:
        """Every durable event at least once, in order; ``ack`` saves the cursor (a
        ``runtime.consumers.Consumer``)."""
        return Consumer(
            self.store, consumer_id, after=after, wait_for_change=self.dispatch.await_change
        )

    # --- execution -----------------------------------------------------------------------------
    def _launch(self, run_id: str) -> None:
        if self._closing.is_set() or self.dispatch.giving_back or run_id in self._executions:
            return
        execution = Execution(run_id=run_id, token="")
        self._executions[run_id] = execution
        execution.task = asyncio.get_running_loop().create_task(
            self._executor.run_execution(execution), name=f"run-{run_id}"
        )

    async def _cancel_for_engine(self, run_id: str, reason: str) -> Run:
        return await self.cancel(run_id, reason=reason)


def _limit(value: int, maximum: int = 1000) -> int:
    if not isinstance(value, int) or value < 1 or value > maximum:
        raise InvalidInput(f"limit must be between 1 and {maximum}")
    return value


__all__ = ["CLOSED_REASON", "Boundary", "RunStateChanged", "Runtime", "arguments_digest"]
