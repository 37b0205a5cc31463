"""The owner lease and recovery (DESIGN §4.4).

Only a process that executes runs holds a lease: it is taken on the first execution
(``ensure``), never by a process that only reads. It is renewed by a thread of its own on a
connection of its own (``Store.lease_renewer``), so neither other processes' transactions nor
this process's event loop can starve it; a busy database is retried, not taken as a loss.

Recovery requeues a run only when its owner is provably gone: it released its lease, or its
lease ran out and, on this host, its process is dead or is another process with the same pid
(``runtime.owners``, which the read-only commands ask too). Deciding that only reads; a process
that finds nobody gone writes nothing."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading

from runtime.engine.delegation import Delegation
from runtime.engine.execution import Executions
from runtime.engine.pump import Pump
from runtime.errors import AgentTuiError, InvalidInput
from runtime.models import InputKind
from runtime.owners import gone_owners
from runtime.providers.pricing import reference_cost_usd
from runtime.store.base import LeaseRenewer, RecoveryReport, Store

log = logging.getLogger("runtime.engine")

BUSY_RETRY = 0.2
"""Seconds between renewal attempts while the database is busy."""


class Leases:
    def __init__(
        self,
        *,
        store: Store,
        owner_id: str,
        lease_seconds: float,
        executions: Executions,
        pump: Pump,
        delegation: Delegation,
        read_only: bool = False,
    ) -> None:
        self._store = store
        self.owner_id = owner_id
        self._lease_seconds = lease_seconds
        self._executions = executions
        self._pump = pump
        self._delegation = delegation
        self.read_only = read_only
        self.held = False
        self._lock = asyncio.Lock()
        self._renewer: LeaseRenewer | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lost: asyncio.Task[None] | None = None

    # --- the lease -----------------------------------------------------------------------------
    async def ensure(self) -> None:
        """Hold the owner lease from now on (before this process executes anything)."""
        if self.held:
            return
        if self.read_only:
            raise InvalidInput("this agent-tui was opened read-only; it cannot run agents")
        async with self._lock:
            if self.held:
                return
            await self._store.register_owner(self.owner_id, lease_seconds=self._lease_seconds)
            self.held = True
            self._start_renewer(asyncio.get_running_loop())

    def _start_renewer(self, loop: asyncio.AbstractEventLoop) -> None:
        self._renewer = self._store.lease_renewer(self.owner_id)
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._renew_forever, args=(loop,), name="agent-tui-lease", daemon=True
        )
        self._thread.start()

    def _renew_forever(self, loop: asyncio.AbstractEventLoop) -> None:
        interval = max(0.05, self._lease_seconds / 3)
        wait = interval
        while not self._stop.wait(wait):
            renewer = self._renewer
            if renewer is None:
                return
            outcome = renewer.renew(self._lease_seconds)
            wait = BUSY_RETRY if outcome == "busy" else interval
            if outcome == "lost":
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                    loop.call_soon_threadsafe(self._on_lost)

    def _on_lost(self) -> None:
        if self._lost is None or self._lost.done():
            self._lost = asyncio.get_running_loop().create_task(self._regain())

    async def renew(self) -> None:
        """One renewal now (the thread does this on its own every third of the lease)."""
        if self._renewer is None:
            return
        outcome = await asyncio.to_thread(self._renewer.renew, self._lease_seconds)
        if outcome == "lost":
            await self._regain()

    async def _regain(self) -> None:
        log.warning("the owner lease was released or recovered by another process; renewing it")
        await self._store.register_owner(self.owner_id, lease_seconds=self._lease_seconds)
        # Executions whose runs another process recovered meanwhile have lost them: they stop
        # at once. The others go on (their tokens are still current).
        for execution in list(self._executions.values()):
            if execution.task is None or not execution.token:
                continue
            with contextlib.suppress(AgentTuiError):
                run = await self._store.get_run(execution.run_id)
                if run.execution_token != execution.token:
                    execution.task.cancel()

    async def release(self) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            await asyncio.to_thread(thread.join, 5)
        renewer, self._renewer = self._renewer, None
        if renewer is not None:
            # On its own thread: PostgreSQL's renewer closes its connection on a private event
            # loop, which cannot run inside this one (its close was never run: the connection
            # stayed open until garbage collection).
            await asyncio.to_thread(renewer.close)
        if self._lost is not None:
            self._lost.cancel()
        if self.held or not self.read_only:
            # Also when it never held the lease: if it left drafts, the owner row then says
            # it quit, so they are restorable at once (``runtime.drafts``).
            held, self.held = self.held, False
            await self._store.release_owner(self.owner_id)
            if held:
                # Its MCP sessions end with it, and the forms they asked for: their runs fail
                # now, naming the request, as the next process's recovery would fail them
                # (until then `runs` and `show` offered an answer nobody could take).
                await self.cancel_orphaned_elicitations(ended_owner=self.owner_id)

    # --- recovery ------------------------------------------------------------------------------
    async def gone_owners(self) -> list[str]:
        """Owners (other than this one) that are provably gone. Reads only."""
        return await gone_owners(self._store, other_than=self.owner_id)

    async def recover(self) -> RecoveryReport:
        """Recover the runs of owners that are provably gone; writes only if there are some."""
        gone = await self.gone_owners()
        if not gone:
            return RecoveryReport()
        # The answers its runs were streaming count in their totals, priced by their models.
        report = await self._store.recover_owners(gone, price=reference_cost_usd)
        if report.requeued or report.failed or report.interrupted_queued:
            self._pump.notify()
        return report

    async def settle(self, report: RecoveryReport) -> None:
        """What recovery leaves to do: cancel failed runs' children, orphaned MCP forms."""
        await self.after_recovery(report)
        await self.cancel_orphaned_elicitations()

    async def recovery_loop(self, closing: asyncio.Event) -> None:
        """Processes that die while this one runs (a CLI run killed while the TUI is open)
        leave runs that only recovery frees: recover them now, not at the next launch."""
        interval = max(0.05, self._lease_seconds / 3)
        failing = False  # a database that cannot be reached is logged once, not every pass
        while not closing.is_set():
            await asyncio.sleep(interval)
            try:
                await self.after_recovery(await self.recover())
            except asyncio.CancelledError:
                raise
            except Exception:
                if not failing:
                    log.exception("recovery failed (not logged again until it works)")
                failing = True
            else:
                if failing:
                    log.warning("recovery works again")
                failing = False

    async def cancel_orphaned_elicitations(self, *, ended_owner: str | None = None) -> None:
        """An MCP server's request for input dies with the process that held its session:
        those of owners that are not alive, or only those of ``ended_owner`` (this process,
        closing)."""
        live = set(await self._store.live_owners()) if ended_owner is None else set()
        for request in await self._store.pending_input_requests(limit=1000):
            if request.kind is not InputKind.ELICITATION:
                continue
            run = await self._store.get_run(request.run_id)
            if run.owner_id in live or ended_owner not in (None, run.owner_id):
                continue
            reason = "the MCP server session that asked for this ended when agent-tui stopped"
            if request.tool_call_id is None:
                await self._store.cancel_input_request(request.id, reason=reason)
                continue
            # The call that was waiting can never get its answer now, and it may have acted:
            # the run fails (input_required → failed), naming the request; a person retries it
            # from its last checkpoint (the model sees the call failed).
            await self._store.fail_unanswerable_request(request.id, reason=reason)

    async def after_recovery(self, report: RecoveryReport) -> None:
        for run_id in report.failed:
            with contextlib.suppress(AgentTuiError):
                await self._delegation.cancel_descendants(
                    await self._store.get_run(run_id), reason="its parent run failed"
                )
