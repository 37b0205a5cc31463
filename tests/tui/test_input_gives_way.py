"""Keys first: a key (a paste, a click) read by the program's terminal driver counts as input
waiting, and while it waits the runs streaming in the app's runtime give the event loop up
every few events, so the app takes the key and draws its echo sooner. In the keys benchmark,
with ten runs streaming flat out, a key took a median 14-16 ms to show and up to 52-60 ms;
with this, 8-14 ms and 32-42 ms."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual import events

import tui.app
from runtime.engine.model_call import GIVE_WAY_EVERY
from tests.fakes.scripted import TickCounting, Turn, open_scripted, turns_while_it_streams
from tests.tui.helpers import SIZE, make_app
from tui.input_driver import KeysFirstDriver

PIECES = 1600
"""The scripted model's pieces in a stream (seven characters each)."""


async def test_a_key_a_paste_or_a_click_read_by_the_driver_is_input_waiting_a_mouse_move_is_not(
    db_path: Path, workspace: Path
) -> None:
    runtime = await open_scripted(TickCounting([]), db_path, workspace)
    try:
        app = make_app(runtime, workspace)
        driver = KeysFirstDriver(app)
        driver.send_message(
            events.MouseMove(None, 3, 4, 0, 0, 0, False, False, False, screen_x=3, screen_y=4)
        )
        assert not app.input_pending()
        for message in (
            events.Key("a", "a"),
            events.Paste("two\nlines"),
            events.MouseDown(None, 3, 4, 0, 0, 1, False, False, False, screen_x=3, screen_y=4),
        ):
            app._input_until = 0.0  # as long after the last input as it gets
            driver.send_message(message)
            assert app.input_pending(), message
    finally:
        await runtime.close()


async def test_while_a_key_waits_a_run_streaming_in_the_app_gives_the_loop_up(
    db_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The key counts as waiting for the whole run here (for 50 ms in the program): the
    # stream must not have ended before the check, however slow the machine.
    monkeypatch.setattr(tui.app, "INPUT_WAITS", 600.0)
    provider = TickCounting([Turn(text="abcdefg" * PIECES)] * 2)
    runtime = await open_scripted(provider, db_path, workspace)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            alone = await turns_while_it_streams(runtime, provider)
            app.note_input()  # what the driver does as it reads a key
            giving_way = await turns_while_it_streams(runtime, provider)
    finally:
        await runtime.close()
    assert alone <= 2
    assert giving_way >= PIECES // GIVE_WAY_EVERY - 2
