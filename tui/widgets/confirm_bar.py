"""A question docked under the conversation before a destructive action: y confirms, anything
else (n, Esc, any other key) keeps things as they are."""

from __future__ import annotations

from collections.abc import Callable

from textual import events
from textual.message import Message as TextualMessage
from textual.widget import Widget
from textual.widgets import Static


class ConfirmBar(Static, can_focus=True):
    DEFAULT_CSS = """
    ConfirmBar { height: auto; border: round $error; padding: 0 1; background: $surface;
                 color: $text; text-style: bold; }
    """

    class Closed(TextualMessage):
        def __init__(self, bar: ConfirmBar, *, confirmed: bool) -> None:
            super().__init__()
            self.bar = bar
            self.confirmed = confirmed

    def __init__(
        self,
        question: str,
        on_confirm: Callable[[], object],
        *,
        returning_to: Widget | None = None,
    ) -> None:
        super().__init__(f"{question}   y yes · n / Esc no", markup=False, id="confirm")
        self.on_confirm = on_confirm
        self.returning_to = returning_to
        """The widget focused before the question, focused again once it is answered."""

    def on_key(self, event: events.Key) -> None:
        event.stop()
        event.prevent_default()
        confirmed = event.key == "y"
        if confirmed:
            self.on_confirm()
        self.post_message(self.Closed(self, confirmed=confirmed))
