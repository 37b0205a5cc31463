"""A screen's changes drawn as soon as the frame rate allows, not on a timer's grid.

Textual draws a screen's changes from an interval timer of ``MAX_FPS`` ticks a second
(``Screen._update_timer``; the program runs it at 120, ``tui.cli.UI_FPS``), paused while nothing
changed and resumed when something did. After a tick that came more than a period late (the
first frame after a pause), Textual 8.2's timer skips the ticks it missed and one more: the next
frame is due one to two periods later, not one. While ten runs stream, frames follow each other
closely (the status line, the browser's rows, the answer on screen), so a key's echo could wait
for such a tick: in the keys benchmark, from the box taking the key to its echo being written,
up to 24-32 ms in half the sections, against 16-21 ms with this pacer.

``FramePacer`` stands in for that timer: a change is drawn once a period has passed since the
last frame began, not a tick later. A repaint (a key's echo: the box drawn again) is drawn at
once, in the turn of the loop that asked for it (the screen asks once it has taken that turn's
changes); a frame that lays the screen out is drawn on the loop's next turn, as Textual's timer
would at the earliest: widgets finish what they do in that turn (a scroll, a mount) before the
layout, as they always have. Still at most ``MAX_FPS`` frames a second, each as early as that
allows.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from textual import constants
from textual.screen import Screen


class FramePacer:
    """What a screen asks of its update timer (``resume`` when something changed, ``pause``
    when it drew), calling ``draw`` (``Screen._on_timer_update``) at most once a ``period``."""

    def __init__(
        self,
        screen: Screen[Any],
        draw: Callable[[], None],
        *,
        period: float | None = None,
        repaint_only: Callable[[], bool] = lambda: False,
    ) -> None:
        self._screen = screen
        self._draw = draw
        self._repaint_only = repaint_only
        """Whether what is to be drawn is only a repaint (no layout): drawn at once."""
        self.period = 1 / constants.MAX_FPS if period is None else period
        self._last = float("-inf")
        """When the last frame began (the loop's clock)."""
        self._due: asyncio.TimerHandle | None = None

    @property
    def due(self) -> bool:
        """Whether a frame is due (something changed and has not been drawn yet)."""
        return self._due is not None

    def resume(self) -> None:
        """Something changed: draw it once a period has passed since the last frame (a repaint
        at once, a layout on the loop's next turn)."""
        if self._due is not None:
            return
        loop = asyncio.get_running_loop()
        now, due = loop.time(), self._last + self.period
        if now >= due and self._repaint_only():
            self._frame()
        else:
            self._due = loop.call_at(max(now, due), self._frame)

    def pause(self) -> None:
        """Nothing more to draw (a frame was just drawn, or the screen was laid out)."""
        due, self._due = self._due, None
        if due is not None:
            due.cancel()

    stop = pause

    def _frame(self) -> None:
        self._due = None
        screen = self._screen
        if not screen.is_running:
            return  # closed meanwhile
        self._last = asyncio.get_running_loop().time()
        try:
            self._draw()
        except Exception as error:  # as Textual's timer does: the app reports it and exits
            screen.app._handle_exception(error)
