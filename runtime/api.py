"""The public runtime API (DESIGN §7). Clients (the TUI, the CLI, tests) use only this.

``RuntimeApi`` is the surface written down once, as a protocol: the run lifecycle (start,
follow-up, retry, fork, respond, cancel), observing and waiting (``observe`` interleaves durable
and transient events; ``wait`` returns the next boundary and never hangs on ``input_required``),
and the paged queries the browser needs. ``Runtime`` (``runtime.runtime``) implements it over a
store; the assignment at the end of this module makes mypy check that it still does, so a
change of the surface is a change of this file. Clients that only drive runs can be typed
against ``RuntimeApi`` and run against any implementation.

The last section is what a client hosted in the same process (the TUI) reads besides: the
store (drafts, prompt history, transcript pages), the configuration, MCP, the extension points,
the models and what recovery found at open.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from runtime.config import Config
from runtime.consumers import Consumer
from runtime.engine.context_usage import ContextUsage
from runtime.engine.extensions import ExtensionPoints
from runtime.engine.retries import UnknownChoice, describe_call
from runtime.events import DurableEvent, Event
from runtime.models import (
    Checkpoint,
    InputRequest,
    Job,
    Message,
    Run,
    RunState,
    SearchHit,
    ToolCall,
)
from runtime.runtime import Boundary, Runtime, arguments_digest
from runtime.store.base import Page, RecoveryReport, Store

if TYPE_CHECKING:
    from runtime.mcp.manager import McpManager

__all__ = [
    "Boundary",
    "Runtime",
    "RuntimeApi",
    "UnknownChoice",
    "arguments_digest",
    "describe_call",
]


class RuntimeApi(Protocol):
    """What a client may ask of the runtime (DESIGN §7)."""

    # --- the run lifecycle ------------------------------------------------------------------
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
        """A run in a new job (or ``job_id``), executed in this process; ``detached``: queued
        for a worker (``agent-tui worker``) instead; ``title``: the new job's (else its input's
        first line)."""
        ...

    async def follow_up(
        self, job_id: str, input: str, *, agent: str | None = None, model: str | None = None
    ) -> Run:
        """A new root run of the job, after its earlier ones, with their history."""
        ...

    async def retry(self, run_id: str, *, unknown: UnknownChoice | None = None) -> Run:
        """An interrupted run executes again; a failed or cancelled one gets a new run in its
        job from its last checkpoint (linked to it)."""
        ...

    async def fork(self, checkpoint_id: str, input: str | None = None) -> Run:
        """A new job whose history is the checkpoint's."""
        ...

    async def respond(
        self,
        run_id: str,
        request_id: str,
        value: Any,
        *,
        idempotency_key: str | None = None,
        detach: bool = False,
    ) -> Run:
        """Answer the open request (validated against its schema) and continue the run here;
        with ``detach``, in the live process that owns it (or the workers)."""
        ...

    async def cancel(self, run_id: str, *, reason: str | None = None) -> Run: ...

    async def close(self) -> None:
        """Stop this process's executions and release its lease."""
        ...

    # --- observing and waiting --------------------------------------------------------------
    def observe(
        self,
        run_id: str | None = None,
        *,
        job_id: str | None = None,
        after: int | None = None,
        live: Callable[[str], bool] | None = None,
    ) -> AsyncIterator[Event]: ...

    async def wait(self, run_id: str, *, timeout: float | None = None) -> Boundary: ...

    async def wait_answered(
        self, request_id: str, *, timeout: float | None = None
    ) -> InputRequest: ...

    async def events(
        self,
        *,
        after: int = 0,
        limit: int = 500,
        run_id: str | None = None,
        job_id: str | None = None,
    ) -> list[DurableEvent]:
        """Durable events after a cursor, oldest first (paged)."""
        ...

    async def last_seq(self) -> int: ...

    def consume(self, consumer_id: str, *, after: int | None = None) -> Consumer:
        """A durable consumer: every durable event at least once, in order, from its saved
        cursor; ``ack`` saves it; one process holds a consumer id at a time."""
        ...

    # --- queries (paged by keyset) ----------------------------------------------------------
    async def get_job(self, job_id: str) -> Job: ...

    async def get_run(self, run_id: str) -> Run: ...

    async def get_request(self, request_id: str) -> InputRequest: ...

    async def list_jobs(
        self,
        *,
        cursor: str | None = None,
        limit: int = 50,
        state: RunState | None = None,
        interrupted: bool | None = None,
    ) -> Page[Job]: ...

    async def list_runs(
        self, *, cursor: str | None = None, limit: int = 50, state: RunState | None = None
    ) -> Page[Run]: ...

    async def job_runs(self, job_id: str) -> list[Run]: ...

    async def messages(
        self,
        run_id: str,
        *,
        after_position: int = -1,
        before_position: int | None = None,
        limit: int = 200,
    ) -> list[Message]: ...

    async def all_messages(self, run_id: str) -> list[Message]: ...

    async def tool_calls(self, run_id: str) -> list[ToolCall]: ...

    async def unknown_calls(self, run_id: str) -> list[ToolCall]: ...

    async def checkpoints(self, run_id: str) -> list[Checkpoint]: ...

    async def open_request(self, run_id: str) -> InputRequest | None: ...

    async def current_request(self, request: InputRequest) -> InputRequest: ...

    async def inbox(self, *, limit: int = 100) -> list[InputRequest]: ...

    async def search(self, query: str, *, limit: int = 50) -> list[SearchHit]: ...

    async def context_usage(self, job_id: str) -> ContextUsage: ...

    async def counts(self) -> dict[RunState, int]: ...

    async def export_job(self, job_id: str, *, format: Literal["md", "json"] = "md") -> str: ...

    # --- the host process: what a client in the same process also reads ---------------------
    @property
    def store(self) -> Store: ...

    @property
    def workspace(self) -> Path: ...

    @property
    def owner_id(self) -> str:
        """This process's owner id (the runs it executes carry it)."""
        ...

    @property
    def config(self) -> Config: ...

    @property
    def mcp(self) -> McpManager | None:
        """This folder's MCP servers, or None when none are configured (or read-only)."""
        ...

    @property
    def extensions(self) -> ExtensionPoints: ...

    @property
    def recovery(self) -> RecoveryReport:
        """What recovery at open found (runs requeued, failed, interrupted)."""
        ...

    @property
    def default_model(self) -> str: ...

    @property
    def model_notice(self) -> str | None: ...

    def context_window(self, model: str, *, workspace: str | None = None) -> int: ...

    def check_model(self, model: str) -> None:
        """``ConfigError`` when runs cannot use ``model`` (an unknown provider, a missing key):
        the error a run started with it would get, before anything is stored."""
        ...

    def check_agent(self, name: str) -> None:
        """``InvalidInput`` when runs cannot use agent ``name`` (one added to the config files
        since they were read is known)."""
        ...

    def holds_session(self, request: InputRequest) -> bool: ...

    async def calls_ended(self, run_id: str) -> None:
        """Until the calls this process runs for the run beside its open request ended."""
        ...

    def give_way_to_input(self, pending: Callable[[], bool]) -> None:
        """Runs streaming in this process give the event loop up while ``pending()``."""
        ...


def _implements(runtime: Runtime) -> RuntimeApi:
    return runtime  # mypy: Runtime must stay a RuntimeApi
