"""Plain text that grows at its end, cheaply: the long tail of a huge streamed answer.

A ``Static`` re-wraps (and, through Textual's caches, keeps strips for) all of its text whenever
it changes, so a megabyte of text costs hundreds of milliseconds per update. ``StreamText`` is a
Line API widget instead: it keeps the text as wrapped rows (plain strings, nothing for the garbage
collector to walk), re-wraps only the last row of the last line when text is appended, and draws
only the rows on screen. Its height is the number of rows, so a parent with ``height: auto``
lays it out like any other widget. Re-wrapping everything happens only when the width changes.
"""

from __future__ import annotations

import asyncio
from bisect import bisect_right

from rich.cells import cell_len, get_character_cell_size
from rich.segment import Segment
from rich.style import Style
from textual.geometry import Size
from textual.selection import Selection
from textual.strip import Strip
from textual.widget import Widget

from tui.widgets.sized_by_layout import SizedByLayout
from tui.widgets.tall_widget import TallWidget

_CLEAN: dict[int, str | None] = {code: None for code in range(32) if code not in (9, 10)}
_CLEAN[9] = "    "
_CLEAN[127] = None
"""Tabs become four spaces; other control characters (and carriage returns) are dropped."""

SLICE_CHARS = 64 * 1024
"""``set_text``/``extend`` append this much per event-loop turn, so nothing stalls the UI."""


def wrap_line(line: str, width: int) -> tuple[list[str], int]:
    """Rows of one logical line (no newline in it) at ``width`` cells, and where the last row
    starts in ``line``. Greedy word wrap: re-wrapping from the start of any row gives the same
    rows as wrapping the whole line, which is what makes appending cheap."""
    if width <= 0:
        width = 1
    if line.isascii():
        return _wrap_ascii(line, width)
    if cell_len(line) <= width:
        return [line], 0
    return _wrap_cells(line, width)


def _break(line: str, start: int, limit: int) -> tuple[str, int]:
    """The row that starts at ``start`` when ``line[start:limit]`` is what fits (and more
    follows): up to the last space before ``limit``, or the whole fit when one word is longer
    than the row; and where the next row starts (past the spaces)."""
    if line[limit] == " ":
        row = line[start:limit].rstrip(" ")
        following = limit
    else:
        space = line.rfind(" ", start, limit)
        row = line[start:space].rstrip(" ") if space > start else ""
        following = space
        if not row:  # one word longer than the row: fold it
            row = line[start:limit]
            following = limit
    while following < len(line) and line[following] == " ":
        following += 1
    return row, following


def _wrap_ascii(line: str, width: int) -> tuple[list[str], int]:
    length = len(line)
    if length <= width:
        return [line], 0
    rows: list[str] = []
    start = 0
    while length - start > width:
        row, start = _break(line, start, start + width)
        rows.append(row)
    rows.append(line[start:])
    return rows, start


def _wrap_cells(line: str, width: int) -> tuple[list[str], int]:
    """``_wrap_ascii`` for text whose characters may take 0 or 2 cells (CJK, emoji, combining
    marks): the same greedy rule, counted in cells. A character wider than the row gets a row
    of its own."""
    sizes = [get_character_cell_size(character) for character in line]
    length = len(line)
    remaining = sum(sizes)
    rows: list[str] = []
    start = 0
    while remaining > width:
        limit, used = start, 0
        while used + sizes[limit] <= width:  # stops inside the line: the rest is wider
            used += sizes[limit]
            limit += 1
        limit = max(limit, start + 1)
        if limit >= length:  # the last character, alone wider than the row: the last row
            break
        row, following = _break(line, start, limit)
        rows.append(row)
        remaining -= sum(sizes[start:following])
        start = following
    rows.append(line[start:])
    return rows, start


