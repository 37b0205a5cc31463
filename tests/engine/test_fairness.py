"""The event loop gives the GIL up while it is busy, so threads (the store's worker, Textual's
input thread) are not starved by a run streaming flat out; and stays quiet while idle. A run
streaming flat out gives the loop itself up every few events while a person's input waits."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from runtime.engine import fairness
from runtime.engine.model_call import GIVE_WAY_EVERY
from tests.fakes.scripted import TickCounting, Turn, open_scripted, turns_while_it_streams


def _record_yields(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    yields: list[float] = []
    real_sleep = time.sleep

    def sleep(seconds: float) -> None:
        yields.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(fairness.time, "sleep", sleep)
    return yields


async def test_while_the_loop_is_busy_it_gives_the_gil_up_every_few_milliseconds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    yields = _record_yields(monkeypatch)
    closing = asyncio.Event()
    sharer = asyncio.create_task(fairness.share_the_gil(closing))
    try:
        async with asyncio.timeout(30):
            while len(yields) < 5:  # the loop's thread on the CPU all the time, as a stream
                spin_until = time.thread_time() + 0.001
                while time.thread_time() < spin_until:
                    pass
                await asyncio.sleep(0)
    finally:
        closing.set()
        sharer.cancel()
    assert set(yields) == {0}


async def test_while_the_loop_is_idle_it_only_looks_a_few_times_a_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    yields = _record_yields(monkeypatch)
    monkeypatch.setattr(fairness, "IDLE_INTERVAL", 0.05)
    closing = asyncio.Event()
    sharer = asyncio.create_task(fairness.share_the_gil(closing))
    await asyncio.sleep(0.3)  # the scenario: an idle loop (six looks), not a wait for it
    closing.set()
    sharer.cancel()
    assert yields == []


async def test_a_stream_flat_out_gives_the_loop_up_every_few_events_while_input_waits(
    tmp_path: Path,
) -> None:
    pieces = 1600  # the scripted model sends 7 characters a piece
    provider = TickCounting([Turn(text="abcdefg" * pieces)] * 2)
    runtime = await open_scripted(provider, tmp_path / "agent.db", tmp_path)
    try:
        alone = await turns_while_it_streams(runtime, provider)
        runtime.give_way_to_input(lambda: True)  # a key waits, all along
        giving_way = await turns_while_it_streams(runtime, provider)
    finally:
        await runtime.close()
    # Alone, the stream keeps the loop from its first piece to its last (its model never
    # waits); with input waiting, another task gets a turn every GIVE_WAY_EVERY events.
    assert alone <= 2
    assert giving_way >= pieces // GIVE_WAY_EVERY - 2
