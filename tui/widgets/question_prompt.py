"""A question from the agent: the answer field has focus from the start.

Typing goes straight into the field and Enter sends it; an option's number alone, then Enter,
picks that option. (A digit picked its option at once while the field was empty: "2024 roadmap"
sent option 2 and dropped the rest.) A question whose answer must be one of its options has no
field: digits (or ↑ ↓ and Enter) choose at once. A ``/command`` is not sent (none runs from
here); ``//`` at its start answers with one slash, as in the message box.

What is typed is said to the screen (``AnswerDraftChanged``) half a second after the last key,
as the composer's text is, so an answer half typed survives a quit or a crash.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, ClassVar

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message as TextualMessage
from textual.timer import Timer
from textual.widgets import Input, Static

from runtime.drafts import draft_revision
from runtime.textsafe import terminal_safe, terminal_safe_line
from tui.widgets._format import short
from tui.widgets._prompt_base import PromptAnswered, SettlingPrompt, forward_once_answered
from tui.widgets.ordered_keys import OrderedInput, run_own_binding

if TYPE_CHECKING:
    from runtime.models import InputRequest

DRAFT_SAVE_DELAY = 0.5
"""Seconds after the last key before the answer being typed is said to the screen."""


def allows_free_text(request: InputRequest) -> bool:
    return not (request.options and "enum" in request.answer_schema)


def option_for_digit(request: InputRequest, character: str | None) -> str | None:
    """The option a digit key names (1-based), or None."""
    if character is None or not character.isdigit():
        return None
    number = int(character)
    if 1 <= number <= min(len(request.options), 9):
        return request.options[number - 1]
    return None


class AnswerInput(OrderedInput):
    """The free-text answer (an option's number alone picks that option)."""

    def __init__(self, request: InputRequest, value: str = "") -> None:
        # Focus leaves the text as it is, the cursor after it: an answer typed before (kept
        # across a quit) selected on focus was replaced whole by the next key.
        super().__init__(
            value=value,
            placeholder="Type your answer, Enter to send",
            id="free-text",
            select_on_focus=False,
        )
        self.request = request

    async def _on_key(self, event: events.Key) -> None:
        prompt = self.parent
        if not isinstance(prompt, QuestionPrompt):
            return
        if forward_once_answered(self, prompt.answered, event) or prompt.held_as_typing(event):
            return
        if event.key == "enter" and self.value.strip():
            # Answered from this key on: the keys typed after it are for what comes next,
            # even those handled before the screen hears of the answer.
            prompt.answered = True

    def _on_paste(self, event: events.Paste) -> None:
        prompt = self.parent
        if isinstance(prompt, QuestionPrompt):
            prompt.pasted_as_typing(event)  # before it settled: for the message box


class QuestionPrompt(SettlingPrompt, can_focus=True):
    class AnswerDraftChanged(TextualMessage):
        """The answer being typed changed (blank: nothing to keep). ``revision``: as
        ``Composer.DraftChanged``'s."""

        def __init__(self, request: InputRequest, text: str) -> None:
            super().__init__()
            self.request = request
            self.text = text
            self.revision = draft_revision()

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "move(-1)", "Previous option", show=False),
        Binding("down", "move(1)", "Next option", show=False),
        Binding("enter", "choose", "Choose", show=False),
    ]

    # $panel, not $boost: Textual's $boost is transparent in any theme that sets its panel or is
    # light (all but textual-dark).
    DEFAULT_CSS = """
    QuestionPrompt { height: auto; max-height: 20; border: round $accent; padding: 0 1;
                     background: $surface; }
    QuestionPrompt .prompt-title { text-style: bold; color: $accent; }
    QuestionPrompt .option { padding-left: 2; }
    QuestionPrompt .option.-highlighted { background: $accent 30%; }
    QuestionPrompt .prompt-keys { color: $text-muted; }
    QuestionPrompt #free-text, QuestionPrompt #free-text:focus { border: none; height: 1;
                     padding: 0 1; background: $panel; margin: 1 0 0 0; }
    """

    def __init__(self, request: InputRequest, *, draft: str = "") -> None:
        super().__init__(id="question-prompt")
        self.request = request
        self.highlighted = 0
        self._draft = draft
        """The answer typed before (kept by the store), back in the field."""
        self._save_timer: Timer | None = None
        self.answered = False
        """Answered here: the keys that still come are passed on (``KeyAfterAnswer``)."""

    def _answer(self, value: object) -> None:
        self.answered = True
        self.post_message(PromptAnswered(self.request, value))

    def compose(self) -> ComposeResult:
        yield Static(
            f"? {terminal_safe(self.request.prompt)}", classes="prompt-title", markup=False
        )
        for number, option in enumerate(self.request.options[:9], start=1):
            yield Static(f"{number}. {terminal_safe_line(option)}", classes="option", markup=False)
        keys = []
        if allows_free_text(self.request):
            yield AnswerInput(self.request, value=self._draft)
            if self.request.options:
                keys.append(f"1–{min(len(self.request.options), 9)} then Enter: choose")
                keys.append("or type your own answer")
            else:
                keys.append("type an answer · Enter sends")
        else:
            keys.append(f"1–{min(len(self.request.options), 9)} or ↑ ↓ Enter: choose")
        yield Static(" · ".join(keys), classes="prompt-keys", markup=False)

    def on_mount(self) -> None:
        # With an answer field, the field is the prompt's only focus stop: the prompt itself
        # redirects its focus there, so as a stop before the field it kept shift+tab from ever
        # leaving (shift+tab went to the prompt, which gave the focus back to the field).
        self.can_focus = not allows_free_text(self.request)
        self._show_highlight()

    def focus(self, scroll_visible: bool = True) -> QuestionPrompt:
        """Focus goes to the answer field when there is one."""
        fields = self.query(AnswerInput)
        if fields:
            fields.first().focus(scroll_visible)
        else:
            super().focus(scroll_visible)
        return self

    def _on_paste(self, event: events.Paste) -> None:
        # Its field takes a paste once it settled; with no field, nothing here takes text.
        self.pasted_as_typing(event, always=not allows_free_text(self.request))

    async def on_key(self, event: events.Key) -> None:
        if self.app.focused is not self or forward_once_answered(self, self.answered, event):
            return
        if self.held_as_typing(event):
            return  # too soon to be an answer: typing begun as it came
        option = option_for_digit(self.request, event.character)
        if option is not None:
            event.stop()
            self._answer(option)
            return
        await run_own_binding(self, event)  # Enter answers now, before the next key is taken

    def reopen(self) -> None:
        """The answer was refused: the prompt takes answers again."""
        self.answered = False

    def _show_highlight(self) -> None:
        if allows_free_text(self.request):
            return
        for index, widget in enumerate(self.query(".option")):
            widget.set_class(index == self.highlighted, "-highlighted")

    def action_move(self, step: int) -> None:
        if self.request.options:
            self.highlighted = (self.highlighted + step) % min(len(self.request.options), 9)
            self._show_highlight()

    def action_choose(self) -> None:
        if self.request.options and not allows_free_text(self.request):
            self._answer(self.request.options[self.highlighted])

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        if event.value == self._draft and self._save_timer is None:
            return  # the field filled with the kept draft: nothing new to keep
        if self._save_timer is not None:
            self._save_timer.stop()
        self._save_timer = self.set_timer(DRAFT_SAVE_DELAY, self.flush_draft)

    def flush_draft(self) -> None:
        """Say the answer being typed now, if a save of it is due."""
        if self._save_timer is None:
            return
        self._save_timer.stop()
        self._save_timer = None
        self._draft = self.answer_text
        self.post_message(self.AnswerDraftChanged(self.request, self._draft))

    @property
    def answer_text(self) -> str:
        fields = self.query(AnswerInput)
        return fields.first().value if fields else ""

    def stop_saving(self) -> None:
        """The answer is sent: no save of it may come after."""
        if self._save_timer is not None:
            self._save_timer.stop()
            self._save_timer = None

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        if not text:
            return
        from tui.widgets.composer import SLASH_COMMANDS, parse_command

        command = parse_command(text)
        if command is not None and command[0] not in {known.name for known in SLASH_COMMANDS}:
            # A folder at the root (``/tmp``, ``/opt``; ``/`` itself) is an answer to "where…?"
            # (a review): only a name that is not one is taken for a command.
            first_word = text[1:].split(maxsplit=1)[0] if text[1:].strip() else ""
            if os.path.lexists("/" + first_word):
                command = None
        if command is not None:
            # A trial typed "/new Quit test" here and it went to the agent as the answer; then
            # "/bogus" went, where the message box refuses an unknown command. A slash answers
            # with the text only escaped, as in the message box (``//``).
            self.answered = False  # the field keeps the keys
            name = command[0]
            if name in {known.name for known in SLASH_COMMANDS}:
                said = f"/{name} is a command, not an answer"
                escaped = f"//{name}"
            else:
                said = (
                    f"/{terminal_safe_line(short(name, 24))} is not an answer (a / starts a"
                    " command, and none runs from here)"
                )
                escaped = "/" + terminal_safe_line(short(text, 40))
            self.notify(
                f"{said}: nothing was sent. Answer the question, or Esc to leave it waiting (it"
                f" stays in the inbox); {escaped} answers with the text as typed.",
                title="Not sent",
                severity="warning",
                markup=False,
            )
            return
        if text.startswith("//"):
            text = text[1:]  # as in the message box: // is a slash typed as text
        if text.isdigit() and self.request.options:
            number = int(text)
            if 1 <= number <= min(len(self.request.options), 9):
                text = self.request.options[number - 1]
        self.stop_saving()
        self._answer(text)
