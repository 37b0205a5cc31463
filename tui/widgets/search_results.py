"""The browser's search results: one option per message found, its job's title and a snippet."""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.widgets import OptionList


class SearchResults(OptionList):
    """An option list whose footer says what Enter does (Textual's hides its keys)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select", "Open", tooltip="Open the run at the message found"),
    ]
