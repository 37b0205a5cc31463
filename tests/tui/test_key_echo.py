"""Keys first (DESIGN §13, issue #17): a key typed while runs stream goes through as few turns of
the event loop as can be, and its echo is drawn as soon as the frame rate allows."""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from textual import constants, events
from textual.screen import Screen

from runtime.api import Runtime
from tests.tui.helpers import SIZE, main_screen, make_app, wait_until
from tui.frame_pacer import FramePacer

PERIOD = 1 / constants.MAX_FPS


class FrameTimes:
    """When each frame ``screen`` draws from now on began (the loop's clock): updates of the
    screen that had something to draw (headless, nothing is written; the frame is rendered
    all the same)."""

    def __init__(self, screen: Screen[object]) -> None:
        self.times: list[float] = []
        compositor = screen._compositor
        render_update = compositor.render_update
        loop = asyncio.get_running_loop()

        def timed(*args: Any, **kwargs: Any) -> Any:
            began = loop.time()
            update = render_update(*args, **kwargs)
            if update is not None:
                self.times.append(began)
            return update

        compositor.render_update = timed  # type: ignore[method-assign]


async def _typed(box: Any, letter: str, frames: FrameTimes) -> float:
    """``letter`` typed into ``box``: when the frame that drew it began."""
    drawn = len(frames.times)
    box.insert(letter)
    async with asyncio.timeout(10):
        while len(frames.times) == drawn:
            await asyncio.sleep(0)
    return frames.times[drawn]


async def test_a_letter_typed_a_frame_period_after_the_last_frame_is_drawn_at_once(
    runtime: Runtime, workspace: Path
) -> None:
    """Textual's frame clock, after a frame that came late to its tick (the first frame after
    a pause), skips to one or two periods later: a letter typed a period after such a frame
    waited up to another period before its echo was drawn (about half of them did)."""
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        box = screen.composer.input
        await wait_until(pilot, lambda: app.focused is box and app._held_input is None)
        await pilot.pause()
        loop = asyncio.get_running_loop()
        frames = FrameTimes(screen)
        waits: list[float] = []
        for first, second in ("ab", "cd", "ef", "gh", "ij", "kl", "mn", "op", "qr", "st"):
            # A pause (the clock's tick is late when the first letter comes), then a letter a
            # little over a period after the first letter's frame began.
            await asyncio.sleep(3 * PERIOD)
            began = await _typed(box, first, frames)
            await asyncio.sleep(max(0.0, began + 1.1 * PERIOD - loop.time()))
            typed = loop.time()
            waits.append(await _typed(box, second, frames) - typed)
        assert box.text == "abcdefghijklmnopqrst"
    assert max(waits) < PERIOD / 2, [round(wait * 1000, 1) for wait in waits]


async def test_a_letters_echo_is_drawn_in_the_turn_of_the_loop_the_screen_takes_it(
    runtime: Runtime, workspace: Path
) -> None:
    """A repaint is not put off to the loop's next turn (while ten runs stream, each turn is a
    step of every run): the box takes the letter, the screen its change, and the frame is
    drawn then."""
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        box = screen.composer.input
        await wait_until(pilot, lambda: app.focused is box and app._held_input is None)
        await pilot.pause()
        frames = FrameTimes(screen)
        await asyncio.sleep(2 * PERIOD)  # more than a period since the last frame
        loop = asyncio.get_running_loop()
        turns = 0
        drawn = asyncio.Event()

        def turn() -> None:
            nonlocal turns
            if frames.times:
                drawn.set()
            else:
                turns += 1
                loop.call_soon(turn)

        box.insert("x")
        loop.call_soon(turn)
        async with asyncio.timeout(10):
            await drawn.wait()
    assert turns <= 1  # the turns before the one that found the frame drawn (3 on the next turn)


async def _drawn(pacer: FramePacer, frames: list[float], count: int) -> None:
    async with asyncio.timeout(10):
        while len(frames) < count:
            await asyncio.sleep(0)
    assert not pacer.due


class _Screen:
    """What the pacer asks of its screen: whether it still runs."""

    is_running = True


