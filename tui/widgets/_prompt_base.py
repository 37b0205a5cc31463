"""What every inline prompt posts when a person answers it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual.message import Message as TextualMessage

if TYPE_CHECKING:
    from runtime.models import InputRequest


class PromptAnswered(TextualMessage):
    def __init__(self, request: InputRequest, value: Any) -> None:
        super().__init__()
        self.request = request
        self.value = value
