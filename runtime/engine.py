"""The engine and the public ``Runtime`` (DESIGN §7–§8).

One ``Runtime`` per process: it holds an owner lease on the store, executes the runs it queued
(start, respond, retry, fork, follow-up) as asyncio tasks, and fans events out to observers.

The engine keeps no state that matters outside the store: every execution can stop at any await
and the next one resumes from what was committed. A step is: build the history (the run's
messages after its history prefix), repair it, stream the model, commit the assistant message
with its tool calls reserved, settle approvals and questions (the run waits in
``input_required`` before any of the batch runs), run the calls concurrently, commit their
results in call order, commit the tool message and a checkpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import hashlib
import json
import logging
import os
import random
import socket
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from runtime.answers import question_schema, validate_answer
from runtime.bus import EventBus, Overflowed
from runtime.clock import Clock, SystemClock
from runtime.config import AgentConfig, Config
from runtime.errors import (
    AgentTuiError,
    AlreadyAnswered,
    ConfigError,
    InvalidInput,
    InvalidResponse,
    ModelError,
    OwnershipLost,
    RevisionConflict,
    RunStateConflict,
    ToolError,
    ToolOutcomeUnknown,
)
from runtime.events import (
    DURABLE_KINDS,
    DurableEvent,
    Event,
    MessageDelta,
    Notice,
    RunStateChanged,
    ToolProgress,
)
from runtime.history import all_messages, repair
from runtime.models import (
    Checkpoint,
    ContentBlock,
    Failure,
    InputKind,
    InputRequest,
    InputRequestState,
    Job,
    Message,
    Role,
    Run,
    RunState,
    SearchHit,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolCallState,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from runtime.providers.base import (
    ModelProvider,
    ModelRequest,
    RedactedThinking,
    StopReason,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolSpec,
    UsageReport,
)
from runtime.store.base import (
    NewInputRequest,
    NewMessage,
    NewRun,
    NewToolCall,
    Page,
    RecoveryReport,
    Store,
    ToolStateChange,
)
from runtime.tools.base import Tool, ToolContext, ToolOutput

log = logging.getLogger("runtime.engine")

DEMO_NOTICE = "Using the offline demo model — set ANTHROPIC_API_KEY to use Claude."
DELEGATE_PREFIX = "delegate_to_"
ASK_USER = "ask_user"
DRAFT_INTERVAL = 0.25
MAX_MODEL_ATTEMPTS = 6
LEASE_SECONDS = 10.0
POLL_INTERVAL = 0.25
_LAST = 2**62

ProviderFactory = Callable[[str], ModelProvider]
SleepFn = Callable[[float], Awaitable[None]]


class Boundary(BaseModel):
    """Where ``wait`` returns: a terminal state, or ``input_required`` with its request.

    ``run`` is the run that reached the boundary: the waited-for run, or one of its
    descendants when a delegated child waits for a person."""

    model_config = ConfigDict(frozen=True)

    run: Run
    request: InputRequest | None = None

    @property
    def state(self) -> RunState:
        return self.run.state


class _RunFailed(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.failure = Failure(code=code, message=message)


@dataclass
class _Execution:
    run_id: str
    token: str
    task: asyncio.Task[None] | None = None
    elicitations: dict[str, asyncio.Future[Any]] = field(default_factory=dict)
    started: set[str] = field(default_factory=set)
    """Tool calls this execution started together with the message that asked for them."""
    repair_noted: bool = False
    asked: set[str] = field(default_factory=set)
    """Requests the tools of this execution opened while they ran (MCP forms)."""


def arguments_digest(arguments: Mapping[str, Any]) -> str:
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _default_agent() -> AgentConfig:
    return AgentConfig(
        instructions=(
            "Work step by step. Use the tools to look before you answer. Ask the person with "
            "ask_user when a choice is theirs to make."
        ),
        description="The general-purpose agent.",
    )


def _tool_allowed(agent: AgentConfig, name: str) -> bool:
    if agent.tools is None or name == ASK_USER:
        return True
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in agent.tools)


class _DelegateTool:
    """A delegate agent as its parent sees it: a tool that takes a task."""

    read_only = False
    approval_default: Literal["allow"] = "allow"

    def __init__(self, agent_name: str, description: str) -> None:
        self.agent_name = agent_name
        self.name = DELEGATE_PREFIX + agent_name
        self.description = description or f"Hand a task to the {agent_name} agent."
        self.input_schema: dict[str, Any] = {
            "type": "object",
            "properties": {
                "task": {"type": "string", "minLength": 1, "description": "What to do."}
            },
            "required": ["task"],
            "additionalProperties": False,
        }

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        raise ToolError("delegation is run by the engine")

    def approval_detail(self, arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        return {}


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
    ) -> None:
        self.store = store
        self.workspace = workspace
        self.config = config
        self._workspace_configs: dict[str, Config] = {str(workspace): config}
        self.owner_id = owner_id
        self._default_model = default_model
        self._provider_factory = providers
        self._providers: dict[str, ModelProvider] = {}
        self._builtin_tools = tools
        self._mcp = mcp
        self._clock = clock
        self._sleep = sleep
        self._lease_seconds = lease_seconds
        self._bus = EventBus()
        self._executions: dict[str, _Execution] = {}
        self._pumped = 0
        self._pump_lock = asyncio.Lock()
        self._changed = asyncio.Event()
        self._progress = asyncio.Condition()
        self._background: list[asyncio.Task[None]] = []
        self._closing = False
        self._closed = False
        self._run_allowed: dict[str, set[str]] = {}
        self._delegated_children: dict[str, str] = {}
        self.recovery = RecoveryReport()

    # --- lifecycle -----------------------------------------------------------------------------
    @classmethod
    async def open(
        cls,
        *,
        db_path: str | Path,
        workspace: str | Path,
        config: Config | None = None,
        model: str | None = None,
        providers: ProviderFactory | None = None,
        tools: dict[str, Tool] | None = None,
        clock: Clock | None = None,
        sleep: SleepFn = asyncio.sleep,
        env: Mapping[str, str] | None = None,
        lease_seconds: float = LEASE_SECONDS,
        store: Store | None = None,
        mcp: Any = None,
    ) -> Runtime:
        """Open the database (migrating it), take an owner lease, recover expired owners."""
        from runtime.store.sqlite import SqliteStore

        environ = os.environ if env is None else env
        workspace_path = Path(workspace).resolve()
        if not workspace_path.is_dir():
            raise InvalidInput(f"workspace {workspace_path} is not a folder")
        if config is None:
            from runtime.config import load_config

            config = load_config(workspace_path, env=environ)
        default_model = model or environ.get("AGENT_TUI_MODEL") or config.defaults.model
        if not default_model:
            from runtime.providers.registry import default_model_reference

            default_model = default_model_reference(environ)
        if providers is None:
            providers = _registry_factory(environ)
        if tools is None:
            from runtime.tools.builtin import builtin_tools

            tools = dict(builtin_tools())
        if mcp is None and config.mcp_servers:
            from runtime.mcp import McpManager

            mcp = McpManager(dict(config.mcp_servers), workspace=workspace_path)
        clock = clock or SystemClock()
        if store is None:
            store = SqliteStore(Path(db_path), clock=clock)
        await store.open()
        owner_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        runtime = cls(
            store,
            workspace=workspace_path,
            config=config,
            owner_id=owner_id,
            default_model=default_model,
            providers=providers,
            tools=tools,
            mcp=mcp,
            clock=clock,
            sleep=sleep,
            lease_seconds=lease_seconds,
        )
        try:
            await runtime._start()
        except BaseException:
            await store.close()
            raise
        return runtime

    async def _start(self) -> None:
        await self._release_dead_local_owners()
        await self.store.register_owner(self.owner_id, lease_seconds=self._lease_seconds)
        self.recovery = await self.store.recover_expired()
        self._pumped = await self.store.last_seq()
        await self._after_recovery(self.recovery)
        await self._cancel_orphaned_elicitations()
        loop = asyncio.get_running_loop()
        self._background.append(loop.create_task(self._heartbeat_loop()))
        self._background.append(loop.create_task(self._pump_loop()))
        if self.config.defaults.auto_resume:
            for run_id in self.recovery.requeued + self.recovery.interrupted_queued:
                self._launch(run_id)

    async def _release_dead_local_owners(self) -> None:
        """A process on this host that died (kill -9) cannot renew its lease; release it now
        instead of waiting for the lease to run out."""
        host = socket.gethostname()
        for owner in await self.store.live_owners():
            owner_host, _, rest = owner.partition(":")
            pid_text = rest.partition(":")[0]
            if owner_host != host or not pid_text.isdigit():
                continue
            if not _pid_alive(int(pid_text)):
                await self.store.release_owner(owner)

    async def _cancel_orphaned_elicitations(self) -> None:
        """An MCP server's request for input dies with the process that held its session."""
        live = set(await self.store.live_owners())
        for request in await self.store.pending_input_requests(limit=1000):
            if request.kind is not InputKind.ELICITATION:
                continue
            run = await self.store.get_run(request.run_id)
            if run.owner_id in live:
                continue
            reason = "the MCP server session that asked for this ended when agent-tui stopped"
            await self.store.cancel_input_request(request.id, reason=reason)
            if request.tool_call_id is None:
                continue
            # The call that was waiting can never get its answer now: it fails, and the run
            # goes back to the queue for a person to resume (the model will see the failure).
            run = await self.store.claim_run(request.run_id, owner_id=self.owner_id)
            token = run.execution_token or ""
            call = await self.store.get_tool_call(request.tool_call_id)
            if call.state is ToolCallState.RUNNING:
                await self.store.set_tool_state(
                    call.id,
                    token=token,
                    to=ToolCallState.FAILED,
                    error=f"the request for input was cancelled: {reason}",
                )
            await self.store.finish_run(run.id, token=token, to=RunState.QUEUED)

    async def close(self) -> None:
        """Stop executions (their runs stay recoverable) and release the owner lease."""
        if self._closed:
            return
        self._closing = True
        tasks = [e.task for e in self._executions.values() if e.task is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=5)
        with contextlib.suppress(AgentTuiError, OSError):
            await self._pump()
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        self._bus.close()
        with contextlib.suppress(AgentTuiError, OSError):
            await self.store.release_owner(self.owner_id)
        for provider in self._providers.values():
            with contextlib.suppress(Exception):
                await provider.aclose()
        if self._mcp is not None:
            with contextlib.suppress(Exception):
                await self._mcp.aclose()
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

    def context_window(self, model: str) -> int:
        """The context window, in tokens, of the model ``model`` refers to (e.g. a run's model).
        Raises ``ConfigError`` for a model no provider knows."""
        return self._provider(model).context_window

    def _provider(self, reference: str) -> ModelProvider:
        provider = self._providers.get(reference)
        if provider is None:
            provider = self._provider_factory(reference)
            self._providers[reference] = provider
        return provider

    def _config_for(self, workspace: str | None) -> Config:
        """The configuration of a job's workspace (its agents and permissions), which may not
        be the folder this process was opened in."""
        if workspace is None:
            return self.config
        config = self._workspace_configs.get(workspace)
        if config is None:
            from runtime.config import load_config

            try:
                config = load_config(Path(workspace))
            except (ConfigError, OSError) as exc:
                log.warning("using this folder's config for %s: %s", workspace, exc)
                config = self.config
            self._workspace_configs[workspace] = config
        return config

    def _agent(self, name: str, workspace: str | None = None) -> AgentConfig:
        config = self._config_for(workspace)
        agent = config.agents.get(name)
        if agent is not None:
            return agent
        if name == "default":
            return _default_agent()
        known = ", ".join(sorted({"default", *config.agents}))
        raise InvalidInput(f"unknown agent {name!r}; configured agents: {known}")

    # --- starting runs -------------------------------------------------------------------------
    async def start(
        self,
        input: str,
        *,
        agent: str | None = None,
        model: str | None = None,
        job_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> Run:
        """Create a run in a new job (or ``job_id``) and execute it in this process."""
        if not isinstance(input, str) or not input.strip():
            raise InvalidInput("the prompt is empty: say what the agent should do")
        if job_id is not None:
            return await self.follow_up(job_id, input, agent=agent, model=model)
        agent_name = agent or self.config.defaults.agent
        agent_config = self._agent(agent_name)
        reference = model or agent_config.model or self._default_model
        self._provider(reference)  # fail early on a bad model reference
        run = await self.store.create_run(
            NewRun(
                agent=agent_name,
                model=reference,
                input=input.strip(),
                workspace=str(self.workspace),
                idempotency_key=idempotency_key,
                owner_id=self.owner_id,
                max_steps=agent_config.max_steps or self.config.defaults.max_steps,
            )
        )
        self._launch(run.id)
        return run

    async def follow_up(
        self, job_id: str, input: str, *, agent: str | None = None, model: str | None = None
    ) -> Run:
        if not isinstance(input, str) or not input.strip():
            raise InvalidInput("the follow-up is empty: say what the agent should do next")
        job = await self.store.get_job(job_id)
        roots = [r for r in await self.store.job_runs(job_id) if r.parent_run_id is None]
        active = [r for r in roots if not r.state.is_terminal]
        if active:
            raise RunStateConflict(
                f"run {active[-1].id} of this job is {active[-1].state.value}; "
                "wait for it, answer it or cancel it before following up"
            )
        previous = roots[-1] if roots else None
        agent_name = agent or (previous.agent if previous else job.agent)
        agent_config = self._agent(agent_name, job.workspace)
        reference = model or (previous.model if previous else None) or self._default_model
        self._provider(reference)
        history_position = None
        if previous is not None:
            last = await self._last_message(previous.id)
            history_position = last.position if last else -1
        run = await self.store.create_run(
            NewRun(
                job_id=job_id,
                agent=agent_name,
                model=reference,
                input=input.strip(),
                workspace=job.workspace,
                history_run_id=previous.id if previous else None,
                history_position=history_position,
                owner_id=self.owner_id,
                max_steps=agent_config.max_steps or self.config.defaults.max_steps,
            )
        )
        self._launch(run.id)
        return run

    async def retry(self, run_id: str) -> Run:
        """Interrupted run: execute it again from its committed state. Failed or cancelled run:
        a new run in the same job continuing from its last checkpoint. Returns the run that
        executes."""
        run = await self.store.get_run(run_id)
        if run.state is RunState.QUEUED:
            if run_id not in self._executions:
                self._launch(run_id)
            return run
        if run.state in (RunState.RUNNING, RunState.INPUT_REQUIRED):
            raise RunStateConflict(
                f"run {run_id} is {run.state.value}; only an interrupted, failed or cancelled "
                "run can be retried"
            )
        if run.state is RunState.COMPLETED:
            raise RunStateConflict(f"run {run_id} completed; use follow-up to continue its job")
        checkpoints = await self.store.list_checkpoints(run_id)
        if checkpoints:
            position = checkpoints[-1].last_position
        else:
            first = await self.store.list_messages(run_id, limit=1)
            position = first[0].position if first else -1
        job = await self.store.get_job(run.job_id)
        new_run = await self.store.create_run(
            NewRun(
                job_id=run.job_id,
                agent=run.agent,
                model=run.model,
                input=None,
                workspace=job.workspace,
                parent_run_id=run.parent_run_id,
                history_run_id=run.id,
                history_position=position,
                retry_of_run_id=run.id,
                owner_id=self.owner_id,
                max_steps=run.max_steps,
            )
        )
        self._launch(new_run.id)
        return new_run

    async def fork(self, checkpoint_id: str, input: str | None = None) -> Run:
        """A new job whose history is the checkpoint's; runs at once."""
        checkpoint = await self.store.get_checkpoint(checkpoint_id)
        source = await self.store.get_run(checkpoint.run_id)
        job = await self.store.get_job(source.job_id)
        text = input.strip() if input and input.strip() else None
        run = await self.store.create_run(
            NewRun(
                agent=source.agent,
                model=source.model,
                input=text,
                workspace=job.workspace,
                title=f"Fork of {job.title}"[:80],
                history_run_id=source.id,
                history_position=checkpoint.last_position,
                forked_from_checkpoint_id=checkpoint.id,
                owner_id=self.owner_id,
                max_steps=source.max_steps,
            )
        )
        self._launch(run.id)
        return run

    async def respond(
        self, run_id: str, request_id: str, value: Any, *, idempotency_key: str | None = None
    ) -> Run:
        """Answer the open request (validated) and continue the run in this process."""
        request = await self.store.get_input_request(request_id)
        if request.run_id != run_id:
            raise InvalidInput(f"request {request_id} does not belong to run {run_id}")
        if request.state is InputRequestState.ANSWERED and idempotency_key is None:
            raise AlreadyAnswered(f"request {request_id} was already answered")
        if request.state is InputRequestState.CANCELLED:
            raise RunStateConflict(f"request {request_id} was cancelled")
        run = await self.store.get_run(run_id)
        if run.state is not RunState.INPUT_REQUIRED and idempotency_key is None:
            raise RunStateConflict(
                f"run {run_id} is {run.state.value}, not waiting for input; nothing to answer"
            )
        answer = validate_answer(request, value)
        if request.tool_call_id and request.arguments_digest:
            call = await self.store.get_tool_call(request.tool_call_id)
            if arguments_digest(call.arguments) != request.arguments_digest:
                raise InvalidResponse(
                    "the tool call's arguments changed since the request was made; "
                    "the answer was refused"
                )
        run, request = await self.store.answer_input_request(
            request_id,
            answer=answer,
            idempotency_key=idempotency_key,
            expected_revision=None if idempotency_key else run.revision,
        )
        if (
            request.kind is InputKind.APPROVAL
            and answer["decision"] == "allow_always"
            and request.detail.get("tool")
        ):
            job = await self.store.get_job(run.job_id)
            self._save_always_rule(str(request.detail["tool"]), job.workspace)
        self._changed.set()
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
        if request.kind is InputKind.ELICITATION and await self._held_elsewhere(run):
            # Another live process holds the MCP session and will pick the answer up.
            return run
        if run.state is RunState.QUEUED:
            self._launch(run_id)
            await self._resume_ancestors(run)
        return run

    async def _held_elsewhere(self, run: Run) -> bool:
        """Whether another live process owns the run (and will go on with it)."""
        return (
            run.owner_id is not None
            and run.owner_id != self.owner_id
            and run.owner_id in await self.store.live_owners()
        )

    def _save_always_rule(self, tool_name: str, workspace: str) -> None:
        from runtime.approvals import save_always_rule

        try:
            save_always_rule(Path(workspace), tool_name)
        except OSError as exc:
            raise ConfigError(f"could not save the rule for {tool_name}: {exc}") from None
        config = self._config_for(workspace)
        allow = [*config.permissions.allow, tool_name]
        permissions = config.permissions.model_copy(update={"allow": allow})
        updated = config.model_copy(update={"permissions": permissions})
        self._workspace_configs[workspace] = updated
        if Path(workspace) == self.workspace:
            self.config = updated

    def _find_elicitation(self, request_id: str) -> asyncio.Future[Any] | None:
        for execution in self._executions.values():
            future = execution.elicitations.get(request_id)
            if future is not None:
                return future
        return None

    async def _resume_ancestors(self, run: Run) -> None:
        """A child answered after a restart: its waiting parents must run again too."""
        parent_id = run.parent_run_id
        while parent_id is not None:
            parent = await self.store.get_run(parent_id)
            if parent.state is RunState.QUEUED and parent.id not in self._executions:
                self._launch(parent.id)
            parent_id = parent.parent_run_id

    async def cancel(self, run_id: str, *, reason: str | None = None) -> Run:
        run = await self.store.get_run(run_id)
        if run.state.is_terminal:
            raise RunStateConflict(f"run {run_id} already {run.state.value}")
        try:
            cancelled = await self.store.cancel_run(
                run_id, reason=reason, expected_revision=run.revision
            )
        except RevisionConflict:
            # It moved on since we read it (a step ended); cancel what it is now.
            cancelled = await self.store.cancel_run(run_id, reason=reason)
        self._changed.set()
        execution = self._executions.get(run_id)
        if execution is not None and execution.task is not None:
            execution.task.cancel()
            # Tools stop promptly (a shell's process group is killed); bounded all the same.
            await asyncio.wait({execution.task}, timeout=5)
        # The parent first, so it does not go on with its children's errors; then the children.
        for child in await self.store.job_runs(run.job_id):
            if child.parent_run_id == run_id and not child.state.is_terminal:
                with contextlib.suppress(RunStateConflict):
                    await self.cancel(child.id, reason="its parent run was cancelled")
        return cancelled

    # --- observing -----------------------------------------------------------------------------
    async def observe(
        self, run_id: str | None = None, *, job_id: str | None = None, after: int | None = None
    ) -> AsyncIterator[Event]:
        """Durable events from the cursor on interleaved with live transient ones (§6).

        ``run_id`` None and ``job_id`` None: every run. ``after`` None: from now on."""

        def accept(event: Event) -> bool:
            if run_id is not None and event.run_id != run_id:
                return False
            return job_id is None or event.job_id == job_id

        def accept_run(event_job_id: str, event_run_id: str) -> bool:
            if run_id is not None and event_run_id != run_id:
                return False
            return job_id is None or event_job_id == job_id

        subscription = self._bus.subscribe(accept, accept_run)
        try:
            cursor = await self.store.last_seq() if after is None else after
            replay = after is not None
            while True:
                while replay:
                    page = await self.store.read_events(
                        after=cursor, limit=500, run_id=run_id, job_id=job_id
                    )
                    for durable in page:
                        cursor = durable.seq
                        yield durable
                    replay = len(page) == 500
                try:
                    event = await subscription.get()
                except EOFError:
                    return
                except Overflowed:
                    replay = True  # too far behind: read the durable events back by cursor
                    continue
                if event.kind in DURABLE_KINDS:
                    seq: int = getattr(event, "seq", 0)
                    if seq <= cursor:
                        continue
                    cursor = seq
                yield event
        finally:
            subscription.close()

    async def wait(self, run_id: str, *, timeout: float | None = None) -> Boundary:
        """The run's next boundary: terminal, or input_required with its open request (of the
        run or of a delegated descendant)."""
        async with asyncio.timeout(timeout):
            while True:
                boundary = await self._boundary(run_id)
                if boundary is not None:
                    return boundary
                await self._await_progress()

    async def wait_answered(self, request_id: str, *, timeout: float | None = None) -> InputRequest:
        """Wait until a request is answered or cancelled, here or by another process."""
        async with asyncio.timeout(timeout):
            while True:
                request = await self.store.get_input_request(request_id)
                if request.state is not InputRequestState.PENDING:
                    return request
                await self._await_progress()

    def holds_session(self, request: InputRequest) -> bool:
        """An MCP elicitation whose server session lives in this process: it can only be
        answered while this process runs (from here, or by `respond` from another shell)."""
        return request.kind is InputKind.ELICITATION and request.run_id in self._executions

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
        run = await self.store.get_run(run_id)
        if run.state.is_terminal:
            return Boundary(run=run)
        if run.state is RunState.INPUT_REQUIRED:
            requests = await self.store.pending_input_requests(run_id=run_id, limit=1)
            if requests:
                return Boundary(run=run, request=requests[0])
        if (
            run.state is RunState.QUEUED
            and run_id not in self._executions
            and not await self._held_elsewhere(run)
        ):
            # Nobody will execute it (interrupted, or its process is gone).
            return Boundary(run=run)
        for descendant in await self._descendants(run):
            if descendant.state is RunState.INPUT_REQUIRED:
                requests = await self.store.pending_input_requests(run_id=descendant.id, limit=1)
                if requests:
                    return Boundary(run=descendant, request=requests[0])
        return None

    async def _descendants(self, run: Run) -> list[Run]:
        runs = await self.store.job_runs(run.job_id)
        children: dict[str, list[Run]] = {}
        for candidate in runs:
            if candidate.parent_run_id:
                children.setdefault(candidate.parent_run_id, []).append(candidate)
        found: list[Run] = []
        frontier = [run.id]
        while frontier:
            current = frontier.pop()
            for child in children.get(current, []):
                found.append(child)
                frontier.append(child.id)
        return found

    # --- queries -------------------------------------------------------------------------------
    async def get_job(self, job_id: str) -> Job:
        return await self.store.get_job(job_id)

    async def get_run(self, run_id: str) -> Run:
        return await self.store.get_run(run_id)

    async def list_jobs(
        self, *, cursor: str | None = None, limit: int = 50, state: RunState | None = None
    ) -> Page[Job]:
        return await self.store.list_jobs(cursor=cursor, limit=_limit(limit), state=state)

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

    async def inbox(self, *, limit: int = 100) -> list[InputRequest]:
        """Every open input request across jobs, oldest first."""
        return await self.store.pending_input_requests(limit=_limit(limit))

    async def search(self, query: str, *, limit: int = 50) -> list[SearchHit]:
        if not query.strip():
            return []
        return await self.store.search_messages(query, limit=_limit(limit))

    async def counts(self) -> dict[RunState, int]:
        return await self.store.count_runs_by_state()

    async def export_job(self, job_id: str, *, format: Literal["md", "json"] = "md") -> str:
        from runtime.export import export_job

        return await export_job(self.store, job_id, format=format)

    # --- execution -----------------------------------------------------------------------------
    def _launch(self, run_id: str) -> None:
        if self._closing or run_id in self._executions:
            return
        execution = _Execution(run_id=run_id, token="")
        self._executions[run_id] = execution
        execution.task = asyncio.get_running_loop().create_task(
            self._execute(execution), name=f"run-{run_id}"
        )

    async def _execute(self, execution: _Execution) -> None:
        run_id = execution.run_id
        try:
            try:
                run = await self.store.claim_run(run_id, owner_id=self.owner_id)
            except RunStateConflict:
                return
            execution.token = run.execution_token or ""
            self._changed.set()
            try:
                await self._run_steps(execution, run)
            except _RunFailed as failed:
                await self.store.finish_run(
                    run_id, token=execution.token, to=RunState.FAILED, failure=failed.failure
                )
                await self._cancel_descendants(run, reason="its parent run failed")
        except OwnershipLost:
            log.info("run %s: execution superseded (cancelled or recovered)", run_id)
        except asyncio.CancelledError:
            # Cancelled by `cancel` (already committed) or by `close` (stays recoverable).
            raise
        except Exception as exc:
            log.exception("run %s failed inside the engine", run_id)
            with contextlib.suppress(AgentTuiError):
                ended = await self.store.finish_run(
                    run_id,
                    token=execution.token,
                    to=RunState.FAILED,
                    failure=Failure(code="internal_error", message=f"{type(exc).__name__}: {exc}"),
                )
                await self._cancel_descendants(ended, reason="its parent run failed")
        finally:
            self._executions.pop(run_id, None)
            self._changed.set()

    async def _run_steps(self, execution: _Execution, run: Run) -> None:
        job = await self.store.get_job(run.job_id)
        agent = self._agent(run.agent, job.workspace)
        provider = self._provider(run.model)
        tools = await self._tools_for(agent, workspace=job.workspace)
        specs = [
            ToolSpec(name=t.name, description=t.description, input_schema=t.input_schema)
            for t in tools.values()
        ]
        system = self._system_prompt(run, agent, Path(job.workspace))
        while True:
            last = await self._last_message(run.id)
            if last is not None and last.role is Role.ASSISTANT and last.tool_uses:
                stopped = await self._settle_tool_calls(execution, run, last, tools, job)
                if stopped:
                    return
                continue
            run = await self.store.get_run(run.id)
            if run.step >= run.max_steps:
                raise _RunFailed(
                    "max_steps",
                    f"the agent used all {run.max_steps} steps without finishing",
                )
            await self._check_job_budget(run)
            step = run.step + 1
            history, repairs = repair(await self._history(run))
            if repairs and not execution.repair_noted:
                execution.repair_noted = True
                names = ", ".join(sorted({r.name or r.tool_use_id for r in repairs}))
                text = f"history repaired before calling the model ({len(repairs)}): {names}"
                log.info("run %s: %s", run.id, text)
                self._publish(Notice(job_id=run.job_id, run_id=run.id, level="info", text=text))
            request = ModelRequest(
                model=run.model.partition(":")[2] or run.model,
                system=system,
                messages=history,
                tools=specs,
                workspace=job.workspace,
            )
            message, stop_reason = await self._call_model(
                execution, run, provider, request, tools, step=step
            )
            if message.tool_uses and stop_reason == "max_tokens":
                cut = await self.store.list_tool_calls(run.id, message_id=message.id)
                await self.store.set_tool_states(
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
            elif message.tool_uses:
                continue
            await self.store.create_checkpoint(run.id, token=execution.token, step=step)
            if stop_reason == "pause_turn":
                continue
            if stop_reason == "max_tokens":
                raise _RunFailed(
                    "max_tokens",
                    "the model reached its output limit (max_tokens) before finishing its answer",
                )
            if stop_reason == "refusal":
                raise _RunFailed("refusal", "the model declined to continue this task")
            await self.store.finish_run(
                run.id, token=execution.token, to=RunState.COMPLETED, outcome=message.text[:2000]
            )
            return

    async def _cancel_descendants(self, run: Run, *, reason: str) -> None:
        """No child runs without a live parent."""
        for child in await self._descendants(run):
            if not child.state.is_terminal:
                with contextlib.suppress(RunStateConflict):
                    await self.cancel(child.id, reason=reason)

    async def _check_job_budget(self, run: Run) -> None:
        budget = self.config.defaults.job_step_budget
        runs = await self.store.job_runs(run.job_id)
        used = sum(r.step for r in runs)
        if used >= budget:
            raise _RunFailed(
                "job_step_budget",
                f"the job used its budget of {budget} steps across all its runs "
                "(a runaway delegation chain?); raise [defaults] job_step_budget to allow more",
            )

    def _system_prompt(self, run: Run, agent: AgentConfig, workspace: Path) -> str:
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

    async def _tools_for(self, agent: AgentConfig, *, workspace: str) -> dict[str, Tool]:
        tools: dict[str, Tool] = {}
        for name, tool in self._builtin_tools.items():
            if _tool_allowed(agent, name):
                tools[name] = tool
        if self._mcp is not None:
            for tool in await self._mcp.tools():
                if _tool_allowed(agent, tool.name):
                    tools[tool.name] = tool
        for delegate in agent.delegates:
            delegate_config = self._agent(delegate, workspace)
            tool = _DelegateTool(delegate, delegate_config.description)
            tools[tool.name] = tool
        return tools

    async def _last_message(self, run_id: str) -> Message | None:
        found = await self.store.list_messages(run_id, before_position=_LAST, limit=1)
        return found[-1] if found else None

    async def _history(self, run: Run) -> list[Message]:
        """The run's messages after its history prefix: the chain of runs it continues (a
        follow-up's earlier root runs, a retry's failed run, a fork's source), each up to the
        position the next one starts from. Walked iteratively: chains can be long."""
        segments: list[tuple[str, int | None]] = [(run.id, None)]
        source_id, position = run.history_run_id, run.history_position
        while source_id is not None:
            segments.append((source_id, position))
            source = await self.store.get_run(source_id)
            source_id, position = source.history_run_id, source.history_position
        messages: list[Message] = []
        for run_id, upto in reversed(segments):
            messages += await all_messages(self.store, run_id, upto=upto)
        return messages

    # --- the model call ------------------------------------------------------------------------
    async def _call_model(
        self,
        execution: _Execution,
        run: Run,
        provider: ModelProvider,
        request: ModelRequest,
        tools: dict[str, Tool],
        *,
        step: int,
    ) -> tuple[Message, str]:
        attempt = 0
        while True:
            attempt += 1
            # Each attempt streams under its own message id: observers never see a retry's
            # text glued onto the dropped attempt's. The commit clears the run's drafts.
            message_id = uuid.uuid4().hex
            folded = _Fold()
            try:
                await self._stream_once(execution, run, provider, request, message_id, folded)
                break
            except ModelError as error:
                if not error.retryable or attempt >= MAX_MODEL_ATTEMPTS:
                    raise _RunFailed(error.code, error.message) from None
                delay = error.retry_after
                if delay is None:
                    delay = min(30.0, 0.5 * 2 ** (attempt - 1)) * (0.8 + 0.4 * random.random())
                self._publish(
                    Notice(
                        job_id=run.job_id,
                        run_id=run.id,
                        level="warning",
                        text=(
                            f"{error.message} — retrying in {delay:.1f} s "
                            f"(attempt {attempt + 1} of {MAX_MODEL_ATTEMPTS})"
                        ),
                    )
                )
                await self._sleep(delay)
        content, new_calls = folded.result(tools)
        allowed_here = self._run_allowed.setdefault(run.id, set())
        if folded.stop_reason != "max_tokens" and all(
            self._starts_at_once(c, tools, allowed_here, request.workspace) for c in new_calls
        ):
            # Nothing to decide or ask before these calls run: they start in the same
            # transaction as the message (a step then takes two commits instead of three).
            new_calls = [c.model_copy(update={"start": True}) for c in new_calls]
        cost = provider.cost_usd(folded.usage)
        message, calls = await self.store.commit_message(
            run.id,
            token=execution.token,
            message=NewMessage(
                id=message_id,
                role=Role.ASSISTANT,
                content=content,
                model=run.model,
                usage=folded.usage,
                cost_usd=cost,
            ),
            tool_calls=new_calls,
            step=step,
        )
        execution.started.update(c.id for c in calls if c.state is ToolCallState.RUNNING)
        self._changed.set()
        return message, folded.stop_reason

    def _starts_at_once(
        self, call: NewToolCall, tools: dict[str, Tool], allowed: set[str], workspace: str
    ) -> bool:
        tool = tools.get(call.name)
        return (
            tool is not None
            and call.name != ASK_USER
            and not isinstance(tool, _DelegateTool)
            and _argument_problem(tool, call.arguments) is None
            and self._decide(call.name, tool, allowed, workspace) == "allow"
        )

    async def _stream_once(
        self,
        execution: _Execution,
        run: Run,
        provider: ModelProvider,
        request: ModelRequest,
        message_id: str,
        folded: _Fold,
    ) -> None:
        last_flush = self._clock.monotonic()
        publish_delta = self._bus.publish_delta
        stream = provider.stream(request)
        try:
            async for event in stream:
                if isinstance(event, TextDelta):
                    offset = folded.text_length
                    folded.add_text(event.text)
                    publish_delta(
                        run.job_id, run.id, execution.token, message_id, offset, event.text
                    )
                    now = self._clock.monotonic()
                    if now - last_flush >= DRAFT_INTERVAL:
                        last_flush = now
                        await self.store.save_draft(
                            run.id,
                            token=execution.token,
                            message_id=message_id,
                            text=folded.all_text(),
                        )
                elif isinstance(event, ThinkingDelta):
                    offset = folded.thinking_length
                    folded.add_thinking(event.text, event.signature)
                    if event.text:
                        self._publish(
                            MessageDelta(
                                job_id=run.job_id,
                                run_id=run.id,
                                execution_id=execution.token,
                                message_id=message_id,
                                offset=offset,
                                text=event.text,
                                thinking=True,
                            )
                        )
                elif isinstance(event, RedactedThinking):
                    folded.add_redacted(event.data)
                elif isinstance(event, ToolCallStart):
                    folded.start_tool(event.index, event.id, event.name)
                elif isinstance(event, ToolCallDelta):
                    folded.tool_arguments(event.index, event.json_fragment)
                elif isinstance(event, ToolCallEnd):
                    pass
                elif isinstance(event, UsageReport):
                    folded.usage = _merge_usage(folded.usage, event.usage)
                elif isinstance(event, StopReason):
                    folded.stop_reason = event.reason
        finally:
            # Closing the generator closes the provider's HTTP stream (cancel, errors).
            close = getattr(stream, "aclose", None)
            if close is not None:
                await close()

    # --- tool calls ----------------------------------------------------------------------------
    async def _settle_tool_calls(
        self,
        execution: _Execution,
        run: Run,
        assistant: Message,
        tools: dict[str, Tool],
        job: Job,
    ) -> bool:
        """Run the tool calls of ``assistant`` and commit their results. True when the run
        stopped (input required, or failed).

        Transitions decided before anything runs (unknown tools, bad arguments, denials,
        answered questions) commit together with the calls that start; results commit in call
        order as soon as they and all before them are ready; the last ones commit together
        with the tool message and the step's checkpoint."""
        calls = await self.store.list_tool_calls(run.id, message_id=assistant.id)
        requests = await self.store.list_input_requests(run.id)
        by_call: dict[str, InputRequest] = {}
        for each in requests:
            if each.tool_call_id:
                by_call[each.tool_call_id] = each
        allowed_here = self._run_allowed.setdefault(run.id, set())
        for each in requests:
            if (
                each.kind is InputKind.APPROVAL
                and each.state is InputRequestState.ANSWERED
                and isinstance(each.answer, dict)
                and each.answer.get("decision") == "allow_run"
            ):
                allowed_here.add(str(each.detail.get("tool", "")))
        workspace = Path(job.workspace)
        decided: list[ToolStateChange] = []

        def fail(call: ToolCall, error: str) -> None:
            decided.append(
                ToolStateChange(tool_call_id=call.id, to=ToolCallState.FAILED, error=error)
            )

        async def stop_for_input() -> bool:
            if decided:
                await self.store.set_tool_states(run.id, token=execution.token, changes=decided)
            return True

        to_run: list[tuple[ToolCall, Tool]] = []
        already_running: set[str] = set()
        for call in calls:
            started_here = tools.get(call.name)
            if (
                call.id in execution.started
                and call.state is ToolCallState.RUNNING
                and started_here is not None
            ):
                already_running.add(call.id)
                to_run.append((call, started_here))
                continue
            if call.state is ToolCallState.RUNNING:
                elicitation = by_call.get(call.id)
                if elicitation is not None and elicitation.state is InputRequestState.CANCELLED:
                    fail(call, _cancelled_text(elicitation))
                    continue
                # Started by an execution that is gone, and not recovered: outcome unknown.
                decided.append(
                    ToolStateChange(
                        tool_call_id=call.id,
                        to=ToolCallState.INDETERMINATE,
                        error="the process running this tool stopped; its outcome is unknown",
                    )
                )
                continue
            if call.state is not ToolCallState.PENDING:
                continue
            tool = tools.get(call.name)
            if tool is None:
                known = ", ".join(sorted(tools))
                fail(call, f"there is no tool named {call.name!r}; available tools: {known}")
                continue
            problem = _argument_problem(tool, call.arguments)
            if problem is not None:
                fail(call, problem)
                continue
            request = by_call.get(call.id)
            if call.name == ASK_USER:
                if request is None:
                    await stop_for_input()
                    await self._ask_question(execution, run, call)
                    return True
                if request.state is InputRequestState.ANSWERED:
                    decided.append(ToolStateChange(tool_call_id=call.id, to=ToolCallState.RUNNING))
                    decided.append(
                        ToolStateChange(
                            tool_call_id=call.id,
                            to=ToolCallState.COMPLETED,
                            result=str(request.answer),
                        )
                    )
                elif request.state is InputRequestState.CANCELLED:
                    fail(call, _cancelled_text(request))
                else:
                    return await stop_for_input()
                continue
            decision = self._decide(call.name, tool, allowed_here, job.workspace)
            if decision == "deny":
                fail(call, f"the permission rules deny {call.name}; do not try it again")
                continue
            if decision == "ask":
                if request is None:
                    await stop_for_input()
                    ctx = ToolContext(workspace=workspace, run_id=run.id, job_id=run.job_id)
                    await self._ask_approval(execution, run, call, tool, ctx)
                    return True
                if request.state is InputRequestState.PENDING:
                    return await stop_for_input()
                answer = request.answer if isinstance(request.answer, dict) else {}
                if request.state is InputRequestState.CANCELLED:
                    fail(call, _cancelled_text(request))
                    continue
                if answer.get("decision") == "deny":
                    reason = answer.get("reason")
                    fail(call, f"the person denied this tool call{': ' + reason if reason else ''}")
                    continue
                if answer.get("decision") == "allow_run":
                    allowed_here.add(call.name)
            to_run.append((call, tool))
        starting = decided + [
            ToolStateChange(tool_call_id=call.id, to=ToolCallState.RUNNING)
            for call, _ in to_run
            if call.id not in already_running
        ]
        if starting:
            await self.store.set_tool_states(run.id, token=execution.token, changes=starting)
            self._changed.set()
        last_changes = await self._run_calls(execution, run, to_run, workspace)
        # A form the calls asked for and that is still open can no longer be answered (its
        # server session ended with the call, or the call timed out): withdraw it.
        while execution.asked:
            await self._withdraw_request(execution, run, execution.asked.pop())
        final = {c.id: c for c in await self.store.list_tool_calls(run.id, message_id=assistant.id)}
        for change in last_changes:
            final[change.tool_call_id] = final[change.tool_call_id].model_copy(
                update={"state": change.to, "result": change.result, "error": change.error}
            )
        settled = [final[c.id] for c in calls]
        doubtful = [c for c in settled if c.state is ToolCallState.INDETERMINATE]
        if doubtful or any(not c.state.is_terminal for c in settled):
            if last_changes:
                await self.store.set_tool_states(
                    run.id, token=execution.token, changes=last_changes
                )
            if not doubtful:
                return True
            names = ", ".join(c.name for c in doubtful)
            raise _RunFailed(
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
            )
            for c in settled
        ]
        await self.store.finish_step(
            run.id,
            token=execution.token,
            tool_changes=last_changes,
            message=NewMessage(role=Role.TOOL, content=blocks),
            checkpoint_step=calls[0].step if calls else run.step,
        )
        self._changed.set()
        return False

    def _decide(self, name: str, tool: Tool, allowed_here: set[str], workspace: str) -> str:
        from runtime.approvals import ApprovalPolicy

        permissions = self._config_for(workspace).permissions
        policy = ApprovalPolicy(permissions, run_allowed=allowed_here)
        return policy.decide(name, default=tool.approval_default)

    async def _ask_question(self, execution: _Execution, run: Run, call: ToolCall) -> None:
        options = [str(o) for o in call.arguments.get("options") or []]
        free = bool(call.arguments.get("allow_free_text", True))
        await self.store.open_input_request(
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
        self._changed.set()

    async def _ask_approval(
        self, execution: _Execution, run: Run, call: ToolCall, tool: Tool, ctx: ToolContext
    ) -> None:
        from runtime.answers import APPROVAL_SCHEMA

        try:
            detail = dict(tool.approval_detail(call.arguments, ctx))
        except AgentTuiError as exc:
            detail = {"note": str(exc)}
        detail.update({"tool": call.name, "arguments": call.arguments})
        await self.store.open_input_request(
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
        self._changed.set()

    async def _run_calls(
        self,
        execution: _Execution,
        run: Run,
        to_run: list[tuple[ToolCall, Tool]],
        workspace: Path,
    ) -> list[ToolStateChange]:
        """Run the calls concurrently (bounded). Results commit in call order, whatever order
        the tools finish in: each group that is ready commits before waiting for a slower
        call; the last group is returned uncommitted, to commit with the tool message."""
        if not to_run:
            return []
        limit = asyncio.Semaphore(self.config.defaults.max_parallel_tools)

        async def one(call: ToolCall, tool: Tool) -> tuple[ToolCallState, str | None, str | None]:
            async with limit:
                if isinstance(tool, _DelegateTool):
                    return await self._delegate(execution, run, call, tool)
                ctx = ToolContext(
                    workspace=workspace,
                    run_id=run.id,
                    job_id=run.job_id,
                    tool_call_id=call.id,
                    progress=self._progress_publisher(run, call),
                    request_input=self._input_requester(execution, run, call),
                )
                try:
                    output = await tool.run(dict(call.arguments), ctx)
                except ToolOutcomeUnknown as exc:
                    return ToolCallState.INDETERMINATE, None, str(exc)
                except AgentTuiError as exc:
                    return ToolCallState.FAILED, None, str(exc)
                except Exception as exc:
                    log.exception("tool %s crashed", call.name)
                    return ToolCallState.FAILED, None, f"{call.name} crashed: {exc}"
                if output.is_error:
                    return ToolCallState.FAILED, None, output.content
                return ToolCallState.COMPLETED, output.content, None

        tasks = [asyncio.create_task(one(call, tool)) for call, tool in to_run]
        ready: list[ToolStateChange] = []
        try:
            for (call, _), task in zip(to_run, tasks, strict=True):
                if not task.done() and ready:
                    await self.store.set_tool_states(run.id, token=execution.token, changes=ready)
                    self._changed.set()
                    ready = []
                state, result, error = await task
                ready.append(
                    ToolStateChange(
                        tool_call_id=call.id,
                        to=state,
                        result=result,
                        error=error,
                        child_run_id=self._delegated_children.pop(call.id, None),
                    )
                )
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return ready

    def _progress_publisher(
        self, run: Run, call: ToolCall
    ) -> Callable[[float, float | None, str | None], None]:
        def publish(done: float, total: float | None, message: str | None) -> None:
            self._publish(
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
        self, execution: _Execution, run: Run, call: ToolCall
    ) -> Callable[[NewInputRequest], Awaitable[Any]]:
        async def request_input(new_request: NewInputRequest) -> Any:
            if new_request.tool_call_id is None:
                new_request = new_request.model_copy(update={"tool_call_id": call.id})
            _, request = await self.store.open_input_request(
                run.id, token=execution.token, request=new_request
            )
            self._changed.set()
            execution.asked.add(request.id)
            future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            execution.elicitations[request.id] = future
            try:
                while True:
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(POLL_INTERVAL * 2):
                            return await asyncio.shield(future)
                    # The answer may come from another process (`agent-tui respond` in a
                    # shell): this process holds the server session, so it picks it up.
                    stored = await self.store.get_input_request(request.id)
                    if stored.state is InputRequestState.PENDING:
                        continue
                    try:
                        claimed = await self.store.claim_run(run.id, owner_id=self.owner_id)
                    except RunStateConflict:
                        if stored.state is InputRequestState.ANSWERED:
                            continue  # answered in this process: `respond` claimed it
                        return {"action": "cancel"}
                    execution.token = claimed.execution_token or ""
                    self._changed.set()
                    if stored.state is InputRequestState.ANSWERED:
                        return stored.answer
                    return {"action": "cancel"}
            finally:
                execution.elicitations.pop(request.id, None)

        return request_input

    async def _withdraw_request(self, execution: _Execution, run: Run, request_id: str) -> None:
        with contextlib.suppress(AgentTuiError):
            stored = await self.store.get_input_request(request_id)
            if stored.state is not InputRequestState.PENDING:
                return
            await self.store.cancel_input_request(
                request_id,
                token=execution.token,
                reason="the tool that asked stopped before it was answered",
            )
            # The run went back to the queue with the request; this execution goes on.
            claimed = await self.store.claim_run(run.id, owner_id=self.owner_id)
            execution.token = claimed.execution_token or ""
            self._changed.set()

    async def _delegate(
        self, execution: _Execution, run: Run, call: ToolCall, tool: _DelegateTool
    ) -> tuple[ToolCallState, str | None, str | None]:
        """Start (or re-attach to) the child run of a delegation call and wait for its end."""
        child = await self.store.child_run_for_tool_call(call.id)
        if child is None:
            job = await self.store.get_job(run.job_id)
            delegate = self._agent(tool.agent_name, job.workspace)
            child = await self.store.create_run(
                NewRun(
                    job_id=run.job_id,
                    agent=tool.agent_name,
                    model=delegate.model or run.model,
                    input=str(call.arguments["task"]),
                    workspace=job.workspace,
                    parent_run_id=run.id,
                    parent_tool_call_id=call.id,
                    idempotency_key=f"delegate:{call.id}",
                    owner_id=self.owner_id,
                    max_steps=delegate.max_steps or self.config.defaults.max_steps,
                )
            )
        self._delegated_children[call.id] = child.id
        if child.state is RunState.QUEUED:
            self._launch(child.id)
        try:
            while True:
                child = await self.store.get_run(child.id)
                if child.state.is_terminal:
                    break
                if child.state is RunState.QUEUED and child.id not in self._executions:
                    self._launch(child.id)
                await self._await_progress()
        except asyncio.CancelledError:
            raise
        if child.state is RunState.COMPLETED:
            return ToolCallState.COMPLETED, child.outcome or "(the sub-agent gave no answer)", None
        if child.state is RunState.FAILED and child.failure is not None:
            return ToolCallState.FAILED, None, f"the sub-agent failed: {child.failure.message}"
        return ToolCallState.FAILED, None, f"the sub-agent run ended {child.state.value}"

    # --- events --------------------------------------------------------------------------------
    def _publish(self, event: Event) -> None:
        try:
            self._bus.publish(event)
        except Exception:  # a subscriber must never break a run
            log.exception("publishing %s failed", event.kind)

    async def _pump(self) -> None:
        async with self._pump_lock:
            while True:
                events = await self.store.read_events(after=self._pumped, limit=1000)
                for event in events:
                    self._pumped = event.seq
                    self._publish(event)
                    if (
                        isinstance(event, RunStateChanged)
                        and event.to_state is RunState.CANCELLED
                        and event.run_id in self._executions
                    ):
                        # Cancelled by another process: stop its model stream and tools now.
                        task = self._executions[event.run_id].task
                        if task is not None and not task.done():
                            task.cancel()
                if len(events) < 1000:
                    break
        async with self._progress:
            self._progress.notify_all()

    async def _await_progress(self) -> None:
        """Until events were read (here or from another process), at most two poll intervals.
        (``asyncio.timeout``, not ``wait_for``: on 3.11 ``wait_for`` can swallow a cancel.)"""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(POLL_INTERVAL * 2), self._progress:
                await self._progress.wait()

    async def _pump_loop(self) -> None:
        while not self._closing:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(POLL_INTERVAL):
                    await self._changed.wait()
            self._changed.clear()
            try:
                await self._pump()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("reading events failed")
                await asyncio.sleep(POLL_INTERVAL)

    async def _heartbeat_loop(self) -> None:
        interval = max(0.05, self._lease_seconds / 3)
        while not self._closing:
            await asyncio.sleep(interval)
            try:
                await self._renew_lease()
                await self._recover_dead_owners()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("heartbeat failed")

    async def _renew_lease(self) -> None:
        try:
            await self.store.heartbeat(self.owner_id)
            return
        except OwnershipLost:
            log.warning("the owner lease ran out (was the process suspended?); renewing it")
        await self.store.register_owner(self.owner_id, lease_seconds=self._lease_seconds)
        # Executions whose runs another process recovered meanwhile have lost them; the others
        # go on (their tokens are still current).
        for execution in list(self._executions.values()):
            if execution.task is None or not execution.token:
                continue
            with contextlib.suppress(AgentTuiError):
                run = await self.store.get_run(execution.run_id)
                if run.execution_token != execution.token:
                    execution.task.cancel()

    async def _recover_dead_owners(self) -> None:
        """Processes that died while this one runs (a CLI run killed while the TUI is open)
        leave runs that only recovery frees: recover them now, not at the next launch."""
        await self._release_dead_local_owners()
        report = await self.store.recover_expired()
        if report.requeued or report.failed or report.interrupted_queued:
            self._changed.set()
        await self._after_recovery(report)

    async def _after_recovery(self, report: RecoveryReport) -> None:
        for run_id in report.failed:
            with contextlib.suppress(AgentTuiError):
                await self._cancel_descendants(
                    await self.store.get_run(run_id), reason="its parent run failed"
                )


class _Fold:
    """Folds a provider's event stream into message content and tool calls."""

    def __init__(self) -> None:
        self.blocks: list[dict[str, Any]] = []
        self.tools: dict[int, dict[str, Any]] = {}
        self.usage = Usage()
        self.stop_reason = "end_turn"
        self.text_length = 0
        self.thinking_length = 0
        self._text: list[str] = []

    def _current(self, kind: str) -> dict[str, Any]:
        if self.blocks and self.blocks[-1]["type"] == kind:
            return self.blocks[-1]
        block: dict[str, Any] = {"type": kind, "parts": [], "signature": None}
        self.blocks.append(block)
        return block

    def add_text(self, text: str) -> None:
        self._current("text")["parts"].append(text)
        self._text.append(text)
        self.text_length += len(text)

    def all_text(self) -> str:
        joined = "".join(self._text)
        self._text = [joined]
        return joined

    def add_thinking(self, text: str, signature: str | None) -> None:
        block = self._current("thinking")
        block["parts"].append(text)
        if signature:
            block["signature"] = signature
        self.thinking_length += len(text)

    def add_redacted(self, data: str) -> None:
        self.blocks.append({"type": "redacted", "data": data})

    def start_tool(self, index: int, provider_id: str, name: str) -> None:
        entry = {"type": "tool", "index": index, "id": provider_id, "name": name, "json": []}
        self.tools[index] = entry
        self.blocks.append(entry)

    def tool_arguments(self, index: int, fragment: str) -> None:
        entry = self.tools.get(index)
        if entry is None:
            raise ModelError(
                f"the model sent arguments for tool call {index} before starting it",
                retryable=True,
                code="protocol_error",
            )
        entry["json"].append(fragment)

    def result(self, tools: dict[str, Tool]) -> tuple[list[ContentBlock], list[NewToolCall]]:
        content: list[ContentBlock] = []
        calls: list[NewToolCall] = []
        for block in self.blocks:
            kind = block["type"]
            if kind == "text":
                text = "".join(block["parts"])
                if text:
                    content.append(TextBlock(text=text))
            elif kind == "thinking":
                content.append(
                    ThinkingBlock(thinking="".join(block["parts"]), signature=block["signature"])
                )
            elif kind == "redacted":
                content.append(ThinkingBlock(thinking=block["data"], redacted=True))
            elif kind == "tool":
                raw = "".join(block["json"]).strip()
                try:
                    arguments = json.loads(raw) if raw else {}
                except json.JSONDecodeError:
                    arguments = {"_invalid_json": raw}
                if not isinstance(arguments, dict):
                    arguments = {"_invalid_json": raw}
                tool_call_id = uuid.uuid4().hex
                tool = tools.get(block["name"])
                content.append(
                    ToolUseBlock(
                        id=block["id"],
                        tool_call_id=tool_call_id,
                        name=block["name"],
                        input=arguments,
                    )
                )
                calls.append(
                    NewToolCall(
                        id=tool_call_id,
                        provider_id=block["id"],
                        name=block["name"],
                        arguments=arguments,
                        idempotent=bool(tool is not None and tool.read_only)
                        or block["name"].startswith(DELEGATE_PREFIX),
                    )
                )
        return content, calls


def _merge_usage(old: Usage, new: Usage) -> Usage:
    return Usage(
        input_tokens=new.input_tokens or old.input_tokens,
        output_tokens=new.output_tokens or old.output_tokens,
        cache_read_tokens=new.cache_read_tokens or old.cache_read_tokens,
        cache_write_tokens=new.cache_write_tokens or old.cache_write_tokens,
    )


def _argument_problem(tool: Tool, arguments: dict[str, Any]) -> str | None:
    if "_invalid_json" in arguments:
        return f"the arguments for {tool.name} were not valid JSON; send a JSON object"
    from runtime.tools.builtin import validate_arguments

    try:
        validate_arguments(tool, arguments)
    except ToolError as exc:
        return str(exc)
    return None


def _cancelled_text(request: InputRequest) -> str:
    reason = request.detail.get("cancel_reason")
    return f"the request for input was cancelled{': ' + reason if reason else ''}"


def _limit(value: int, maximum: int = 1000) -> int:
    if not isinstance(value, int) or value < 1 or value > maximum:
        raise InvalidInput(f"limit must be between 1 and {maximum}")
    return value


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _registry_factory(env: Mapping[str, str]) -> ProviderFactory:
    def factory(reference: str) -> ModelProvider:
        from runtime.providers.registry import resolve_provider

        return resolve_provider(reference, env=env)

    return factory


__all__ = ["Boundary", "RunStateChanged", "Runtime", "arguments_digest"]
