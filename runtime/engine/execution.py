"""What the engine's pieces share: one execution's record, the failure that ends a run, the
``Launcher`` callbacks into the facade, and the engine's constants."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from runtime.models import Failure, Run
from runtime.providers.base import ModelProvider

DELEGATE_PREFIX = "delegate_to_"
ASK_USER = "ask_user"
DRAFT_INTERVAL = 0.25
MAX_MODEL_ATTEMPTS = 6
LEASE_SECONDS = 10.0
POLL_INTERVAL = 0.25

ProviderFactory = Callable[[str], ModelProvider]
SleepFn = Callable[[float], Awaitable[None]]


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


Executions = dict[str, Execution]


@dataclass(frozen=True)
class Launcher:
    """The facade's callbacks the engine uses: start executing a queued run in this process,
    and cancel a run (with its descendants)."""

    launch: Callable[[str], None]
    cancel: Callable[[str, str], Awaitable[Run]]


def arguments_digest(arguments: Mapping[str, Any]) -> str:
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()
