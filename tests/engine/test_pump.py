"""The event pump publishes what this process commits as it commits (no read of the event log),
and reads by cursor only what other processes committed, keeping seq order across both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime.bus import EventBus
from runtime.engine.pump import Pump
from runtime.errors import RunNotFound
from runtime.events import Event
from runtime.models import Role, TextBlock
from runtime.store.base import NewMessage, NewRun
from runtime.store.sqlite import SqliteStore


def _new_run(text: str) -> NewRun:
    return NewRun(agent="default", model="demo", input=text, workspace="/w", owner_id="o")


def _drain(subscription: Any) -> list[Event]:
    seen: list[Event] = []
    while (event := subscription.get_nowait()) is not None:
        seen.append(event)
    return seen


@pytest.fixture
async def here(db_path: Path) -> Any:
    store = SqliteStore(db_path)
    await store.open()
    yield store
    await store.close()


async def test_events_committed_here_reach_subscribers_as_they_commit_without_reading_the_log(
    here: SqliteStore,
) -> None:
    reads = 0
    read_events = here.read_events

    async def counted(**kwargs: Any) -> Any:
        nonlocal reads
        reads += 1
        return await read_events(**kwargs)

    here.read_events = counted  # type: ignore[method-assign]
    bus = EventBus()
    pump = Pump(here, bus, {})
    pump.start_after(await here.last_seq())
    subscription = bus.subscribe(lambda event: True, lambda job_id, run_id: True)
    run = await here.create_run(_new_run("hello"))
    run = await here.claim_run(run.id, owner_id="o")
    await here.commit_message(
        run.id,
        token=run.execution_token or "",
        message=NewMessage(role=Role.ASSISTANT, content=[TextBlock(text="hi")]),
    )
    published = _drain(subscription)
    assert reads == 0
    logged = await read_events(after=0, limit=100)
    assert [(e.kind, getattr(e, "seq", 0)) for e in published] == [(e.kind, e.seq) for e in logged]
    assert [e.kind for e in published][-1] == "message_committed"


async def test_a_write_that_rolls_back_publishes_nothing(here: SqliteStore) -> None:
    bus = EventBus()
    Pump(here, bus, {})
    subscription = bus.subscribe(lambda event: True, lambda job_id, run_id: True)
    with pytest.raises(RunNotFound):
        await here.claim_run("no-such-run", owner_id="o")
    assert _drain(subscription) == []


async def test_events_of_another_process_are_read_by_cursor_and_keep_their_order(
    here: SqliteStore, db_path: Path
) -> None:
    bus = EventBus()
    pump = Pump(here, bus, {})
    pump.start_after(await here.last_seq())
    subscription = bus.subscribe(lambda event: True, lambda job_id, run_id: True)
    other = SqliteStore(db_path)
    await other.open()
    try:
        theirs = await other.create_run(_new_run("from another process"))
        ours = await here.create_run(_new_run("from here"))
        # Ours came after theirs, which nobody here published yet: it waits for the poll.
        assert _drain(subscription) == []
        await pump.pump()
        published = _drain(subscription)
    finally:
        await other.close()
    seqs = [getattr(e, "seq", 0) for e in published]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert [e.run_id for e in published] == [theirs.id] * (len(published) // 2) + [ours.id] * (
        len(published) // 2
    )
    # Nothing twice: the next commit here is published alone, directly.
    await here.create_run(_new_run("again"))
    again = _drain(subscription)
    assert again and all(getattr(e, "seq", 0) > seqs[-1] for e in again)
