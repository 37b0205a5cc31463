"""Markdown as one widget, its blocks rendered once per width; it may grow at its end.

Textual's Markdown widget is a widget per block; a sealed part of a huge answer kept that way
costs every later layout pass (hundreds of widgets walked) and the garbage collector (hundreds
of objects per widget), and while it streams, each write parses its last block again and, for
a list, mounts every item again: widgets styled and laid out, then laid out once more as their
sizes settle, a whole-screen layout a frame. This widget renders the text with Rich's Markdown
and draws the rows on screen from that.

The text is cut into top-level blocks (at a blank line outside fenced code, before a line that
starts at its first column), each rendered on its own and separated by one blank row. A block
is rendered once per width; text appended while an answer streams only renders the open block
at the end again, so the cost of an append does not grow with the message.

A layout pass renders sealed blocks for at most ``RENDER_BUDGET`` seconds (at least one
block); the rest follows after the frame, ``RESUME_BUDGET`` at a time. A long answer whose
first piece brings tens of KB (a fast stream's first flush) would otherwise render its whole
head with Rich inside the one layout that also mounts the answer, the new job in the browser
and the footer's keys: a single frame of over 30 ms, in which keys wait.
"""

from __future__ import annotations

import re
import time
from functools import cache
from typing import TYPE_CHECKING, ClassVar

from rich.console import Console, ConsoleOptions, RenderResult
from rich.markdown import ListItem, MarkdownElement
from rich.markdown import Markdown as RichMarkdown
from rich.segment import Segment
from rich.style import Style
from textual.geometry import Size
from textual.strip import Strip
from textual.widget import Widget

from tui.widgets.sized_by_layout import SizedByLayout
from tui.widgets.tall_widget import TallWidget

if TYPE_CHECKING:
    from markdown_it import MarkdownIt


class _NumberedItem(ListItem):
    """A list item numbered "1." as the live Markdown widget shows it (Rich writes "1")."""

    def render_number(
        self, console: Console, options: ConsoleOptions, number: int, last_number: int
    ) -> RenderResult:
        width = len(str(last_number)) + 2
        lines = console.render_lines(
            self.elements, options.update(width=options.max_width - width), style=self.style
        )
        style = console.get_style("markdown.item.number", default="none")
        numeral = Segment(f"{number}.".rjust(width - 1) + " ", style)
        padding = Segment(" " * width, style)
        for index, line in enumerate(lines):
            yield numeral if index == 0 else padding
            yield from line
            yield Segment("\n")


@cache
def _parser() -> MarkdownIt:
    """One Markdown parser for every message (imported and built on first use). Rich builds
    one per ``Markdown`` object: its rule chains and linkify patterns cost more than parsing a
    short message, and a window of settled messages is dozens of them."""
    from markdown_it import MarkdownIt

    return MarkdownIt().enable("strikethrough").enable("table")


class _Markdown(RichMarkdown):
    elements: ClassVar[dict[str, type[MarkdownElement]]] = {
        **RichMarkdown.elements,
        "list_item_open": _NumberedItem,
    }

    def __init__(self, markup: str) -> None:
        # Rich's own __init__ with its defaults, but the shared parser (parsing keeps no state
        # in the parser between calls).
        self.markup = markup
        self.parsed = _parser().parse(markup)
        self.code_theme = "monokai"
        self.justify = None
        self.style = "none"
        self.hyperlinks = True
        self.inline_code_lexer = None
        self.inline_code_theme = self.code_theme


_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_SPACE = " \t\r\n"
"""What a blank line may hold."""
_LINK_DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:", re.MULTILINE)
"""A link reference definition: links elsewhere in the text use it, so that text is rendered
as one block."""


