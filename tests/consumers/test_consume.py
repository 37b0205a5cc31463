"""``Runtime.consume`` in one process: order, acknowledgement, one holder per name, takeover
from a dead holder, and what is refused (DESIGN §15)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runtime.api import Runtime
from runtime.config import Config
from runtime.consumers import Consumer
from runtime.errors import ConsumerAlreadyActive, CursorOutOfRange, InvalidInput
from runtime.events import DurableEvent


@pytest.fixture
async def runtime(db_path: Path, workspace: Path) -> AsyncIterator[Runtime]:
    opened = await Runtime.open(
        db_path=db_path, workspace=workspace, config=Config(), model="demo:instant", env={}
    )
    try:
        yield opened
    finally:
        await opened.close()


async def _complete(runtime: Runtime, prompt: str = "/stream 1") -> None:
    run = await runtime.start(prompt)
    assert (await runtime.wait(run.id, timeout=30)).state.value == "completed"


async def _take(consumer: Consumer, count: int) -> list[DurableEvent]:
    taken: list[DurableEvent] = []
    async with asyncio.timeout(30):
        async for event in consumer:
            taken.append(event)
            if len(taken) == count:
                return taken
    return taken


async def test_every_durable_event_is_delivered_in_order_from_the_start(runtime: Runtime) -> None:
    await _complete(runtime)
    newest = await runtime.last_seq()
    async with runtime.consume("bot") as consumer:
        events = await _take(consumer, newest)
    assert [e.seq for e in events] == list(range(1, newest + 1))
    assert events == await runtime.events(after=0)


async def test_events_committed_while_consuming_arrive_too(runtime: Runtime) -> None:
    async with runtime.consume("bot") as consumer:
        finished = asyncio.ensure_future(_complete(runtime))
        first = await _take(consumer, 3)
        await finished
        rest = await _take(consumer, await runtime.last_seq() - 3)
    assert [e.seq for e in first + rest] == list(range(1, await runtime.last_seq() + 1))


async def test_restarting_resumes_after_the_last_acknowledged_event(runtime: Runtime) -> None:
    await _complete(runtime)
    async with runtime.consume("bot") as consumer:
        events = await _take(consumer, 4)
        await consumer.ack(events[2])  # the fourth was delivered, never acknowledged
    async with runtime.consume("bot") as again:
        assert again.cursor == 3
        [redelivered] = await _take(again, 1)
    assert redelivered.seq == 4


async def test_a_second_holder_of_the_same_name_is_refused_while_the_first_is_live(
    runtime: Runtime,
) -> None:
    async with runtime.consume("bot"):
        with pytest.raises(ConsumerAlreadyActive) as refused:
            async with runtime.consume("bot"):
                pass
        assert refused.value.code == "consumer_already_active"
        async with runtime.consume("other"):  # another name is free
            pass
    async with runtime.consume("bot"):  # released on leaving
        pass


async def test_a_dead_holder_on_this_host_is_replaced_at_once(runtime: Runtime) -> None:
    await _complete(runtime)
    dead = f"{socket.gethostname()}:{2**22 + 7}:x-deadbeef"  # no such pid
    await runtime.store.acquire_consumer("bot", holder=dead, lease_seconds=3600)
    await runtime.store.ack_consumer("bot", holder=dead, seq=2)
    async with runtime.consume("bot") as consumer:
        assert consumer.cursor == 2
        [event] = await _take(consumer, 1)
    assert event.seq == 3


async def test_a_live_holder_elsewhere_is_not_replaced_before_its_lease_ends(
    runtime: Runtime,
) -> None:
    await runtime.store.acquire_consumer("bot", holder="other-host:1:x-1", lease_seconds=3600)
    with pytest.raises(ConsumerAlreadyActive):
        await runtime.consume("bot").start()


async def test_losing_the_consumer_to_another_process_ends_the_iteration(
    runtime: Runtime,
) -> None:
    await _complete(runtime)
    consumer = Consumer(
        runtime.store,
        "bot",
        after=None,
        wait_for_change=runtime.dispatch.await_change,
        lease_seconds=0.3,
    )
    await consumer.start()
    try:
        [first] = await _take(consumer, 1)
        # Another process takes it over (as if this one had stalled past its lease).
        await runtime.store.acquire_consumer(
            "bot", holder="elsewhere:1:x-1", lease_seconds=3600, replace=consumer.holder
        )
        with pytest.raises(ConsumerAlreadyActive):
            await consumer.ack(first)
        with pytest.raises(ConsumerAlreadyActive):
            async with asyncio.timeout(10):
                async for _ in consumer:
                    pass
    finally:
        await consumer.close()


async def test_bad_names_cursors_and_acknowledgements_are_refused(runtime: Runtime) -> None:
    await _complete(runtime)
    for name in ("", "   ", "a\x1bb", "x" * 201):
        with pytest.raises(InvalidInput):
            runtime.consume(name)
    with pytest.raises(InvalidInput):
        runtime.consume("bot", after=-1)
    with pytest.raises(CursorOutOfRange):
        await runtime.consume("bot", after=10_000).start()
    async with runtime.consume("bot") as consumer:
        [event] = await _take(consumer, 1)
        with pytest.raises(InvalidInput):
            await consumer.ack(event.seq + 1)  # not delivered yet
        await consumer.ack(event)
        assert consumer.cursor == event.seq
