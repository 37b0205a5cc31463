"""What every inline prompt posts when a person answers it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual.message import Message as TextualMessage

if TYPE_CHECKING:
    from textual import events
    from textual.widget import Widget

    from runtime.models import InputRequest


class PromptAnswered(TextualMessage):
    def __init__(self, request: InputRequest, value: Any) -> None:
        super().__init__()
        self.request = request
        self.value = value


class KeyAfterAnswer(TextualMessage):
    """A key that reached a prompt after it was answered: typed on at once, it was meant for
    what comes next, the message box (it went into the answer field on its way out, lost)."""

    def __init__(self, key: str, character: str | None) -> None:
        super().__init__()
        self.key = key
        self.character = character


def forward_once_answered(widget: Widget, answered: bool, event: events.Key) -> bool:
    """Once its prompt is answered, ``widget`` passes ``event`` on to the screen (to the
    message box) instead of taking it; whether it did."""
    if not answered:
        return False
    event.stop()
    event.prevent_default()
    widget.post_message(KeyAfterAnswer(event.key, event.character))
    return True
