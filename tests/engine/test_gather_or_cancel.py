"""Waiting for several child runs at once (``route`` to several phases): an error in one wait
stops the others instead of leaving them polling the store until the run ends."""

from __future__ import annotations

import asyncio

import pytest

from runtime.engine.delegation import gather_or_cancel


async def test_every_result_comes_back_in_order() -> None:
    async def after(delay: float, value: int) -> int:
        await asyncio.sleep(delay)
        return value

    assert await gather_or_cancel(after(0.02, 1), after(0, 2), after(0.01, 3)) == [1, 2, 3]


async def test_an_error_in_one_wait_cancels_and_awaits_the_others_before_it_goes_on() -> None:
    stopped: list[str] = []
    started = asyncio.Event()

    async def forever(name: str) -> None:
        try:
            started.set()
            await asyncio.Event().wait()
        finally:
            stopped.append(name)

    async def failing() -> None:
        await started.wait()
        raise LookupError("the store failed")

    async with asyncio.timeout(10):
        with pytest.raises(LookupError, match="the store failed"):
            await gather_or_cancel(forever("a"), failing(), forever("b"))
    assert sorted(stopped) == ["a", "b"]  # both gone by the time the error is seen
