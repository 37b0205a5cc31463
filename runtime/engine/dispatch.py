"""Where a run executes: in this process, or in a worker (``runtime.workers``).

``create`` stores a new run and executes it here (taking the owner lease first), or, for a run
queued for workers (``NewRun.detached``), only stores it: this process holds no lease for it.
A worker takes a detached run with ``take``: the owner lease, then the usual execution (claim,
steps). ``give_back_at_step_end`` is a worker's SIGTERM: no new executions start here, and each
one finishes the step it is in, then gives its run back to the queue (``Executor``).

A run answered by another process with ``--detach`` stays with its owner: the pump tells
``answered_elsewhere``, and the owner, if it is this process, goes on with it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from runtime.engine.delegation import held_elsewhere
from runtime.engine.execution import Executions, take_back
from runtime.engine.leases import Leases
from runtime.engine.pump import Pump
from runtime.errors import AgentTuiError, RunStateConflict
from runtime.models import Run, RunState, ToolCallState
from runtime.store.base import NewRun, Store

log = logging.getLogger("runtime.engine")


class Dispatch:
    def __init__(
        self,
        *,
        store: Store,
        owner_id: str,
        executions: Executions,
        leases: Leases,
        pump: Pump,
        launch: Callable[[str], None],
    ) -> None:
        self._store = store
        self._owner_id = owner_id
        self._executions = executions
        self._leases = leases
        self._pump = pump
        self._launch = launch
        self.giving_back = False
        """Set by ``give_back_at_step_end``: nothing starts executing here any more."""
        self._going_on: set[asyncio.Task[None]] = set()
        pump.on_answered = self.answered_elsewhere

    async def create(self, new_run: NewRun) -> Run:
        """Store the run; execute it here unless it is for workers."""
        if not new_run.detached:
            await self._leases.ensure()
        run = await self._store.create_run(new_run)
        if not new_run.detached:
            self._launch(run.id)
        return run

    async def take(self, run_id: str) -> asyncio.Task[None] | None:
        """Execute a queued run here: take the owner lease, then claim and run it in a task,
        returned (None when it executes here already, or this process is stopping). A claim
        lost to another process ends the task at once, having changed nothing. Raises
        ``InvalidInput`` in a read-only runtime."""
        if self.giving_back or run_id in self._executions:
            return None
        await self._leases.ensure()
        self._launch(run_id)
        execution = self._executions.get(run_id)
        return execution.task if execution is not None else None

    async def goes_on_here(self, run: Run, *, elicitation: bool, detach: bool) -> bool:
        """Whether the process that answers ``run`` goes on with it (then it holds the lease
        from now on). Not for a run queued for workers, nor when another live process holds
        the MCP session that asked (``elicitation``) or runs calls of the run beside the
        request, nor with ``detach``: then the run's owner goes on, and it must be alive
        (``RunStateConflict`` otherwise, nothing changed)."""
        owned_elsewhere = await held_elsewhere(self._store, run, self._owner_id)
        if owned_elsewhere and not elicitation:
            calls = await self._store.list_tool_calls(run.id)
            elicitation = any(c.state is ToolCallState.RUNNING for c in calls)
        if not (detach or run.detached or (elicitation and owned_elsewhere)):
            await self._leases.ensure()
            return True
        if detach and not (run.detached or owned_elsewhere or run.owner_id == self._owner_id):
            raise RunStateConflict(
                f"no process would go on with run {run.id}: the one that ran it has ended; "
                "answer it without detaching to go on here"
            )
        return False

    async def go_on(self, run: Run) -> None:
        """Go on here with ``run``, answered here: the execution that runs calls beside the
        request takes it back (``take_back``), else a new one starts; so do waiting parents."""
        execution = self._executions.get(run.id)
        if execution is None or not await take_back(self._store, self._owner_id, execution):
            self._launch(run.id)
        await self.resume_ancestors(run)

    async def calls_ended(self, run_id: str) -> None:
        """Until the execution of ``run_id`` that runs calls beside its request ended (it ends
        with them, unless the answer came meanwhile: then it goes on with the run)."""
        execution = self._executions.get(run_id)
        if execution is not None and execution.awaiting is not None and execution.task:
            await asyncio.wait({execution.task})

    async def resume_ancestors(self, run: Run) -> None:
        """A child answered after a restart: its waiting parents must run again too."""
        parent_id = run.parent_run_id
        while parent_id is not None:
            parent = await self._store.get_run(parent_id)
            if parent.state is RunState.QUEUED and parent.id not in self._executions:
                self._launch(parent.id)
            parent_id = parent.parent_run_id

    def answered_elsewhere(self, run_id: str) -> None:
        """An answer requeued ``run_id``: if this process owns it (another process answered
        it and left it to its owner), go on with it, in the execution that runs calls beside
        the request if there is one."""
        if self._leases.read_only:
            return
        task = asyncio.get_running_loop().create_task(self._go_on_if_ours(run_id))
        self._going_on.add(task)
        task.add_done_callback(self._going_on.discard)

    async def _go_on_if_ours(self, run_id: str) -> None:
        try:
            run = await self._store.get_run(run_id)
            if run.state is not RunState.QUEUED or run.detached or run.owner_id != self._owner_id:
                return
            execution = self._executions.get(run_id)
            if execution is not None and await take_back(self._store, self._owner_id, execution):
                return  # it ran calls beside the request: it goes on with the answer
            if run_id in self._executions:
                return  # it goes on (an MCP form's call picks its answer up itself)
            await self._leases.ensure()
            self._launch(run_id)
            await self.resume_ancestors(run)
        except AgentTuiError:
            log.exception("going on with run %s, answered elsewhere, failed", run_id)

    def give_back_at_step_end(self) -> None:
        """Start nothing more; each execution finishes its step, then gives its run back
        (queued, interrupted, with ``GIVEN_BACK_REASON``). ``Runtime.close`` afterwards
        releases the lease."""
        self.giving_back = True
        for execution in self._executions.values():
            execution.release_at_step_end = True

    async def await_change(self) -> None:
        """Until events were published (here or by another process), at most two poll
        intervals: for loops that look at the store again."""
        await self._pump.await_progress()
