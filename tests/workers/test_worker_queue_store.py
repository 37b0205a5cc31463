"""Runs queued for workers in the store (``Run.detached``, ``queued_for_workers``), on every
backend: what a worker may take, and that the mark survives claims, answers and recovery."""

from __future__ import annotations

import pytest

from runtime import errors
from runtime.models import InputKind, RunState
from runtime.store.base import NewInputRequest, Store
from tests.store.helpers import new_run


async def test_only_detached_queued_runs_are_offered_to_workers_oldest_first(
    store: Store,
) -> None:
    first = await store.create_run(new_run("one", detached=True))
    await store.create_run(new_run("local", owner_id="tui-1"))
    second = await store.create_run(new_run("two", detached=True))
    claimed = await store.create_run(new_run("three", detached=True))
    await store.claim_run(claimed.id, owner_id="worker-1")

    offered = await store.queued_for_workers(limit=10)

    assert [r.id for r in offered] == [first.id, second.id]
    assert all(r.detached and r.owner_id is None for r in offered)
    assert [r.id for r in await store.queued_for_workers(limit=1)] == [first.id]


async def test_the_second_worker_to_claim_a_run_is_refused(store: Store) -> None:
    run = await store.create_run(new_run("one", detached=True))
    won = await store.claim_run(run.id, owner_id="worker-1")
    with pytest.raises(errors.RunStateConflict):
        await store.claim_run(run.id, owner_id="worker-2")
    assert won.detached and won.owner_id == "worker-1"


async def test_an_answered_run_goes_back_to_the_workers(store: Store) -> None:
    run = await store.create_run(new_run("one", detached=True))
    claimed = await store.claim_run(run.id, owner_id="worker-1")
    _, request = await store.open_input_request(
        run.id,
        token=claimed.execution_token or "",
        request=NewInputRequest(kind=InputKind.QUESTION, prompt="Which?"),
    )
    await store.answer_input_request(request.id, answer="this one")

    [offered] = await store.queued_for_workers()
    assert offered.id == run.id and offered.state is RunState.QUEUED and offered.detached


async def test_a_run_recovered_from_a_dead_worker_is_offered_again_as_interrupted(
    store: Store,
) -> None:
    run = await store.create_run(new_run("one", detached=True))
    await store.claim_run(run.id, owner_id="worker-1")
    await store.register_owner("worker-1", lease_seconds=5)

    report = await store.recover_owners(["worker-1"])

    assert report.requeued == [run.id]
    [offered] = await store.queued_for_workers()
    assert offered.id == run.id and offered.interrupted and offered.detached


async def test_a_given_back_run_is_offered_again(store: Store) -> None:
    run = await store.create_run(new_run("one", detached=True))
    claimed = await store.claim_run(run.id, owner_id="worker-1")
    await store.stop_run(run.id, token=claimed.execution_token or "", reason="worker stopping")
    [offered] = await store.queued_for_workers()
    assert offered.id == run.id and offered.owner_id is None
