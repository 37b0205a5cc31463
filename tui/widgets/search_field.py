"""``SearchField``: the browser's search box, searching as the person types.

A new-user trial typed words and waited for hits that came only at Enter. The field asks for a
search once typing pauses for ``PAUSE`` (a search of a million messages takes 2-60 ms on a
thread, so it keeps up with typing without asking for one per key), from ``LIVE_FROM``
characters on (a single letter matches nearly everything). The hits show under the field while
the focus stays in it; Enter, or Down, moves into them. Enter searches at once whatever the
length (the words may have changed since the last search, or be one letter)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.message import Message
from textual.timer import Timer
from textual.widgets import Input

from tui.widgets.ordered_keys import OrderedInput

PAUSE = 0.2
"""Seconds typing must pause before the words typed are searched."""
LIVE_FROM = 2
"""Characters the words need before they are searched while typed."""


class SearchField(OrderedInput):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("down", "to_results", "Hits", show=False)]

    @dataclass
    class Wanted(Message):
        """Search for ``query``; ``typed``: asked while typing (the focus stays in the field),
        not by Enter (it moves to the hits)."""

        query: str
        typed: bool

    @dataclass
    class Emptied(Message):
        """No words, or fewer than ``LIVE_FROM`` while typing: no hits to show; ``leave``:
        Enter on the empty field (the search is left), not the words cut while typing (the
        focus stays)."""

        leave: bool

    class ToResults(Message):
        """Down in the field: into the hits shown, if any."""

    def __init__(self, *, placeholder: str = "", id: str | None = None) -> None:
        super().__init__(placeholder=placeholder, id=id)
        self._pause: Timer | None = None
        self._refining = False

    def refine(self) -> None:
        """Focus the field to change its words (back from the hits): the cursor after them,
        not all of them selected to be replaced (as ``/`` does for a new search)."""
        self._refining = True
        self.focus()

    def on_focus(self) -> None:
        if self._refining:
            self._refining = False
            # After Input's own focus handling (which selects all): the next message.
            self.call_later(self.action_end)

    def _stop_pause(self) -> None:
        if self._pause is not None:
            self._pause.stop()
            self._pause = None

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self._stop_pause()
        query = event.value.strip()
        if len(query) < LIVE_FROM:
            # Too few to search as typed: the hits of longer words would stay, read as theirs.
            self.post_message(self.Emptied(leave=False))
        else:
            self._pause = self.set_timer(PAUSE, self._typed)

    def _typed(self) -> None:
        self._pause = None
        query = self.value.strip()
        if len(query) >= LIVE_FROM:
            self.post_message(self.Wanted(query, typed=True))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._stop_pause()
        query = event.value.strip()
        self.post_message(self.Wanted(query, typed=False) if query else self.Emptied(leave=True))

    def action_to_results(self) -> None:
        self.post_message(self.ToResults())

    def on_unmount(self) -> None:
        self._stop_pause()
