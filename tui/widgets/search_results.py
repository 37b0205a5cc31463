"""The browser's search results: one option per message found: its job's title and age, then
who wrote it (you, the agent, a tool) and a snippet. The ages tick as the browser's do: a timer
recomputes them from the hits' timestamps (no query) and redraws the hits whose age changed (a
trial read "46s" on a hit minutes later)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widget import Widget
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from runtime.kinds import Role
from tui.widgets._format import AGE_TICK, age, search_snippet, short

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
        # The browser's keys for the job of the row under the cursor: here, the hit's job.
        # Unshown, e and x wrote and archived the job under the job tree's cursor, hidden
        # behind the hits (a new-user trial archived a job it could not see).
        Binding("e", "screen.export", "Export", tooltip="Export the hit's job"),
        Binding("x", "screen.archive_job", "Archive", tooltip="Archive the hit's job"),
    ]

    class ToField(Message):
        """Up on the first hit: back to the search field, to change the words."""

    def __init__(self, *, hide_ages: bool = False, id: str | None = None) -> None:
        # Plain options: "No message matches '[/usr]'" raised MarkupError (hits are Text).
        super().__init__(id=id, markup=False)
        self.hide_ages = hide_ages
        self.hits: list[SearchHit] = []
        self._query = ""
        self._width = 0
        self.now: float | None = None
        """The clock the ages are computed against (None: the wall clock)."""
        self._shown_ages: list[str] = []
        """The age each hit is drawn with."""

    def on_mount(self) -> None:
        if not self.hide_ages:
            self.set_interval(AGE_TICK, self.tick)

    def tick(self, now: float | None = None) -> None:
        """Redraw the hits whose age changed (computed from their timestamps, no query)."""
        self.now = now
        for index, hit in enumerate(self.hits):
            if self._age(hit) != self._shown_ages[index]:
                self.replace_option_prompt_at_index(index, self._prompt(index, self._width))

    def show_hits(self, query: str, hits: list[SearchHit]) -> None:
        """Show the hits of ``query`` (or that nothing matched), the first one highlighted."""
        self.hits, self._query = hits, query
        self._fill(highlighted=0)

    @property
    def highlighted_hit(self) -> SearchHit | None:
        """The hit under the cursor (None when nothing matched)."""
        index = self.highlighted
        return self.hits[index] if index is not None and index < len(self.hits) else None

    def drop_job(self, job_id: str) -> None:
        """The hits of ``job_id`` go (its job was archived: search leaves it out)."""
        kept = [hit for hit in self.hits if hit.job_id != job_id]
        if len(kept) == len(self.hits):
            return
        highlighted = self.highlighted or 0
        gone_before = sum(hit.job_id == job_id for hit in self.hits[:highlighted])
        self.hits = kept
        self._fill(highlighted=min(highlighted - gone_before, len(kept) - 1) if kept else None)

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
        self._shown_ages = ["" for _ in self.hits]
        if self.hits:
            self.add_options(
                Option(self._prompt(index, width), id=str(index)) for index in range(len(self.hits))
            )
        else:
            self.add_option(Option(f"No message matches {self._query!r}", disabled=True))
        self.highlighted = highlighted
        self.scroll_to_highlight()

    def _prompt(self, index: int, width: int) -> Text:
        """The hit at ``index`` in two rows: the job's title, the message's age at the right;
        who wrote it, then the words around the match. Each cut to ``width``."""
        hit = self.hits[index]
        when = self._shown_ages[index] = self._age(hit)
        title = short(hit.job_title, width - (len(when) + 1 if when else 0))
        gap = width - cell_len(title) - len(when)
        writer = f"{ROLE_LABELS[hit.role]}: " if hit.role is not None else ""
        return Text.assemble(
            (title, "bold"),
            *((" " * gap, ""), (when, "dim")) if when else (),
            "\n",
            "  ",
            (writer, "italic"),
            search_snippet(hit.snippet, width - 2 - len(writer), role=hit.role),
        )

    def _age(self, hit: SearchHit) -> str:
        return age(hit.created_at, now=self.now, hidden=self.hide_ages)

    def on_resize(self, event: events.Resize) -> None:
        if self.display and self._room() != self._width:
            self._fill(highlighted=self.highlighted)