class StreamText(SizedByLayout, TallWidget, Widget):
    """Plain, word-wrapped text that is appended to; only the rows on screen are drawn."""

    DEFAULT_CSS = """
    StreamText { height: auto; }
    """

    def __init__(
        self,
        text: str = "",
        *,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._parts: list[str] = []
        self._length = 0
        self._lines: list[str] = [""]
        """Logical lines of the cleaned text; the last one is still open."""
        self._line_starts: list[int] = [0]
        """Where each logical line starts in the (uncleaned) text."""
        self._line_rows: list[int] = [0]
        """The first row of each logical line."""
        self._rows: list[str] = [""]
        self._last_row_start = 0
        """Where the last row starts in the last logical line."""
        self._width = 0
        self._style: Style | None = None
        if text:
            self._add(text)

    # --- the text --------------------------------------------------------------------------
    @property
    def text(self) -> str:
        if len(self._parts) > 1:
            self._parts = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""

    @property
    def row_count(self) -> int:
        return len(self._rows)

    @property
    def line_count(self) -> int:
        """How many lines the text has: at least as many rows, at any width."""
        return len(self._lines)

    @property
    def rows(self) -> list[str]:
        """The wrapped rows as shown (at the width of the last layout)."""
        return list(self._rows)

    def append(self, text: str) -> None:
        """Add ``text`` at the end and redraw; costs about the size of ``text``."""
        if not text:
            return
        before = len(self._rows)
        self._add(text)
        self.refresh(layout=len(self._rows) != before)

    async def extend(self, text: str) -> None:
        """``append`` a large text a slice at a time, yielding to the event loop in between."""
        for start in range(0, len(text), SLICE_CHARS):
            self.append(text[start : start + SLICE_CHARS])
            if start + SLICE_CHARS < len(text):
                await asyncio.sleep(0)

    def truncate(self, length: int) -> None:
        """Keep only the first ``length`` characters of the text."""
        if length >= self._length:
            return
        text = self.text[: max(length, 0)]
        index = bisect_right(self._line_starts, len(text)) - 1
        line_start = self._line_starts[index]
        del self._lines[index:]
        del self._line_starts[index:]
        del self._rows[self._line_rows[index] :]
        del self._line_rows[index:]
        self._lines.append("")
        self._line_starts.append(line_start)
        self._line_rows.append(len(self._rows))
        self._rows.append("")
        self._last_row_start = 0
        self._parts = [text] if text else []
        self._length = len(text)
        self._add_line_text(text[line_start:].translate(_CLEAN))
        self.refresh(layout=True)

    async def set_text(self, text: str) -> None:
        """Replace all of the text, a slice at a time."""
        self.truncate(0)
        await self.extend(text)

    def _add(self, text: str) -> None:
        self._parts.append(text)
        start = self._length
        self._length += len(text)
        cleaned = text.translate(_CLEAN)
        pieces = cleaned.split("\n")  # cleaning keeps every line break and adds none
        raw = pieces if cleaned == text else text.split("\n")
        self._add_line_text(pieces[0])
        if len(pieces) == 1:
            return
        # Whole lines: one pass, no per-line re-wrap of an open row (a flush of a fast stream
        # brings thousands of them).
        rows, line_rows, width = self._rows, self._line_rows, self._width
        offset = start + len(raw[0]) + 1
        last_start = 0
        for piece, raw_piece in zip(pieces[1:], raw[1:], strict=True):
            self._lines.append(piece)
            self._line_starts.append(offset)
            offset += len(raw_piece) + 1
            line_rows.append(len(rows))
            if not width:
                rows.append("")  # not laid out yet: wrapped on the first layout
            elif len(piece) <= width and piece.isascii():
                rows.append(piece)
                last_start = 0
            else:
                wrapped, last_start = wrap_line(piece, width)
                rows.extend(wrapped)
        self._last_row_start = last_start

    def _add_line_text(self, cleaned: str) -> None:
        """Extend the open (last) logical line, re-wrapping only its last row."""
        if not cleaned:
            return
        line = self._lines[-1] + cleaned
        self._lines[-1] = line
        if not self._width:
            return  # not laid out yet: wrapped on the first layout
        rows, last_start = wrap_line(line[self._last_row_start :], self._width)
        self._rows[-1:] = rows
        self._last_row_start += last_start

    def _rewrap(self, width: int) -> None:
        self._width = width
        rows: list[str] = []
        line_rows: list[int] = []
        last_start = 0
        for line in self._lines:
            line_rows.append(len(rows))
            wrapped, last_start = wrap_line(line, width)
            rows.extend(wrapped)
        self._rows = rows
        self._line_rows = line_rows
        self._last_row_start = last_start

    # --- Textual ---------------------------------------------------------------------------
    def get_content_width(self, container: Size, viewport: Size) -> int:
        return container.width

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        if width != self._width:
            self._rewrap(width)
        return len(self._rows)

    def render_line(self, y: int) -> Strip:
        width = self.content_size.width
        if width != self._width:
            self._rewrap(width)
        style = self._style
        if style is None:
            style = self._style = self.rich_style
        if y >= len(self._rows):
            return Strip.blank(width, style)
        row = self._rows[y]
        return Strip([Segment(row, style)]).crop_extend(0, width, style).apply_offsets(0, y)

    def notify_style_update(self) -> None:
        self._style = None
        super().notify_style_update()

    def get_selection(self, selection: Selection) -> tuple[str, str] | None:
        return selection.extract("\n".join(self._rows)), "\n"
