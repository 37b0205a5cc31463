"""The baseline of the first-frame benchmark: a bare Textual app (a line of text and a footer),
spawned the same way as agent-tui."""

from typing import ClassVar

from textual.app import App, ComposeResult
from textual.binding import BindingType
from textual.widgets import Footer, Static


class Bare(App[None]):
    BINDINGS: ClassVar[list[BindingType]] = [("ctrl+q", "quit", "Quit")]

    def compose(self) -> ComposeResult:
        yield Static("Type a task below and press Enter.")
        yield Footer()


if __name__ == "__main__":
    Bare().run()
