"""Workers (DESIGN §15): a process that executes the runs clients queued for workers.

A client queues a run for workers (``Runtime.start(..., detached=True)``, ``agent-tui run
--detach``) and watches it; an ``agent-tui worker`` takes it. Taking a run is the engine's
usual claim (``Store.claim_run``: queued → running with a new execution token, under this
process's owner lease, renewed by its own thread), so when several workers reach for one run
exactly one gets it and the others change nothing. A run that waits for a person ends its
execution; the answer puts it back in the queue, and whichever worker is free takes it next.

A worker killed with ``kill -9`` stops renewing its lease; the other workers' recovery loops
(``engine.leases``) then find its runs — at once on the same host, where its pid is dead, else
when the lease ran out — and recover them by the usual rules: back to the queue (interrupted),
or failed when a tool with side effects was running (its outcome is unknown, so it is never run
again by itself). A detached run back in the queue, interrupted or not, is taken by a worker.

A worker executes only runs whose workspace it can reach: the folder exists and lies under one
of its roots. It says so, once per run, for the others and leaves them for another worker.

A server that cannot be reached (``DatabaseUnreachable``: PostgreSQL restarting) is waited for
(``runtime.outages``); any other database error ends ``serve`` with that error.

Shutting down (SIGTERM): the worker stops taking runs, each execution finishes the step it is
in and gives its run back to the queue, then the worker releases its lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from runtime.errors import AgentTuiError, DatabaseUnreachable
from runtime.events import DurableEvent, RunStateChanged
from runtime.models import Run, RunState
from runtime.outages import OutageReport, wait_out_outage

if TYPE_CHECKING:
    from runtime.runtime import Runtime

log = logging.getLogger("runtime.workers")

DEFAULT_CONCURRENCY = 4
CANDIDATES = 200
"""Queued runs looked at per pass (oldest first)."""

ReportKind = Literal[
    "started",
    "claimed",
    "released",
    "skipped",
    "recovered",
    "unreachable",
    "reconnected",
    "stopping",
    "stopped",
]


@dataclass(frozen=True, slots=True)
class WorkerReport:
    """One thing a worker did, for its log (and ``agent-tui worker --json``)."""

    kind: ReportKind
    owner_id: str
    text: str
    run_id: str | None = None
    seq: int | None = None
    """The durable event that recorded it (a claim, the run leaving ``running``)."""
    state: str | None = None
    workspace: str | None = None
    database: str | None = None
    """The database it serves (``started``; a URL without its password)."""

    def as_json(self) -> dict[str, Any]:
        data = {key: value for key, value in asdict(self).items() if value is not None}
        data["kind"] = f"worker_{self.kind}"
        return data


def _shown(location: str | Path) -> str:
    if isinstance(location, str):
        from runtime.store.postgres import redacted

        return redacted(location)
    return str(location)


def unreachable(workspace: str, roots: Sequence[Path]) -> str | None:
    """Why a worker with these roots cannot execute runs in ``workspace`` (None: it can)."""
    path = Path(workspace)
    try:
        resolved = path.resolve()
    except OSError as exc:
        return f"its workspace {workspace} cannot be reached ({exc.strerror or exc})"
    if not any(resolved == root or resolved.is_relative_to(root) for root in roots):
        shown = ", ".join(str(root) for root in roots)
        return f"its workspace {workspace} is not under this worker's roots ({shown})"
    if not resolved.is_dir():
        return f"its workspace {workspace} is not a folder on this machine"
    return None


class Worker:
    """Takes detached runs from the queue and executes them in ``runtime``, at most
    ``concurrency`` at a time, until ``serve``'s ``stop`` is set."""

    def __init__(
        self,
        runtime: Runtime,
        *,
        roots: Sequence[Path],
        concurrency: int = DEFAULT_CONCURRENCY,
        report: Callable[[WorkerReport], None] | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("a worker runs at least one run at a time")
        self._runtime = runtime
        self.roots = [Path(root).resolve() for root in roots]
        self.concurrency = concurrency
        self._report = report or (lambda report: log.info("%s", report.text))
        self.owner_id = runtime.owner_id
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._held: set[str] = set()
        """Runs this process claimed and has not let go of yet (from its own commits)."""
        self._workspaces: dict[str, str] = {}
        """job id → workspace (a job's workspace never changes)."""
        self._skipped: set[str] = set()
        runtime.store.on_commit(self._committed)

    # --- what this process committed ---------------------------------------------------------
    def _committed(self, before: int, events: list[DurableEvent]) -> None:
        for event in events:
            if not isinstance(event, RunStateChanged):
                continue
            run_id = event.run_id
            if event.from_state is RunState.QUEUED and event.to_state is RunState.RUNNING:
                self._held.add(run_id)
                self._say("claimed", f"claimed run {run_id}", run_id=run_id, seq=event.seq)
            elif event.from_state is RunState.RUNNING and run_id in self._held:
                self._held.discard(run_id)
                state = event.to_state.value
                given_back = " (given back)" if event.to_state is RunState.QUEUED else ""
                self._say(
                    "released",
                    f"run {run_id} {state}{given_back}",
                    run_id=run_id,
                    seq=event.seq,
                    state=state,
                )
            elif event.from_state is RunState.RUNNING:
                state = event.to_state.value
                self._say(
                    "recovered",
                    f"recovered run {run_id} of a process that is gone: {state}",
                    run_id=run_id,
                    seq=event.seq,
                    state=state,
                )

    def _say(self, kind: ReportKind, text: str, **fields: Any) -> None:
        try:
            self._report(WorkerReport(kind=kind, owner_id=self.owner_id, text=text, **fields))
        except Exception:  # a broken report must never break a run
            log.exception("reporting %s failed", kind)

    # --- the loop ------------------------------------------------------------------------------
    async def serve(self, stop: asyncio.Event, *, drain_timeout: float | None = None) -> None:
        """Take and execute runs until ``stop`` is set; then let each execution finish its
        step and give its run back (waiting at most ``drain_timeout`` seconds; executions
        still going then are stopped by ``Runtime.close``, their runs recoverable)."""
        roots = ", ".join(str(root) for root in self.roots)
        database = _shown(self._runtime.store.location)
        # The database is named: a worker whose ``--db`` (or AGENT_TUI_DB) was left out serves
        # the default SQLite file, and waits there for runs queued elsewhere.
        self._say(
            "started",
            f"worker {self.owner_id}: executing queued runs of {database} under {roots} "
            f"(up to {self.concurrency} at a time)",
            database=database,
        )
        while not stop.is_set():
            try:
                await self._reap()
                if len(self._tasks) < self.concurrency:
                    await self._take(self.concurrency - len(self._tasks))
            except DatabaseUnreachable as outage:
                # The server restarting, a network blip: wait and look again, as a service
                # should; the runs it was executing are recovered by the usual rules. Any
                # other database error (a permission, a password, a damaged file) is raised:
                # it would be the same next time.
                await wait_out_outage(
                    outage, probe=self._runtime.last_seq, stop=stop, say=self._say_outage
                )
                continue
            await self._next_change(stop)
        self._runtime.dispatch.give_back_at_step_end()
        running = [task for task in self._tasks.values() if not task.done()]
        self._say(
            "stopping",
            f"worker {self.owner_id}: stopping; {len(running)} run(s) finish their step and go "
            "back to the queue",
        )
        if running:
            await asyncio.wait(running, timeout=drain_timeout)
        await self._reap()
        self._say("stopped", f"worker {self.owner_id}: stopped")

    def _say_outage(self, kind: OutageReport, text: str) -> None:
        self._say(kind, f"worker {self.owner_id}: {text}")

    async def _take(self, free: int) -> None:
        candidates = await self._runtime.store.queued_for_workers(limit=CANDIDATES)
        # Every worker sees the same oldest runs: start at a random one of the first few, so
        # that workers spread instead of all racing for the same claim.
        spread = min(len(candidates), max(free, 1) * 2)
        if spread > 1:
            start = random.randrange(spread)
            candidates = candidates[start:] + candidates[:start]
        for run in candidates:
            if free <= 0:
                return
            if run.id in self._tasks:
                continue
            why = await self._why_not(run)
            if why is not None:
                if run.id not in self._skipped:
                    self._skipped.add(run.id)
                    self._say(
                        "skipped",
                        f"run {run.id}: {why}; left for another worker",
                        run_id=run.id,
                        workspace=self._workspaces.get(run.job_id),
                    )
                continue
            try:
                task = await self._runtime.dispatch.take(run.id)
            except AgentTuiError as exc:
                log.warning("run %s could not be executed here: %s", run.id, exc.message)
                continue
            if task is not None:
                self._tasks[run.id] = task
                free -= 1

    async def _why_not(self, run: Run) -> str | None:
        workspace = self._workspaces.get(run.job_id)
        if workspace is None:
            workspace = (await self._runtime.store.get_job(run.job_id)).workspace
            self._workspaces[run.job_id] = workspace
        return unreachable(workspace, self.roots)

    async def _reap(self) -> None:
        for run_id, task in list(self._tasks.items()):
            if not task.done():
                continue
            del self._tasks[run_id]
            if run_id in self._held:
                # It ended without a transition of ours (cancelled or recovered elsewhere).
                self._held.discard(run_id)
                with contextlib.suppress(AgentTuiError):
                    run = await self._runtime.store.get_run(run_id)
                    self._say(
                        "released",
                        f"run {run_id} {run.state.value}",
                        run_id=run_id,
                        state=run.state.value,
                    )

    async def _next_change(self, stop: asyncio.Event) -> None:
        """Until something may have changed: an event published (a run queued or answered
        anywhere, at most two poll intervals), one of our executions ended, or ``stop``."""
        waiters = [
            asyncio.ensure_future(stop.wait()),
            asyncio.ensure_future(self._runtime.dispatch.await_change()),
        ]
        try:
            await asyncio.wait(
                [*waiters, *self._tasks.values()], return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for waiter in waiters:
                waiter.cancel()
            await asyncio.gather(*waiters, return_exceptions=True)


__all__ = ["DEFAULT_CONCURRENCY", "Worker", "WorkerReport", "unreachable"]
