"""What the engine's pieces share: one execution's record, the failure that ends a run, the
``Launcher`` callbacks into the facade, and the engine's constants."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from runtime.canonical import arguments_digest as arguments_digest
from runtime.errors import RunStateConflict
from runtime.history import RunHistory
from runtime.models import Failure, InputRequest, Run, ToolCall
from runtime.providers.base import ModelProvider
from runtime.store.base import CutShortUsage, Store

DELEGATE_PREFIX = "delegate_to_"
ASK_USER = "ask_user"
DRAFT_INTERVAL = 0.25
MAX_MODEL_ATTEMPTS = 6
OUTCOME_CHARS = 2000
"""How much of a completed run's last words its ``outcome`` keeps."""
LEASE_SECONDS = 10.0
GIVEN_BACK_REASON = "given back at the end of a step: its worker is shutting down"
POLL_INTERVAL = 0.25

ProviderFactory = Callable[[str], ModelProvider]
SleepFn = Callable[[float], Awaitable[None]]


def completes_run(stop_reason: str) -> bool:
    """Whether a model message with no tool calls that stopped for ``stop_reason`` ends its
    run: not when it was cut off (``max_tokens``), refused, or paused by the provider
    (``pause_turn``: the model goes on in another step)."""
    return stop_reason not in ("pause_turn", "max_tokens", "refusal")


class RunFailed(Exception):
    """Ends the run as ``failed`` with a coded reason the person can act on."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.failure = Failure(code=code, message=message)


@dataclass
class Execution:
    """One run being executed by this process (one asyncio task)."""

    run_id: str
    token: str
    task: asyncio.Task[None] | None = None
    elicitations: dict[str, asyncio.Future[Any]] = field(default_factory=dict)
    started: set[str] = field(default_factory=set)
    """Tool calls this execution started together with the message that asked for them."""
    repair_noted: bool = False
    asked: set[str] = field(default_factory=set)
    """Requests the tools of this execution opened while they ran (MCP forms)."""
    history: RunHistory = field(default_factory=RunHistory)
    """The run's transcript, read once when the execution starts and appended to as it
    commits (``runtime.history.load_history``)."""
    calls: dict[str, ToolCall] = field(default_factory=dict)
    """The tool calls of the assistant message being settled, as last committed."""
    requests: list[InputRequest] = field(default_factory=list)
    """The run's input requests, read once when the execution starts (answered approvals and
    questions); a request opened later stops the execution."""
    save_shown: Callable[[], Awaitable[CutShortUsage | None]] | None = None
    """While a model message streams: its last draft save, of all the text shown so far
    (``Runtime.cancel`` calls it before it commits the cancel, after which the run's token no
    longer writes). It returns the usage of the message so far, for the cancel to count: the
    provider reports usage at a message's end, which a cancelled message never reaches. From
    the stream's end until the message's commit returned, it returns that usage only (a
    cancel landing there stops the commit)."""
    release_at_step_end: bool = False
    """Give the run back (queued, interrupted) once the step in progress ended, instead of
    calling the model again: a worker shutting down (``Runtime.give_back_at_step_end``)."""
    awaiting: asyncio.Future[None] | None = None
    """While calls run beside a question or approval of their batch (the run is
    ``input_required``): done once the answer came and this execution claimed the run again
    (``take_back``), to settle the batch with it. None otherwise."""
    writing: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Held while the calls' last results commit and while ``take_back`` claims the run: the
    execution then either goes on with the answer, or ends, never neither."""

    def note_calls(self, calls: list[ToolCall]) -> None:
        """Remember tool calls as the store returned them from a commit."""
        for call in calls:
            self.calls[call.id] = call

    def calls_of(self, message_id: str) -> list[ToolCall] | None:
        """The calls of one assistant message in call order, if this execution holds them."""
        found = [c for c in self.calls.values() if c.message_id == message_id]
        return sorted(found, key=lambda c: c.index) if found else None


Executions = dict[str, Execution]


async def take_back(store: Store, owner_id: str, execution: Execution) -> bool:
    """The run was answered (queued) while ``execution`` ran calls beside its request: claim
    it again for the execution, which goes on with the answer. False when the execution does
    not wait so (its calls ended first and it ended: a new execution goes on with the run) or
    the run cannot be claimed (another process took it, or it was cancelled)."""
    async with execution.writing:
        return await reclaim(store, owner_id, execution)


async def reclaim(store: Store, owner_id: str, execution: Execution) -> bool:
    """``take_back`` with ``execution.writing`` held by the caller."""
    awaiting = execution.awaiting
    if awaiting is None:
        return False
    if awaiting.done():
        return True
    try:
        claimed = await store.claim_run(execution.run_id, owner_id=owner_id)
    except RunStateConflict:
        return False
    execution.token = claimed.execution_token or ""
    awaiting.set_result(None)
    return True


@dataclass(frozen=True)
class Launcher:
    """The facade's callbacks the engine uses: start executing a queued run in this process,
    and cancel a run (with its descendants)."""

    launch: Callable[[str], None]
    cancel: Callable[[str, str], Awaitable[Run]]