def block_starts(text: str) -> list[int]:
    """Where the top-level blocks of ``text`` after its first begin: the offsets of the lines
    that start at their first column after a blank line, outside fenced code. What comes before
    each renders the same however ``text`` goes on: a list item's continuation, indented code
    and the inside of a fence never begin a block, and a trailing blank line does not either
    (the next line may continue a list item)."""
    starts: list[int] = []
    offset = 0
    fence: str | None = None
    blank = False
    pieces = text.split("\n")  # lines as Markdown sees them (only "\n" ends one)
    for index, piece in enumerate(pieces):
        line = piece if index == len(pieces) - 1 else piece + "\n"
        if not line:
            break  # the text ends with its last line break
        marker = _FENCE.match(line)
        if fence is not None:
            closing = marker is not None and not line[marker.end() :].strip(_SPACE)
            if closing and marker is not None and marker.group(1).startswith(fence):
                fence = None
        else:
            if blank and line[:1] not in (" ", "\t", "\n", "\r"):
                starts.append(offset)
            if marker is not None:
                fence = marker.group(1)
        blank = fence is None and not line.strip(_SPACE)
        offset += len(line)
    return starts


RENDER_BUDGET = 0.003
"""Seconds of rendering sealed blocks per layout pass (time, not characters: a table or a
highlighted code block costs Rich several times what a paragraph of the same length does)."""
RESUME_BUDGET = 0.012
"""Seconds per pass after the frame: a callback of its own, so it may take longer; each pass
costs a layout of the screen to show what it rendered, so fewer passes are cheaper."""
RESUME_DELAY = 0.02
"""Seconds from the layout that paused to the next pass. Not right after the frame: run in
the event loop's next turn, a pass added its time to that frame's (a 24 ms frame and a 12 ms
pass: 36 ms in which a key waited)."""

AHEAD_BUDGET = 0.02
"""Seconds of rendering outside a layout pass (``render_ahead``, ``append``): in a callback of
its own, before the frame; what is left follows after the frame, as after a layout that
paused."""

_GAP = Strip([])
"""The blank row between two blocks (one for all: a row's caches are per Strip)."""


def _trimmed(strips: list[Strip]) -> list[Strip]:
    """Without the empty rows Rich puts before or after some blocks (a list, a rule): the
    widget separates its blocks itself."""
    first, last = 0, len(strips)
    while first < last and not strips[first].cell_length:
        first += 1
    while last > first and not strips[last - 1].cell_length:
        last -= 1
    return strips[first:last]


