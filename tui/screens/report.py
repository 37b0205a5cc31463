"""A report of several lines a slash command asked for (``/context``): over the conversation
until Esc, scrollable, its keys in its own footer.

A toast is for a one-line notice: a twenty-line report as one stayed half a minute over the
conversation and the windows beside it, and a second one piled on the first."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from runtime.textsafe import terminal_safe


def _is_heading(line: str) -> bool:
    """A line that starts at its first column and ends with a colon (``Skills:``)."""
    return bool(line) and not line[0].isspace() and line.endswith(":")


def report_lines(lines: Sequence[str]) -> list[Static]:
    """One widget per line, shown as it is (no markup): headings in bold, the lines under them
    indented, a long one wrapping under its own start (a path wrapped back to the left edge,
    under the headings)."""
    shown: list[Static] = []
    for line in lines:
        line = terminal_safe(line)
        if _is_heading(line):
            shown.append(Static(line, classes="report-heading", markup=False))
        elif line[:1].isspace():
            body = line[2:] if line.startswith("  ") else line.lstrip()
            shown.append(Static(body, classes="report-item", markup=False))
        else:
            shown.append(Static(line, classes="report-line", markup=False))
    return shown


class ReportBody(VerticalScroll):
    """The report's lines; the arrow and page keys scroll them, and the footer says so while
    there is more than fits."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("down", "scroll_down", "Scroll", key_display="↑↓"),
        Binding("up", "scroll_up", "Scroll up", show=False),
        Binding("pagedown,space", "page_down", "Page", key_display="pgdn"),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("home", "scroll_home", "Top", show=False),
        Binding("end", "scroll_end", "Bottom", show=False),
    ]
    _SCROLLING: ClassVar[frozenset[str]] = frozenset(
        {"scroll_down", "scroll_up", "page_down", "page_up", "scroll_home", "scroll_end"}
    )

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in self._SCROLLING:
            return self.max_scroll_y > 0  # all of it in view: nothing to scroll
        return True

    def on_resize(self, event: events.Resize) -> None:
        self.refresh_bindings()


class ReportScreen(ModalScreen[None]):
    """``title`` and ``lines`` in a box over the screen; Esc (or q) closes it, c copies it."""

    CSS_PATH = "report.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "close", "Close", key_display="esc"),
        Binding("c", "copy", "Copy", tooltip="Copy the report to the clipboard"),
    ]

    def __init__(self, title: str, lines: Sequence[str]) -> None:
        super().__init__(classes="report")
        self.report_title = title
        self.lines = list(lines)

    def compose(self) -> ComposeResult:
        with Vertical(id="report-box"):
            yield Static(self.report_title, id="report-title", markup=False)
            with ReportBody(id="report-body"):
                yield from report_lines(self.lines)
        # Its own keys at the bottom, as the help's and the inbox's: the main screen's
        # showed through the overlay with keys that do not work here.
        from tui.widgets.key_footer import KeyFooter

        yield KeyFooter()

    def on_mount(self) -> None:
        self.query_one(ReportBody).focus()

    def action_close(self) -> None:
        self.dismiss(None)

    def action_copy(self) -> None:
        self.app.copy_to_clipboard("\n".join([self.report_title, *self.lines]))
        self.notify("Copied the report.", title=self.report_title)
