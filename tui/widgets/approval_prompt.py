"""An approval asked inline: the tool, its arguments, the diff, and single-key answers."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.css.query import NoMatches
from textual.widgets import Input, Static

from runtime.approval_detail import CHANGED_SINCE_ASKED
from runtime.textsafe import terminal_safe
from tui.widgets._prompt_base import PromptAnswered, SettlingPrompt, forward_once_answered
from tui.widgets.key_footer import ShortKeys
from tui.widgets.one_line_input import OneLineInput
from tui.widgets.ordered_keys import run_own_binding

if TYPE_CHECKING:
    from runtime.models import InputRequest


class ReasonInput(OneLineInput):
    """The reason of a denial: its footer says that Enter sends it and Esc goes back to the
    prompt's keys (it showed the screen's "esc Leave", and nothing about Enter)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "submit", "Send the reason"),
        Binding("escape", "back", "Back to the keys"),
    ]

    def action_back(self) -> None:
        prompt = next((node for node in self.ancestors if isinstance(node, ApprovalPrompt)), None)
        if prompt is not None:
            prompt.back_to_keys()


class ApprovalPrompt(SettlingPrompt, ShortKeys, can_focus=True):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "decide('allow_once')", "Allow once"),
        Binding("a", "decide('allow_run')", "Allow this run"),
        Binding("A", "decide('allow_always')", "Always here"),
        Binding("n", "decide('deny')", "Deny"),
        Binding("r", "reason", "Deny with reason"),
        # A diff taller than the prompt: it scrolls from here (the change itself was below the
        # fold at 80x24, and only Tab into it, then ↓, moved it).
        Binding("down", "scroll_details(1)", "Scroll the details down", show=False),
        Binding("up", "scroll_details(-1)", "Scroll the details up", show=False),
        Binding("pagedown", "scroll_details(1, True)", "Page the details down", show=False),
        Binding("pageup", "scroll_details(-1, True)", "Page the details up", show=False),
    ]

    # $panel, not $boost: Textual's $boost is transparent in any theme that sets its panel or is
    # light (all but textual-dark).
    DEFAULT_CSS = """
    ApprovalPrompt { height: auto; max-height: 50vh; border: round $warning; padding: 0 1;
                     background: $surface; }
    ApprovalPrompt:focus-within { border: round $accent; }
    ApprovalPrompt .prompt-title { text-style: bold; color: $warning; }
    ApprovalPrompt .prompt-keys { color: $text-muted; }
    ApprovalPrompt .prompt-command { background: $panel; padding: 0 1; }
    ApprovalPrompt .prompt-where { color: $text-muted; }
    ApprovalPrompt .prompt-changed { color: $warning; text-style: bold; }
    ApprovalPrompt #details { height: auto; max-height: 40vh; }
    ApprovalPrompt #reason-row { display: none; height: 1; }
    ApprovalPrompt.-reason #reason-row { display: block; }
    ApprovalPrompt .prompt-reason-label { width: auto; color: $warning; text-style: bold; }
    ApprovalPrompt #reason { width: 1fr; height: 1; border: none; padding: 0 1;
                             background: $panel; }
    """

    SHORT_DESCRIPTIONS: ClassVar[Mapping[str, str]] = {
        "decide('allow_run')": "This run",
        "decide('allow_always')": "Always",
        "reason": "Deny, why",
    }
    """In a narrow footer (80 columns), so that all five answers show, and Tab."""

    KEYS = "y allow once · a allow this run · A always here · n deny · r deny with a reason"
    SHORT_KEYS = "y once · a run · A always · n deny · r why"
    """The keys where the long line would wrap (r: deny, saying why; help and the footer name
    them in full)."""
    MORE = " · ↑↓ scroll"
    """Added to the keys while the details do not fit."""

    def __init__(self, request: InputRequest, *, elsewhere: str | None = None) -> None:
        """``elsewhere``: the job's workspace, when it is not the folder agent-tui was opened
        in (its paths are relative to it)."""
        super().__init__(id="approval-prompt")
        self.request = request
        self.elsewhere = elsewhere

    def compose(self) -> ComposeResult:
        detail = self.request.detail
        tool = detail.get("tool") or detail.get("tool_name") or "tool"
        yield Static(self._title(str(tool)), classes="prompt-title", markup=False)
        if self.elsewhere is not None:
            # Found by a new-user trial: a job of another folder asked to write "notes.md",
            # and nothing said the file was not in the folder agent-tui was opened in.
            yield Static(
                terminal_safe(f"in {self.elsewhere} — this job's folder, not this one"),
                classes="prompt-where",
                markup=False,
            )
        # The keys come before the details: however long those are, the keys stay visible.
        yield Static(self.KEYS, classes="prompt-keys", markup=False)
        # The reason too: below a long diff it was cut off, and what was typed showed nowhere.
        with Horizontal(id="reason-row"):
            yield Static("Deny because: ", classes="prompt-reason-label", markup=False)
            yield ReasonInput(
                placeholder="Enter sends, Esc goes back", id="reason", select_on_focus=False
            )
        # Scrolled by the prompt's own ↑/↓/PageUp/PageDown: not a Tab stop of its own (Tab
        # from the prompt seemed to do nothing when the diff was taller than the prompt).
        with VerticalScroll(id="details", can_focus=False):
            yield from self._details(detail)

    def _details(self, detail: dict[str, Any]) -> ComposeResult:
        if detail.get(CHANGED_SINCE_ASKED):
            # A trial's hand edit was overwritten by a write whose stored diff did not show it.
            yield Static(
                "⚠ The file changed since the agent asked: below is what allowing does to it now.",
                classes="prompt-changed",
                markup=False,
            )
        arguments = detail.get("arguments")
        diff = detail.get("diff")
        command = detail.get("command")
        if isinstance(command, str) and command:
            # A shell command reads as the command itself, wrapped, not as escaped JSON.
            yield Static(
                Text("$ " + terminal_safe(command), no_wrap=False), classes="prompt-command"
            )
            extra = {
                k: v for k, v in (arguments or {}).items() if k != "command" and v not in (None, "")
            }
            where = f"in {detail['cwd']}" if detail.get("cwd") else ""
            if extra:
                where += ("  " if where else "") + ", ".join(f"{k}={v}" for k, v in extra.items())
            if where:
                yield Static(terminal_safe(where), classes="prompt-where", markup=False)
            return
        if isinstance(diff, str) and diff:
            # An edit reads as its diff; the arguments (which repeat it) stay folded.
            path = detail.get("path") or (arguments or {}).get("path")
            if path:
                new = " (new file)" if detail.get("new_file") else ""
                yield Static(terminal_safe(f"{path}{new}"), classes="prompt-where", markup=False)
            from rich.syntax import Syntax  # Pygments: imported by the first diff shown

            yield Static(Syntax(terminal_safe(diff), "diff", word_wrap=True), classes="prompt-diff")
            return
        path = detail.get("path")
        if diff == "" and path and not detail.get("error"):
            # A write that changes nothing had no diff to show, and showed its arguments as JSON.
            yield Static(
                terminal_safe(f"{path} — no change: the file has exactly this content already"),
                classes="prompt-where",
                markup=False,
            )
            return
        if detail.get("error"):
            yield Static(
                terminal_safe(f"⚠ {detail['error']}"), classes="prompt-where", markup=False
            )
        server = detail.get("server")
        if server:
            # An MCP tool: which server, and what the tool says it does (a call with no
            # arguments showed a trial nothing but the tool's name).
            said = detail.get("description") or "(it gives no description)"
            yield Static(
                terminal_safe(f"MCP server {server}: {said}"), classes="prompt-where", markup=False
            )
        if arguments:
            text = json.dumps(arguments, indent=2, ensure_ascii=False)
            if len(text) > 2000:
                text = text[:2000] + "\n…"
            yield Static(terminal_safe(text), classes="prompt-arguments", markup=False)

    def _title(self, tool: str) -> str:
        prompt = self.request.prompt
        return f"⚠ {prompt}" if tool in prompt else f"⚠ Approve {tool}?  {prompt}"

    def on_mount(self) -> None:
        self.call_after_refresh(self._show_scroll_keys)

    def on_resize(self) -> None:
        self.call_after_refresh(self._show_scroll_keys)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # The answer keys are not offered (in the footer) before they answer it.
        if action in ("decide", "reason"):
            return self.settled
        return True

    def _on_paste(self, event: events.Paste) -> None:
        # Nothing here takes text: a paste is a message for the box (it was lost).
        self.pasted_as_typing(event, always=True)

    def _show_scroll_keys(self) -> None:
        """The keys say how to scroll the details while they do not fit."""
        try:
            details = self.query_one("#details", VerticalScroll)
            keys = self.query_one(".prompt-keys", Static)
        except NoMatches:
            # Asked as the prompt was mounted or resized, run after the next frame: it may be
            # gone by then (answered, another run opened), or going, its parts first.
            return
        more = self.MORE if details.max_scroll_y > 0 else ""
        # The prompt's width: the line's own is none while it is hidden (before it settles),
        # and the long form then took two rows, one of them given back as it showed.
        width = self.content_region.width
        text = self.KEYS + more
        if width and len(text) > width:
            text = self.SHORT_KEYS + more
        keys.update(text)

    def action_scroll_details(self, step: int, page: bool = False) -> None:
        details = self.query_one("#details", VerticalScroll)
        lines = step * max(1, details.scrollable_content_region.height - 1) if page else step
        details.scroll_relative(y=lines, animate=False)

    answered = False
    """Answered here: the keys that still come are passed on (``KeyAfterAnswer``)."""

    async def on_key(self, event: events.Key) -> None:
        if self.app.focused is not self or forward_once_answered(self, self.answered, event):
            return
        if self.held_as_typing(event):
            return  # too soon to be an answer: typing begun as it came
        # The answer keys act here, at once: run at the app once the key has gone round, a
        # key typed right after them was taken first (and lost).
        await run_own_binding(self, event)

    def reopen(self) -> None:
        """The answer was refused: the prompt takes answers again."""
        self.answered = False

    def action_decide(self, decision: str) -> None:
        if self.answered:
            return
        self.answered = True
        self.post_message(PromptAnswered(self.request, {"decision": decision, "reason": None}))

    def action_reason(self) -> None:
        self.add_class("-reason")
        self.query_one("#reason", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        reason = event.value.strip() or None
        self.answered = True
        self.post_message(PromptAnswered(self.request, {"decision": "deny", "reason": reason}))

    def back_to_keys(self) -> None:
        """From the reason back to the single-key answers (what was typed stays)."""
        self.remove_class("-reason")
        self.focus()
