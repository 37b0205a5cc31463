"""Retrying a run whose last step left a call with an unknown outcome: the call is shown (the
shell command, the file, or the tool and its arguments) and the person chooses — run it again,
continue without it (the model is told the outcome is unknown), or fork from the last
checkpoint. Nothing runs until they choose; Esc leaves the run as it is."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, ClassVar, Literal

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message as TextualMessage
from textual.widgets import Static

from runtime.textsafe import terminal_safe, terminal_safe_line

if TYPE_CHECKING:
    from runtime.models import Run, ToolCall

RetryChoiceName = Literal["rerun", "skip", "fork"]

CHOICE_KEYS = frozenset({"1", "2", "3", "r", "c", "f"})
MAX_SHOWN_CALLS = 4
MAX_LINES_PER_CALL = 6
MAX_ARGUMENTS_CHARS = 400


def describe_unknown_call(call: ToolCall) -> str:
    """The call as a person recognises it: ``$ command`` for the shell, the file for file
    tools, the arguments (compact JSON) for any other tool, an MCP server's included."""
    arguments = call.arguments
    command = arguments.get("command")
    if call.name == "shell" and isinstance(command, str):
        text = "$ " + command
    elif isinstance(arguments.get("path"), str):
        text = str(arguments["path"])
    else:
        text = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
        if len(text) > MAX_ARGUMENTS_CHARS:
            text = text[: MAX_ARGUMENTS_CHARS - 1] + "…"
    lines = terminal_safe(text).splitlines() or [""]
    if len(lines) > MAX_LINES_PER_CALL:
        lines = [*lines[: MAX_LINES_PER_CALL - 1], f"… ({len(lines)} lines)"]
    indent = " " * (len(call.name) + 4)
    return f"  {terminal_safe_line(call.name)}  " + f"\n{indent}".join(lines)


class RetryChoice(Vertical, can_focus=True):
    """Docked under the conversation in place of the composer until a choice is made."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("1,r", "choose('rerun')", "Run it again"),
        Binding("2,c", "choose('skip')", "Continue without it"),
        Binding("3,f", "choose('fork')", "Fork"),
        Binding("up", "move(-1)", "Previous", show=False),
        Binding("down", "move(1)", "Next", show=False),
        Binding("enter", "choose_highlighted", "Choose", show=False),
        Binding("escape", "dismiss", "Keep as is", key_display="esc"),
    ]

    DEFAULT_CSS = """
    RetryChoice { height: auto; max-height: 24; border: round $warning; padding: 0 1;
                  background: $surface; }
    RetryChoice .retry-title { text-style: bold; color: $warning; }
    RetryChoice .retry-call { color: $text; padding-bottom: 1; }
    RetryChoice .option { padding-left: 2; }
    RetryChoice .option.-highlighted { background: $warning 30%; }
    RetryChoice .option.-disabled { color: $text-disabled; }
    RetryChoice .retry-keys { color: $text-muted; }
    """

    class Chosen(TextualMessage):
        """The person chose (``choice``), or left the run as it is (None)."""

        def __init__(self, widget: RetryChoice, run: Run, choice: RetryChoiceName | None) -> None:
            super().__init__()
            self.widget = widget
            self.run = run
            self.choice = choice

    def __init__(self, run: Run, calls: list[ToolCall], *, checkpoint_id: str | None) -> None:
        super().__init__(id="retry-choice")
        self.run = run
        self.calls = calls
        self.checkpoint_id = checkpoint_id
        self.highlighted = 0

    @property
    def choices(self) -> list[tuple[RetryChoiceName, str, bool]]:
        """(choice, label, available), in the order of their digit keys."""
        them = "them" if len(self.calls) > 1 else "it"
        fork = "Fork from the last checkpoint (a new job)"
        if self.checkpoint_id is None:
            fork = "Fork — no checkpoint before the call"
        return [
            ("rerun", f"Run {them} again", True),
            ("skip", f"Continue without {them} (the model is told the outcome is unknown)", True),
            ("fork", fork, self.checkpoint_id is not None),
        ]

    def compose(self) -> ComposeResult:
        several = len(self.calls) > 1
        what = f"these {len(self.calls)} calls" if several else "this call"
        yield Static(
            f"⚠ The outcome of {what} is unknown: {'they' if several else 'it'} may have "
            "acted. Retry how?",
            classes="retry-title",
            markup=False,
        )
        shown = [describe_unknown_call(call) for call in self.calls[:MAX_SHOWN_CALLS]]
        if len(self.calls) > MAX_SHOWN_CALLS:
            shown.append(f"  … and {len(self.calls) - MAX_SHOWN_CALLS} more")
        yield Static("\n".join(shown), classes="retry-call", markup=False)
        for number, (_, label, available) in enumerate(self.choices, start=1):
            option = Static(f"{number}. {label}", classes="option", markup=False)
            option.set_class(not available, "-disabled")
            yield option
        yield Static(
            "1-3 or r / c / f · ↑ ↓ Enter · Esc keep the run as it is",
            classes="retry-keys",
            markup=False,
        )

    def on_mount(self) -> None:
        self._show_highlight()

    def _show_highlight(self) -> None:
        for index, option in enumerate(self.query(".option")):
            option.set_class(index == self.highlighted, "-highlighted")

    def action_move(self, step: int) -> None:
        count = len(self.choices)
        self.highlighted = (self.highlighted + step) % count
        self._show_highlight()

    def action_choose_highlighted(self) -> None:
        self.action_choose(self.choices[self.highlighted][0])

    def action_choose(self, choice: RetryChoiceName) -> None:
        available = {name: ok for name, _, ok in self.choices}
        if not available[choice]:
            self.notify(
                "This run has no checkpoint before the call to fork from.", severity="warning"
            )
            return
        self.post_message(self.Chosen(self, self.run, choice))

    def action_dismiss(self) -> None:
        self.post_message(self.Chosen(self, self.run, None))

    def on_key(self, event: events.Key) -> None:
        # Other letters must not reach the screen's one-letter actions (n, x, R, …) while the
        # choice is open; the choice keys go on to this widget's bindings.
        if event.key in CHOICE_KEYS:
            return
        if event.character is not None and event.character.isprintable():
            event.stop()
            event.prevent_default()
