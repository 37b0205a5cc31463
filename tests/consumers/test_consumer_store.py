"""A durable consumer's row in the store: cursor, holder and lease (rules.acquire_consumer,
ack_consumer, release_consumer), on every backend."""

from __future__ import annotations

import pytest

from runtime import errors
from runtime.clock import ManualClock
from runtime.store.base import Store
from tests.store.conftest import StoreFactory


async def test_a_new_consumer_starts_before_the_first_event_and_acks_move_its_cursor(
    store: Store,
) -> None:
    assert await store.acquire_consumer("chat", holder="p1", lease_seconds=10) == 0
    assert await store.ack_consumer("chat", holder="p1", seq=3) == 3
    assert await store.ack_consumer("chat", holder="p1", seq=7) == 7


async def test_acknowledging_an_older_event_again_never_moves_the_cursor_back(
    store: Store,
) -> None:
    await store.acquire_consumer("chat", holder="p1", lease_seconds=10)
    await store.ack_consumer("chat", holder="p1", seq=9)
    assert await store.ack_consumer("chat", holder="p1", seq=4) == 9


async def test_a_second_process_is_refused_while_the_holder_s_lease_is_live(
    store: Store, clock: ManualClock
) -> None:
    await store.acquire_consumer("chat", holder="p1", lease_seconds=10)
    clock.advance(9)
    with pytest.raises(errors.ConsumerAlreadyActive) as refused:
        await store.acquire_consumer("chat", holder="p2", lease_seconds=10)
    assert refused.value.code == "consumer_already_active"
    assert refused.value.holder == "p1"


async def test_after_the_lease_expires_another_process_takes_the_consumer_and_its_cursor(
    store: Store, clock: ManualClock
) -> None:
    await store.acquire_consumer("chat", holder="p1", lease_seconds=10)
    await store.ack_consumer("chat", holder="p1", seq=5)
    clock.advance(11)
    assert await store.acquire_consumer("chat", holder="p2", lease_seconds=10) == 5
    with pytest.raises(errors.ConsumerAlreadyActive):
        await store.ack_consumer("chat", holder="p1", seq=6)
    assert await store.ack_consumer("chat", holder="p2", seq=6) == 6


async def test_renewing_and_acknowledging_keep_the_lease_alive(
    store: Store, clock: ManualClock
) -> None:
    await store.acquire_consumer("chat", holder="p1", lease_seconds=10)
    clock.advance(8)
    await store.acquire_consumer("chat", holder="p1", lease_seconds=10)  # a renewal
    clock.advance(8)
    await store.ack_consumer("chat", holder="p1", seq=1)
    clock.advance(8)
    with pytest.raises(errors.ConsumerAlreadyActive):
        await store.acquire_consumer("chat", holder="p2", lease_seconds=10)


async def test_a_holder_proved_gone_is_replaced_before_its_lease_ends(store: Store) -> None:
    await store.acquire_consumer("chat", holder="p1", lease_seconds=10)
    await store.ack_consumer("chat", holder="p1", seq=2)
    with pytest.raises(errors.ConsumerAlreadyActive):
        await store.acquire_consumer("chat", holder="p2", lease_seconds=10, replace="p3")
    assert await store.acquire_consumer("chat", holder="p2", lease_seconds=10, replace="p1") == 2


async def test_a_released_consumer_is_free_at_once_and_keeps_its_cursor(store: Store) -> None:
    await store.acquire_consumer("chat", holder="p1", lease_seconds=10)
    await store.ack_consumer("chat", holder="p1", seq=4)
    await store.release_consumer("chat", holder="p2")  # not the holder: nothing happens
    with pytest.raises(errors.ConsumerAlreadyActive):
        await store.acquire_consumer("chat", holder="p2", lease_seconds=10)
    await store.release_consumer("chat", holder="p1")
    assert await store.acquire_consumer("chat", holder="p2", lease_seconds=10) == 4


async def test_a_cursor_given_on_acquiring_replaces_the_stored_one(store: Store) -> None:
    await store.acquire_consumer("chat", holder="p1", lease_seconds=10)
    await store.ack_consumer("chat", holder="p1", seq=8)
    assert await store.acquire_consumer("chat", holder="p1", lease_seconds=10, after=3) == 3


async def test_consumers_are_independent_and_survive_reopening(make_store: StoreFactory) -> None:
    first = await make_store("shared.db")
    await first.acquire_consumer("a", holder="p1", lease_seconds=10)
    await first.acquire_consumer("b", holder="p1", lease_seconds=10)
    await first.ack_consumer("a", holder="p1", seq=6)
    await first.release_consumer("a", holder="p1")
    second = await make_store("shared.db")
    assert await second.acquire_consumer("a", holder="p2", lease_seconds=10) == 6
    with pytest.raises(errors.ConsumerAlreadyActive):
        await second.acquire_consumer("b", holder="p2", lease_seconds=10)


async def test_bad_leases_and_cursors_are_refused_and_change_nothing(store: Store) -> None:
    with pytest.raises(errors.InvalidInput):
        await store.acquire_consumer("chat", holder="p1", lease_seconds=0)
    with pytest.raises(errors.InvalidInput):
        await store.acquire_consumer("chat", holder="p1", lease_seconds=10, after=-1)
    with pytest.raises(errors.ConsumerAlreadyActive):
        await store.ack_consumer("chat", holder="p1", seq=1)  # never acquired
    assert await store.acquire_consumer("chat", holder="p2", lease_seconds=10) == 0
