"""Markdown that will not change again, as one widget rendered once per width.

Textual's Markdown widget is a widget per block; a sealed part of a huge answer kept that way
costs every later layout pass (hundreds of widgets walked) and the garbage collector (hundreds
of objects per widget). This widget renders the same text with Rich's Markdown once per width
and draws the rows on screen from that, so its height and its lines cost nothing afterwards.
"""

from __future__ import annotations

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


class FrozenMarkdown(Widget):
    DEFAULT_CSS = """
    FrozenMarkdown { height: auto; }
    """

    def __init__(self, markdown: str, *, classes: str | None = None) -> None:
        super().__init__(classes=classes)
        self.source = markdown
        self._width = -1
        self._strips: list[Strip] = []
        self._style: Style | None = None

    def set_source(self, markdown: str) -> None:
        """Show ``markdown`` instead (rendered again once, at the next layout)."""
        self.source = markdown
        self._width = -1
        self.refresh(layout=True)

    def _render_at(self, width: int) -> None:
        style = self._style = self.rich_style
        options = self.app.console_options.update_width(max(width, 1)).update(highlight=False)
        lines = self.app.console.render_lines(
            _Markdown(self.source), options, style=style, pad=False
        )
        self._strips = [Strip(Segment.simplify(line)) for line in lines]
        self._width = width

    def get_content_width(self, container: Size, viewport: Size) -> int:
        return container.width

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        if width != self._width:
            self._render_at(width)
        return len(self._strips)

    def render_line(self, y: int) -> Strip:
        width = self.content_size.width
        if width != self._width:
            self._render_at(width)
        style = self._style or self.rich_style
        if y >= len(self._strips):
            return Strip.blank(width, style)
        return self._strips[y].crop_extend(0, width, style)

    def on_unmount(self) -> None:
        # Scrolled out of the window: the rendered rows go now (Textual may keep the widget a
        # while in its layout caches; its rows would be rendered again if it were remounted).
        self._strips = []
        self._width = -1

    def notify_style_update(self) -> None:
        self._width = -1  # colours changed (a theme switch): render again
        super().notify_style_update()
