"""The browser's search results: one option per message found: its job's title and age, then
who wrote it (you, the agent, a tool) and a snippet."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widget import Widget
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from runtime.kinds import Role
from tui.widgets._format import age, search_snippet, short

if TYPE_CHECKING:
    from runtime.models import SearchHit

ROLE_LABELS = {Role.USER: "you", Role.ASSISTANT: "agent", Role.TOOL: "tool"}
"""Who wrote a message found, as a hit names them: words that match in several messages of
similar jobs (a prompt, its answer, a file read) read alike without it."""


class SearchResults(OptionList):
    """An option list whose footer says what Enter does (Textual's hides its keys), whose
    hits are cut to the browser's width again when the terminal is resized (cut for the old
    width, a snippet wrapped onto a second line), and where Up on the first hit goes back to
    the search field above (the words kept), not round to the last hit."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select", "Open", tooltip="Open the run at the message found"),
    ]

    class ToField(Message):
        """Up on the first hit: back to the search field, to change the words."""

    def __init__(self, *, hide_ages: bool = False, id: str | None = None) -> None:
        super().__init__(id=id)
        self.hide_ages = hide_ages
        self.hits: list[SearchHit] = []
        self._query = ""
        self._width = 0

    def show_hits(self, query: str, hits: list[SearchHit]) -> None:
        """Show the hits of ``query`` (or that nothing matched), the first one highlighted."""
        self.hits, self._query = hits, query
        self._fill(highlighted=0)

    def action_cursor_up(self) -> None:
        if self.highlighted is None or self.highlighted == 0:
            self.post_message(self.ToField())  # not round to the last hit
        else:
            super().action_cursor_up()

    def _room(self) -> int:
        parent = self.parent
        browser_width = parent.size.width if isinstance(parent, Widget) else self.size.width
        return max(20, browser_width - 6)

    def _fill(self, *, highlighted: int | None) -> None:
        width = self._width = self._room()
        self.clear_options()
        if self.hits:
            self.add_options(
                Option(self._prompt(hit, width), id=str(index))
                for index, hit in enumerate(self.hits)
            )
        else:
            self.add_option(Option(f"No message matches {self._query!r}", disabled=True))
        self.highlighted = highlighted
        self.scroll_to_highlight()

    def _prompt(self, hit: SearchHit, width: int) -> Text:
        """Two rows: the job's title, the message's age at the right; who wrote it, then the
        words around the match. Each cut to ``width``."""
        when = age(hit.created_at, hidden=self.hide_ages)
        title = short(hit.job_title, width - (len(when) + 1 if when else 0))
        gap = width - len(title) - len(when)
        writer = f"{ROLE_LABELS[hit.role]}: " if hit.role is not None else ""
        return Text.assemble(
            (title, "bold"),
            *((" " * gap, ""), (when, "dim")) if when else (),
            "\n",
            "  ",
            (writer, "italic"),
            search_snippet(hit.snippet, width - 2 - len(writer), role=hit.role),
        )

    def on_resize(self, event: events.Resize) -> None:
        if self.display and self._room() != self._width:
            self._fill(highlighted=self.highlighted)