def _pacer(period: float, *, repaint_only: bool = True) -> tuple[FramePacer, list[float]]:
    frames: list[float] = []
    loop = asyncio.get_running_loop()
    pacer = FramePacer(
        _Screen(),  # type: ignore[arg-type]
        lambda: frames.append(loop.time()),
        period=period,
        repaint_only=lambda: repaint_only,
    )
    return pacer, frames


async def test_the_pacer_draws_a_repaint_at_once_a_period_after_the_last_frame() -> None:
    pacer, frames = _pacer(0.05)
    pacer.resume()
    assert len(frames) == 1  # the first frame: nothing was drawn before
    await asyncio.sleep(0.06)
    pacer.resume()
    assert len(frames) == 2
    assert not pacer.due


async def test_the_pacer_draws_a_layout_on_the_next_turn_of_the_loop() -> None:
    """Not in the screen's turn: the widgets finish what they do in it (a scroll to a search
    hit, a mount) before the screen is laid out, as with Textual's timer."""
    pacer, frames = _pacer(0.05, repaint_only=False)
    loop = asyncio.get_running_loop()
    asked = loop.time()
    pacer.resume()
    assert frames == []
    await _drawn(pacer, frames, 1)
    assert frames[0] - asked < 0.025


async def test_the_pacer_draws_a_change_made_within_a_period_when_the_period_ends() -> None:
    pacer, frames = _pacer(0.2)
    pacer.resume()
    pacer.resume()
    pacer.resume()  # asked again before it drew: still one frame
    assert len(frames) == 1
    assert pacer.due
    await _drawn(pacer, frames, 2)
    await asyncio.sleep(0.05)
    assert len(frames) == 2
    # One period after the first frame, not sooner, and not a second period later.
    assert 0.2 <= frames[1] - frames[0] < 0.3


async def test_the_pacer_draws_nothing_once_paused_or_after_its_screen_closed() -> None:
    pacer, frames = _pacer(0.2)
    pacer.resume()
    pacer.resume()  # due when the period ends
    pacer.pause()  # the screen drew meanwhile (a layout)
    await asyncio.sleep(0.25)
    assert len(frames) == 1
    pacer.resume()  # a period later: at once
    pacer.resume()  # due when the period ends
    _Screen.is_running = False
    try:
        await asyncio.sleep(0.25)
        assert len(frames) == 2
        assert not pacer.due
    finally:
        _Screen.is_running = True


@pytest.fixture
def signal_handlers() -> Iterator[None]:
    """Textual's Linux driver installs its own SIGTSTP and SIGCONT handlers when made."""
    before = {number: signal.getsignal(number) for number in (signal.SIGTSTP, signal.SIGCONT)}
    try:
        yield
    finally:
        for number, handler in before.items():
            signal.signal(number, handler)


@pytest.mark.skipif(sys.platform == "win32", reason="Textual's Linux and macOS driver")
async def test_a_key_read_from_the_terminal_is_in_the_box_on_the_third_turn_of_the_loop(
    runtime: Runtime, workspace: Path, signal_handlers: None
) -> None:
    """Textual's own driver hands each key to the loop as a coroutine: a turn to make a task of
    it, one for the task to queue the key for the app, and only then the app's turn and the
    box's: the fourth turn (while ten runs stream, each turn is a step of every run)."""
    app = make_app(runtime, workspace)
    driver_class = app.driver_class
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        box = screen.composer.input
        await wait_until(pilot, lambda: app.focused is box and app._held_input is None)
        await pilot.pause()
        driver = driver_class(app)
        loop = asyncio.get_running_loop()
        turns = 0
        typed = asyncio.Event()

        def turn() -> None:
            nonlocal turns
            if box.text == "x":
                typed.set()
            else:
                turns += 1
                loop.call_soon(turn)

        # As the driver's input thread does; joined, so the key is queued before the next turn.
        reader = threading.Thread(target=driver.process_message, args=(events.Key("x", "x"),))
        reader.start()
        reader.join()
        loop.call_soon(turn)
        async with asyncio.timeout(10):
            await typed.wait()
    assert turns <= 2  # the turns before the one that found the key in the box