class FrozenMarkdown(SizedByLayout, TallWidget, Widget):
    """Markdown drawn from rows rendered once per width and block (see the module's text)."""

    DEFAULT_CSS = """
    FrozenMarkdown { height: auto; }
    """

    def __init__(self, markdown: str, *, classes: str | None = None) -> None:
        super().__init__(classes=classes)
        self._sealed: list[str] = []
        """The complete blocks, as written (their blank lines after them included)."""
        self._open = ""
        """The text after them: the block still being written, rendered again when it grows."""
        self._whole = False
        """The text defines link references: it is one block, rendered whole."""
        self._width = -1
        self._style: Style | None = None
        self._rendered = 0
        """How many of the sealed blocks ``_sealed_strips`` holds."""
        self._sealed_strips: list[Strip] = []
        self._open_strips: list[Strip] | None = None
        self._strips: list[Strip] = []
        self._paused = False
        """Rendering stopped at its budget; it goes on after the frame (``_resume``)."""
        self.append(markdown)

    @property
    def source(self) -> str:
        """All of the text."""
        return "".join(self._sealed) + self._open

    def set_source(self, markdown: str) -> None:
        """Show ``markdown`` instead (rendered again, at the next layout)."""
        self._sealed, self._open, self._whole = [], "", False
        self._forget()
        self.append(markdown)
        if self.is_mounted:
            self.refresh(layout=True)  # also when it is empty now

    def append(self, text: str) -> None:
        """Add ``text`` at the end: the blocks it completes are sealed (rendered once more,
        then never again at this width), the open block at the end is rendered again."""
        if not text:
            return
        self._open += text
        if not self._whole and _LINK_DEFINITION.search(self._open):
            self._whole = True
            self._open = "".join(self._sealed) + self._open
            self._sealed = []
            self._forget()
        if not self._whole:
            start = 0
            for end in block_starts(self._open):
                self._sealed.append(self._open[start:end])
                start = end
            self._open = self._open[start:]
        self._open_strips = None
        if not self.is_mounted:
            return
        if self._width < 0:
            self.refresh(layout=True)
            return
        # Rendered at once at the width it has: the screen is laid out again only when the
        # height changed, not for every write into the same rows. Not in a layout pass: the
        # blocks it seals are rendered with a longer budget than the layout's (the rest of a
        # streaming answer's head, when the piece that completes it comes, was rendered 3 ms
        # at a time, each followed by a frame of its own).
        rows = len(self._strips)
        self._render_at(self._width, AHEAD_BUDGET)
        self.refresh(layout=len(self._strips) != rows)

    @property
    def drawn_rows(self) -> int:
        """How many rows are drawn now (0 before the first layout or ``render_ahead``)."""
        return len(self._strips)

    @property
    def settled(self) -> bool:
        """Every block of the source is drawn at the width it has: none waits for a later
        frame (a long source is rendered a time budget at a time, see ``_resume``)."""
        return self._width >= 0 and not self._paused and self._rendered == len(self._sealed)

    def _forget(self) -> None:
        self._width = -1
        self._paused = False
        self._rendered = 0
        self._sealed_strips = []
        self._open_strips = None
        self._strips = []

    def _render_block(self, source: str, width: int) -> list[Strip]:
        options = self.app.console_options.update_width(max(width, 1)).update(highlight=False)
        lines = self.app.console.render_lines(
            _Markdown(source), options, style=self._style, pad=False
        )
        return _trimmed([Strip(Segment.simplify(line)) for line in lines])

    def _render_at(self, width: int, budget: float | None = None) -> None:
        if width != self._width:
            self._forget()
            self._style = self.rich_style
            self._width = width
        elif self._paused:
            return  # the next blocks are rendered after this frame (``_resume``)
        if self._rendered == len(self._sealed) and self._open_strips is not None:
            return
        until = time.perf_counter() + (RENDER_BUDGET if budget is None else budget)
        first = self._rendered
        while self._rendered < len(self._sealed):
            if self._rendered > first and time.perf_counter() > until:
                # What is rendered is shown; the rest after this frame, a budget at a time.
                self._strips = self._sealed_strips
                if self.is_mounted:
                    self._paused = True
                    self.set_timer(RESUME_DELAY, self._resume)
                return
            block = self._render_block(self._sealed[self._rendered], width)
            self._rendered += 1
            if block and self._sealed_strips:
                self._sealed_strips.append(_GAP)
            self._sealed_strips.extend(block)
        self._open_strips = self._render_block(self._open, width) if self._open.strip() else []
        gap = [_GAP] if self._sealed_strips and self._open_strips else []
        self._strips = self._sealed_strips + gap + self._open_strips

    def render_ahead(self, width: int) -> None:
        """Render the blocks now, before the first layout, at ``width``: the width that layout
        is expected to give (a streaming answer's complete head, as the answer is mounted).
        That layout then finds them drawn, and no frame after it is needed to show the rest
        (each such frame lays out and draws the screen again: ~10 ms, twice for the head of
        a 1 MB answer). At another width, the layout renders them again as it would have."""
        if width > 0 and self._width < 0 and self.is_mounted:
            self._render_at(width, AHEAD_BUDGET)

    def _resume(self) -> None:
        """After a frame: the next blocks (a budget's worth), then a layout to show them."""
        self._paused = False
        if self.is_mounted and self._width >= 0:
            rendered, open_strips = self._rendered, self._open_strips
            self._render_at(self._width, RESUME_BUDGET)
            if self._rendered != rendered or self._open_strips is not open_strips:
                self.refresh(layout=True)  # not when all was rendered meanwhile

    def get_content_width(self, container: Size, viewport: Size) -> int:
        return container.width

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        self._render_at(width)
        return len(self._strips)

    def render_line(self, y: int) -> Strip:
        width = self.content_size.width
        self._render_at(width)
        style = self._style or self.rich_style
        if y >= len(self._strips):
            return Strip.blank(width, style)
        return self._strips[y].crop_extend(0, width, style)

    def on_unmount(self) -> None:
        # Scrolled out of the window: the rendered rows go now (Textual may keep the widget a
        # while in its layout caches; its rows would be rendered again if it were remounted).
        self._forget()

    def notify_style_update(self) -> None:
        # Colours changed (a theme switch): render again. A class that changes only the box
        # (a streaming answer's head gets a margin) leaves the rendered rows as they are.
        if self._style is None or self.rich_style != self._style:
            self._forget()
        super().notify_style_update()
