"""A question from the agent: numbered options answered by digit, and a free-text field."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.events import Key
from textual.widgets import Input, Static

from runtime.models import InputRequest
from runtime.textsafe import terminal_safe, terminal_safe_line
from tui.widgets._prompt_base import PromptAnswered


def allows_free_text(request: InputRequest) -> bool:
    return not (request.options and "enum" in request.answer_schema)


class QuestionPrompt(Vertical, can_focus=True):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("t", "free_text", "Type an answer")]

    DEFAULT_CSS = """
    QuestionPrompt { height: auto; max-height: 20; border: round $accent; padding: 0 1;
                     background: $surface; }
    QuestionPrompt .prompt-title { text-style: bold; color: $accent; }
    QuestionPrompt .option { padding-left: 2; }
    QuestionPrompt .prompt-keys { color: $text-muted; }
    """

    def __init__(self, request: InputRequest) -> None:
        super().__init__(id="question-prompt")
        self.request = request

    def compose(self) -> ComposeResult:
        yield Static(
            f"? {terminal_safe(self.request.prompt)}", classes="prompt-title", markup=False
        )
        for number, option in enumerate(self.request.options[:9], start=1):
            yield Static(f"{number}. {terminal_safe_line(option)}", classes="option", markup=False)
        keys = []
        if self.request.options:
            keys.append(f"1–{min(len(self.request.options), 9)} choose")
        if allows_free_text(self.request):
            keys.append("t or Tab: type an answer, Enter to send")
            yield Input(placeholder="Your answer", id="free-text")
        yield Static(" · ".join(keys), classes="prompt-keys", markup=False)

    def on_key(self, event: Key) -> None:
        if self.app.focused is not self:
            return
        if event.character and event.character.isdigit():
            number = int(event.character)
            if 1 <= number <= len(self.request.options):
                event.stop()
                self.post_message(PromptAnswered(self.request, self.request.options[number - 1]))

    def action_free_text(self) -> None:
        if allows_free_text(self.request):
            self.query_one("#free-text", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        if not text:
            return
        if text.isdigit() and self.request.options:
            number = int(text)
            if 1 <= number <= len(self.request.options):
                text = self.request.options[number - 1]
        self.post_message(PromptAnswered(self.request, text))
