"""A tool call as a compact block: name and arguments, a progress bar while it runs, the result
folded; a delegation's child run opens with Enter."""

from __future__ import annotations

import json
from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message as TextualMessage
from textual.widgets import Collapsible, ProgressBar, Static

from runtime.models import ToolCallState
from tui.widgets._format import short

TOOL_ICONS = {
    ToolCallState.PENDING: "◌",
    ToolCallState.RUNNING: "●",
    ToolCallState.COMPLETED: "✓",
    ToolCallState.FAILED: "✗",
    ToolCallState.INDETERMINATE: "⚠",
    ToolCallState.CANCELLED: "⊘",
}

RESULT_LIMIT = 4000


def _arguments_text(arguments: dict[str, Any]) -> str:
    parts = []
    for key, value in arguments.items():
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        parts.append(f"{key}={short(str(shown), 40)}")
    return ", ".join(parts)


class ToolCallView(Vertical, can_focus=True):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "open_child", "Open sub-run")]

    DEFAULT_CSS = """
    ToolCallView { height: auto; margin: 0 0 1 2; padding: 0 1; border-left: wide $secondary; }
    ToolCallView:focus { background: $boost; }
    ToolCallView.-failed, ToolCallView.-indeterminate { border-left: wide $error; }
    ToolCallView.-completed { border-left: wide $success; }
    ToolCallView .tool-header { color: $text; }
    ToolCallView .tool-child { color: $accent; }
    ToolCallView ProgressBar { height: 1; }
    ToolCallView Collapsible { background: transparent; border: none; padding: 0; }
    """

    class OpenChildRequested(TextualMessage):
        def __init__(self, tool_call_id: str, child_run_id: str | None) -> None:
            super().__init__()
            self.tool_call_id = tool_call_id
            self.child_run_id = child_run_id

    def __init__(
        self,
        *,
        tool_call_id: str,
        name: str,
        arguments: dict[str, Any] | None,
        state: ToolCallState = ToolCallState.PENDING,
        result: str | None = None,
        error: str | None = None,
        child_run_id: str | None = None,
    ) -> None:
        super().__init__()
        self.tool_call_id = tool_call_id
        self.tool_name = name
        self.arguments = arguments or {}
        self.state = state
        self.result = result
        self.error = error
        self.child_run_id = child_run_id

    def compose(self) -> ComposeResult:
        yield Static(self._header(), classes="tool-header", markup=False)
        child = Static(self._child_text(), classes="tool-child", markup=False)
        child.display = self.child_run_id is not None
        yield child
        bar = ProgressBar(total=None, show_eta=False, id="progress")
        bar.display = False
        yield bar
        with Collapsible(title="result", collapsed=True, id="result") as result:
            result.display = self.result is not None or self.error is not None
            yield Static(self._result_text(), markup=False, id="result-text")

    def on_mount(self) -> None:
        self._set_state_class()

    def _header(self) -> str:
        return f"{TOOL_ICONS[self.state]} {self.tool_name}({_arguments_text(self.arguments)})"

    def _child_text(self) -> str:
        return f"↳ sub-run {self.child_run_id} — Enter to open"

    def _result_text(self) -> str:
        text = self.error if self.error is not None else (self.result or "")
        if len(text) > RESULT_LIMIT:
            text = text[:RESULT_LIMIT] + f"\n… ({len(text) - RESULT_LIMIT} more characters)"
        return text

    def _set_state_class(self) -> None:
        for state in ToolCallState:
            self.set_class(self.state is state, f"-{state.value}")

    def update_state(
        self,
        state: ToolCallState,
        *,
        arguments: dict[str, Any] | None = None,
        result: str | None = None,
        error: str | None = None,
    ) -> None:
        self.state = state
        if arguments is not None:
            self.arguments = arguments
        if result is not None:
            self.result = result
        if error is not None:
            self.error = error
        if not self.is_mounted:
            return
        self.query_one(".tool-header", Static).update(self._header())
        self._set_state_class()
        if state.is_terminal:
            self.query_one("#progress", ProgressBar).display = False
        if self.result is not None or self.error is not None:
            folded = self.query_one("#result", Collapsible)
            folded.display = True
            folded.query_one("#result-text", Static).update(self._result_text())

    def set_result(self, content: str, *, is_error: bool) -> None:
        if is_error:
            self.error = content
        else:
            self.result = content
        if self.is_mounted:
            folded = self.query_one("#result", Collapsible)
            folded.display = True
            folded.query_one("#result-text", Static).update(self._result_text())

    def set_child(self, child_run_id: str) -> None:
        self.child_run_id = child_run_id
        if self.is_mounted:
            child = self.query_one(".tool-child", Static)
            child.update(self._child_text())
            child.display = True

    def progress(self, progress: float, total: float | None, message: str | None) -> None:
        bar = self.query_one("#progress", ProgressBar)
        bar.display = not self.state.is_terminal
        bar.update(total=total, progress=progress)
        if message:
            self.query_one("#result", Collapsible).title = f"result — {short(message, 50)}"

    def action_open_child(self) -> None:
        self.post_message(self.OpenChildRequested(self.tool_call_id, self.child_run_id))
