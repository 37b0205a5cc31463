"""The owner lease (DESIGN §4.4): register, renew, release dead owners on this host, recover
the runs of expired owners, and the follow-ups recovery needs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid

from runtime.engine.delegation import Delegation
from runtime.engine.execution import Executions
from runtime.engine.pump import Pump
from runtime.errors import AgentTuiError, OwnershipLost
from runtime.models import InputKind, RunState, ToolCallState
from runtime.store.base import RecoveryReport, Store

log = logging.getLogger("runtime.engine")


def new_owner_id() -> str:
    """``host:pid:nonce``: recovery reads the host and pid back (``release_dead_local``)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
    ) -> None:
        self._store = store
        self.owner_id = owner_id
        self._lease_seconds = lease_seconds
        self._executions = executions
        self._pump = pump
        self._delegation = delegation

    async def take(self) -> RecoveryReport:
        """Take the lease and recover the runs of expired owners (then ``settle``)."""
        await self.release_dead_local_owners()
        await self._store.register_owner(self.owner_id, lease_seconds=self._lease_seconds)
        return await self._store.recover_expired()

    async def settle(self, report: RecoveryReport) -> None:
        """What recovery leaves to do: cancel failed runs' children, orphaned MCP forms."""
        await self.after_recovery(report)
        await self.cancel_orphaned_elicitations()

    async def release(self) -> None:
        await self._store.release_owner(self.owner_id)

    async def release_dead_local_owners(self) -> None:
        """A process on this host that died (kill -9) cannot renew its lease; release it now
        instead of waiting for the lease to run out."""
        host = socket.gethostname()
        for owner in await self._store.live_owners():
            owner_host, _, rest = owner.partition(":")
            pid_text = rest.partition(":")[0]
            if owner_host != host or not pid_text.isdigit():
                continue
            if not pid_alive(int(pid_text)):
                await self._store.release_owner(owner)

    async def cancel_orphaned_elicitations(self) -> None:
        """An MCP server's request for input dies with the process that held its session."""
        live = set(await self._store.live_owners())
        for request in await self._store.pending_input_requests(limit=1000):
            if request.kind is not InputKind.ELICITATION:
                continue
            run = await self._store.get_run(request.run_id)
            if run.owner_id in live:
                continue
            reason = "the MCP server session that asked for this ended when agent-tui stopped"
            await self._store.cancel_input_request(request.id, reason=reason)
            if request.tool_call_id is None:
                continue
            # The call that was waiting can never get its answer now: it fails, and the run
            # goes back to the queue for a person to resume (the model will see the failure).
            run = await self._store.claim_run(request.run_id, owner_id=self.owner_id)
            token = run.execution_token or ""
            call = await self._store.get_tool_call(request.tool_call_id)
            if call.state is ToolCallState.RUNNING:
                await self._store.set_tool_state(
                    call.id,
                    token=token,
                    to=ToolCallState.FAILED,
                    error=f"the request for input was cancelled: {reason}",
                )
            await self._store.finish_run(run.id, token=token, to=RunState.QUEUED)

    async def heartbeat_loop(self, closing: asyncio.Event) -> None:
        interval = max(0.05, self._lease_seconds / 3)
        while not closing.is_set():
            await asyncio.sleep(interval)
            try:
                await self.renew()
                await self.recover_dead_owners()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("heartbeat failed")

    async def renew(self) -> None:
        try:
            await self._store.heartbeat(self.owner_id)
            return
        except OwnershipLost:
            log.warning("the owner lease ran out (was the process suspended?); renewing it")
        await self._store.register_owner(self.owner_id, lease_seconds=self._lease_seconds)
        # Executions whose runs another process recovered meanwhile have lost them; the others
        # go on (their tokens are still current).
        for execution in list(self._executions.values()):
            if execution.task is None or not execution.token:
                continue
            with contextlib.suppress(AgentTuiError):
                run = await self._store.get_run(execution.run_id)
                if run.execution_token != execution.token:
                    execution.task.cancel()

    async def recover_dead_owners(self) -> None:
        """Processes that died while this one runs (a CLI run killed while the TUI is open)
        leave runs that only recovery frees: recover them now, not at the next launch."""
        await self.release_dead_local_owners()
        report = await self._store.recover_expired()
        if report.requeued or report.failed or report.interrupted_queued:
            self._pump.notify()
        await self.after_recovery(report)

    async def after_recovery(self, report: RecoveryReport) -> None:
        for run_id in report.failed:
            with contextlib.suppress(AgentTuiError):
                await self._delegation.cancel_descendants(
                    await self._store.get_run(run_id), reason="its parent run failed"
                )
