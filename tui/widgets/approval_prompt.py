"""An approval asked inline: the tool, its arguments, the diff, and single-key answers."""

from __future__ import annotations

import json
from typing import ClassVar

from rich.syntax import Syntax
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Input, Static

from runtime.models import InputRequest
from runtime.textsafe import terminal_safe
from tui.widgets._prompt_base import PromptAnswered


class ApprovalPrompt(Vertical, can_focus=True):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "decide('allow_once')", "Allow once"),
        Binding("a", "decide('allow_run')", "Allow this run"),
        Binding("A", "decide('allow_always')", "Always here"),
        Binding("n", "decide('deny')", "Deny"),
        Binding("r", "reason", "Deny with reason"),
    ]

    DEFAULT_CSS = """
    ApprovalPrompt { height: auto; max-height: 24; border: round $warning; padding: 0 1;
                     background: $surface; }
    ApprovalPrompt:focus-within { border: round $accent; }
    ApprovalPrompt .prompt-title { text-style: bold; color: $warning; }
    ApprovalPrompt .prompt-keys { color: $text-muted; }
    ApprovalPrompt #details { height: auto; max-height: 16; }
    ApprovalPrompt #reason { display: none; }
    ApprovalPrompt.-reason #reason { display: block; }
    """

    def __init__(self, request: InputRequest) -> None:
        super().__init__(id="approval-prompt")
        self.request = request

    def compose(self) -> ComposeResult:
        detail = self.request.detail
        tool = detail.get("tool") or detail.get("tool_name") or "tool"
        yield Static(self._title(str(tool)), classes="prompt-title", markup=False)
        with VerticalScroll(id="details"):
            arguments = detail.get("arguments")
            diff = detail.get("diff")
            if arguments and isinstance(diff, str) and diff:
                arguments = {
                    key: (
                        value[:120] + "…" if isinstance(value, str) and len(value) > 120 else value
                    )
                    for key, value in arguments.items()
                }
            if arguments:
                text = json.dumps(arguments, indent=2, ensure_ascii=False)
                if len(text) > 2000:
                    text = text[:2000] + "\n…"
                yield Static(terminal_safe(text), classes="prompt-arguments", markup=False)
            if isinstance(diff, str) and diff:
                diff = terminal_safe(diff)  # file content
                yield Static(Syntax(diff, "diff", word_wrap=True), classes="prompt-diff")
        yield Static(
            "y allow once · a allow this run · A always here · n deny · r deny with a reason",
            classes="prompt-keys",
            markup=False,
        )
        yield Input(placeholder="Why deny? Enter to send, Esc to go back", id="reason")

    def _title(self, tool: str) -> str:
        prompt = self.request.prompt
        return f"⚠ {prompt}" if tool in prompt else f"⚠ Approve {tool}?  {prompt}"

    def action_decide(self, decision: str) -> None:
        self.post_message(PromptAnswered(self.request, {"decision": decision, "reason": None}))

    def action_reason(self) -> None:
        self.add_class("-reason")
        self.query_one("#reason", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        reason = event.value.strip() or None
        self.post_message(PromptAnswered(self.request, {"decision": "deny", "reason": reason}))

    def key_escape(self) -> None:
        if self.has_class("-reason"):
            self.remove_class("-reason")
            self.focus()
