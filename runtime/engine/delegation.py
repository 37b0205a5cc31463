"""Delegation: a parent's tool call runs as a child run of the same job (started, or re-attached
to after a restart), and the queries over a run's descendants."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from runtime.engine.catalog import Catalog, DelegateTool
from runtime.engine.execution import Execution, Launcher
from runtime.engine.pump import Pump
from runtime.errors import RunStateConflict
from runtime.models import InputRequest, Run, RunState, ToolCall, ToolCallState
from runtime.store.base import NewRun, Store

T = TypeVar("T")


async def gather_or_cancel(*waits: Awaitable[T]) -> list[T]:
    """Every result, in order; if one raises, the others are cancelled and awaited before the
    error goes on (``asyncio.gather`` would leave them polling), as when it is cancelled."""
    tasks = [asyncio.ensure_future(wait) for wait in waits]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


Outcome = tuple[ToolCallState, str | None, str | None]
"""A call's end: (state, result, error)."""


@dataclass(frozen=True)
class ChildRun:
    """A child run a tool call asks for: its input and the idempotency key that makes it
    one run however often the call is resumed."""

    input: str
    idempotency_key: str


async def descendants(store: Store, run: Run) -> list[Run]:
    """Every run below ``run`` in its job's delegation tree."""
    runs = await store.job_runs(run.job_id)
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


OPEN_REQUESTS_PAGE = 500


async def waiting_descendant(store: Store, run: Run) -> tuple[Run, InputRequest] | None:
    """A run below ``run`` that waits for a person, with its open request (the oldest).

    Asked on every wake of ``wait``, so it reads the open requests (few, by a partial index)
    and walks the job's runs only when one of another run of this job is open."""
    page = await store.pending_input_requests(limit=OPEN_REQUESTS_PAGE)
    others = [r for r in page if r.job_id == run.job_id and r.run_id != run.id]
    if not others and len(page) < OPEN_REQUESTS_PAGE:
        return None
    below = {d.id: d for d in await descendants(store, run)}
    for request in others:
        descendant = below.get(request.run_id)
        if descendant is not None and descendant.state is RunState.INPUT_REQUIRED:
            return descendant, request
    if len(page) < OPEN_REQUESTS_PAGE:
        return None
    for descendant in below.values():  # more open requests than a page: ask each one
        if descendant.state is RunState.INPUT_REQUIRED:
            found = await store.pending_input_requests(run_id=descendant.id, limit=1)
            if found:
                return descendant, found[0]
    return None


async def held_elsewhere(store: Store, run: Run, owner_id: str) -> bool:
    """Whether another live process owns the run (and will go on with it)."""
    return (
        run.owner_id is not None
        and run.owner_id != owner_id
        and run.owner_id in await store.live_owners()
    )


async def next_boundary(
    store: Store,
    run_id: str,
    *,
    executing: Mapping[str, Execution],
    owner_id: str,
) -> tuple[Run, InputRequest | None] | None:
    """Where ``wait`` (in the process ``owner_id``) stops: the run terminal, waiting (with its
    request), queued with nobody to execute it; or a descendant waiting for a person. None:
    keep waiting."""
    run = await store.get_run(run_id)
    if run.state.is_terminal:
        return run, None
    if run.state is RunState.INPUT_REQUIRED:
        requests = await store.pending_input_requests(run_id=run_id, limit=1)
        if requests:
            return run, requests[0]
    if (
        run.state is RunState.QUEUED
        and not run.detached  # a worker will take it
        and run_id not in executing
        and run.owner_id != owner_id  # answered elsewhere and left to us: we go on with it
        and not await held_elsewhere(store, run, owner_id)
    ):
        return run, None  # nobody will execute it (interrupted, or its process is gone)
    return await waiting_descendant(store, run)


class Delegation:
    def __init__(
        self,
        *,
        store: Store,
        catalog: Catalog,
        pump: Pump,
        launcher: Launcher,
        executions: Mapping[str, Execution],
        owner_id: str,
    ) -> None:
        self._store = store
        self._catalog = catalog
        self._pump = pump
        self._launcher = launcher
        self._executions = executions
        self._owner_id = owner_id
        self._children: dict[str, str] = {}

    def take_child(self, tool_call_id: str) -> str | None:
        """The child run a delegation call started, once (to record on the call)."""
        return self._children.pop(tool_call_id, None)

    async def delegate(
        self, execution: Execution, run: Run, call: ToolCall, tool: DelegateTool
    ) -> Outcome:
        """Start (or re-attach to) the child run of a delegation call and wait for its end."""
        child = await self._store.child_run_for_tool_call(call.id)
        if child is None:
            child = await self._create_child(run, call, tool)
        self._children[call.id] = child.id
        return await self._wait_for(child)

    async def _wait_for(self, child: Run) -> Outcome:
        if child.state is RunState.QUEUED:
            self._launcher.launch(child.id)
        while True:
            child = await self._store.get_run(child.id)
            if child.state.is_terminal:
                break
            if child.state is RunState.QUEUED and child.id not in self._executions:
                self._launcher.launch(child.id)
            await self._pump.await_progress()
        if child.state is RunState.COMPLETED:
            return ToolCallState.COMPLETED, child.outcome or "(the sub-agent gave no answer)", None
        if child.state is RunState.FAILED and child.failure is not None:
            return ToolCallState.FAILED, None, f"the sub-agent failed: {child.failure.message}"
        return ToolCallState.FAILED, None, f"the sub-agent run ended {child.state.value}"

    async def run_children(
        self, run: Run, call: ToolCall, children: Sequence[ChildRun]
    ) -> list[tuple[Run, Outcome]]:
        """Several child runs of one tool call of ``run`` (a ``route`` to several phases), all
        running at once; waits for each to end. Each is created under its idempotency key,
        so a parent that resumes after a restart re-attaches to the children it had started
        (a finished one is not run again) and starts only the missing ones."""
        job = await self._store.get_job(run.job_id)
        agent = self._catalog.agent(run.agent, job.workspace)
        started = [
            await self._store.create_run(
                NewRun(
                    job_id=run.job_id,
                    agent=run.agent,
                    model=run.model,
                    input=child.input,
                    workspace=job.workspace,
                    parent_run_id=run.id,
                    parent_tool_call_id=call.id,
                    idempotency_key=child.idempotency_key,
                    owner_id=self._owner_id,
                    max_steps=agent.max_steps or self._catalog.config.defaults.max_steps,
                    detached=run.detached,
                )
            )
            for child in children
        ]
        outcomes = await gather_or_cancel(*(self._wait_for(child) for child in started))
        return list(zip(started, outcomes, strict=True))

    async def _create_child(self, run: Run, call: ToolCall, tool: DelegateTool) -> Run:
        job = await self._store.get_job(run.job_id)
        delegate = self._catalog.agent(tool.agent_name, job.workspace)
        return await self._store.create_run(
            NewRun(
                job_id=run.job_id,
                agent=tool.agent_name,
                model=delegate.model or run.model,
                input=str(call.arguments["task"]),
                workspace=job.workspace,
                parent_run_id=run.id,
                parent_tool_call_id=call.id,
                idempotency_key=f"delegate:{call.id}",
                owner_id=self._owner_id,
                max_steps=delegate.max_steps or self._catalog.config.defaults.max_steps,
                detached=run.detached,  # a worker's child is the workers' too
            )
        )

    async def cancel_descendants(self, run: Run, *, reason: str) -> None:
        """No child runs without a live parent."""
        for child in await descendants(self._store, run):
            if not child.state.is_terminal:
                with contextlib.suppress(RunStateConflict):
                    await self._launcher.cancel(child.id, reason)
