"""``OneLineInput``: a one-line text field that keeps every line of a paste."""

from __future__ import annotations

from rich.cells import cell_len
from textual import events
from textual.geometry import Region
from textual.widgets import Input


class OneLineInput(Input):
    """An ``Input`` that keeps all of a pasted text, its lines joined by spaces.

    Textual's ``Input`` keeps the first line of a paste and drops the rest without a word: a
    trial pasted three lines as the answer to an agent's question, and the answer sent was the
    first line. One line is all the field holds, so the lines become one."""

    def _on_paste(self, event: events.Paste) -> None:
        event.stop()
        event.prevent_default()  # Input's own handler, which keeps the first line, not run
        lines = [line.strip() for line in event.text.splitlines()]
        text = " ".join(line for line in lines if line)
        if not text:
            return
        if self.selection.is_empty:
            self.insert_text_at_cursor(text)
        else:
            self.replace(text, *self.selection)
        self._show_cursor()

    def _show_cursor(self) -> None:
        """Scroll the cursor into view. ``Input`` does not on the first change of its value
        after it is shown (it takes that one for its initial value): a long paste into the
        empty field showed its start, and its end and the cursor stayed past the edge until
        a key was typed (a new-user trial, at 80x24)."""
        cursor = cell_len(self.value[: self.cursor_position].expandtabs(4))
        if self.cursor_at_end:
            cursor += 1  # the cursor's own cell, after the text
        self.scroll_to_region(Region(cursor, 0, 1, 1), animate=False, force=True)
