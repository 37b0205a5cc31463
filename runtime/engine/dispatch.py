"""Where a run executes: in this process, or in a worker (``runtime.workers``).

``create`` stores a new run and executes it here (taking the owner lease first), or, for a run
queued for workers (``NewRun.detached``), only stores it: this process holds no lease for it.
A worker takes a detached run with ``take``: the owner lease, then the usual execution (claim,
steps). ``give_back_at_step_end`` is a worker's SIGTERM: no new executions start here, and each
one finishes the step it is in, then gives its run back to the queue (``Executor``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from runtime.engine.execution import Executions
from runtime.engine.leases import Leases
from runtime.engine.pump import Pump
from runtime.models import Run
from runtime.store.base import NewRun, Store


class Dispatch:
    def __init__(
        self,
        *,
        store: Store,
        executions: Executions,
        leases: Leases,
        pump: Pump,
        launch: Callable[[str], None],
    ) -> None:
        self._store = store
        self._executions = executions
        self._leases = leases
        self._pump = pump
        self._launch = launch
        self.giving_back = False
        """Set by ``give_back_at_step_end``: nothing starts executing here any more."""

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
