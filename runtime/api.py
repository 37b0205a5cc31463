"""The public runtime API (DESIGN §7). Clients (the TUI, the CLI, tests) use only this.

SKELETON: signatures are fixed; bodies are being implemented in runtime/engine.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from runtime.events import Event
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
from runtime.store.base import Page, RecoveryReport


class Boundary(BaseModel):
    """Where ``wait`` returns: a terminal state, or ``input_required`` with its request."""

    model_config = ConfigDict(frozen=True)

    run: Run
    request: InputRequest | None = None

    @property
    def state(self) -> RunState:
        return self.run.state


class Runtime:
    """One in-process runtime: an owner lease on a store, the engine, providers and tools."""

    recovery: RecoveryReport
    """What ``open`` recovered from owners that died."""

    @classmethod
    async def open(
        cls,
        *,
        db_path: str | Path,
        workspace: str | Path,
        config: Any | None = None,
        model: str | None = None,
    ) -> Runtime:
        """Open the database (migrating it), take an owner lease, recover expired owners."""
        raise NotImplementedError

    @property
    def default_model(self) -> str:
        """The model reference new runs use (``demo`` when no API key is configured)."""
        raise NotImplementedError

    @property
    def model_notice(self) -> str | None:
        """Plain words for people when the demo model is the default, else None."""
        raise NotImplementedError

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
        raise NotImplementedError

    def observe(
        self, run_id: str | None = None, *, job_id: str | None = None, after: int | None = None
    ) -> AsyncIterator[Event]:
        """Durable events from the cursor on interleaved with live transient ones (§6).

        ``run_id`` None and ``job_id`` None: every run. ``after`` None: from now on."""
        raise NotImplementedError

    async def wait(self, run_id: str, *, timeout: float | None = None) -> Boundary:
        """The run's next boundary: terminal, or input_required with its open request."""
        raise NotImplementedError

    async def respond(
        self, run_id: str, request_id: str, value: Any, *, idempotency_key: str | None = None
    ) -> Run:
        """Answer the open request (validated) and continue the run in this process."""
        raise NotImplementedError

    async def cancel(self, run_id: str, *, reason: str | None = None) -> Run:
        raise NotImplementedError

    async def follow_up(
        self, job_id: str, input: str, *, agent: str | None = None, model: str | None = None
    ) -> Run:
        raise NotImplementedError

    async def retry(self, run_id: str) -> Run:
        """Interrupted run: execute it again from its committed state. Failed run: a new run in
        the same job continuing from its last checkpoint. Returns the run that executes."""
        raise NotImplementedError

    async def fork(self, checkpoint_id: str, input: str | None = None) -> Run:
        """A new job whose history is the checkpoint's; runs at once."""
        raise NotImplementedError

    # --- queries -------------------------------------------------------------------------------
    async def get_job(self, job_id: str) -> Job:
        raise NotImplementedError

    async def get_run(self, run_id: str) -> Run:
        raise NotImplementedError

    async def list_jobs(
        self, *, cursor: str | None = None, limit: int = 50, state: RunState | None = None
    ) -> Page[Job]:
        raise NotImplementedError

    async def list_runs(
        self, *, cursor: str | None = None, limit: int = 50, state: RunState | None = None
    ) -> Page[Run]:
        raise NotImplementedError

    async def job_runs(self, job_id: str) -> list[Run]:
        raise NotImplementedError

    async def messages(
        self,
        run_id: str,
        *,
        after_position: int = -1,
        before_position: int | None = None,
        limit: int = 200,
    ) -> list[Message]:
        raise NotImplementedError

    async def tool_calls(self, run_id: str) -> list[ToolCall]:
        raise NotImplementedError

    async def checkpoints(self, run_id: str) -> list[Checkpoint]:
        raise NotImplementedError

    async def open_request(self, run_id: str) -> InputRequest | None:
        raise NotImplementedError

    async def inbox(self, *, limit: int = 100) -> list[InputRequest]:
        """Every open input request across jobs, oldest first."""
        raise NotImplementedError

    async def search(self, query: str, *, limit: int = 50) -> list[SearchHit]:
        raise NotImplementedError

    async def counts(self) -> dict[RunState, int]:
        raise NotImplementedError

    async def export_job(self, job_id: str, *, format: Literal["md", "json"] = "md") -> str:
        raise NotImplementedError

    async def close(self) -> None:
        """Stop executions (their runs stay recoverable) and release the owner lease."""
        raise NotImplementedError
