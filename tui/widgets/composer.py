"""The composer: a new job, or a follow-up in the selected job; the mode is always shown."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message as TextualMessage
from textual.reactive import reactive
from textual.widgets import Input, Static

from tui.widgets._format import short


class Composer(Vertical):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+t", "toggle_mode", "New job / follow-up")
    ]

    DEFAULT_CSS = """
    Composer { height: auto; border: round $primary; padding: 0 1; background: $surface; }
    Composer:focus-within { border: round $accent; }
    Composer #mode { color: $text-muted; }
    Composer.-follow-up #mode { color: $accent; text-style: bold; }
    Composer Input, Composer Input:focus { border: none; height: 1; padding: 0;
                                           background: $surface; }
    """

    follow_up_job_id: reactive[str | None] = reactive(None)
    """Set: the next message continues this job. None: it starts a new job."""

    class Submitted(TextualMessage):
        def __init__(self, text: str, follow_up_job_id: str | None) -> None:
            super().__init__()
            self.text = text
            self.follow_up_job_id = follow_up_job_id

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.selected_job_id: str | None = None
        self.selected_job_title: str = ""

    def compose(self) -> ComposeResult:
        yield Static(self._mode_text(), id="mode", markup=False)
        yield Input(placeholder="Describe a task, Enter to send", id="composer-input")

    def _mode_text(self) -> str:
        if self.follow_up_job_id is None:
            hint = "  (ctrl+t: follow up in the selected job)" if self.selected_job_id else ""
            return "✚ New job" + hint
        return f"↪ Follow-up in: {short(self.selected_job_title, 50)}  (ctrl+t: new job instead)"

    def watch_follow_up_job_id(self) -> None:
        self.set_class(self.follow_up_job_id is not None, "-follow-up")
        self._refresh_mode()

    def _refresh_mode(self) -> None:
        if self.is_mounted:
            self.query_one("#mode", Static).update(self._mode_text())

    def set_selected_job(self, job_id: str | None, title: str) -> None:
        """The browser's selection; a follow-up goes to it when the mode is follow-up."""
        self.selected_job_id = job_id
        self.selected_job_title = title
        if job_id is None:
            self.follow_up_job_id = None
        elif self.follow_up_job_id is not None:
            self.follow_up_job_id = job_id
        self._refresh_mode()

    def action_toggle_mode(self) -> None:
        if self.follow_up_job_id is None and self.selected_job_id is not None:
            self.follow_up_job_id = self.selected_job_id
        else:
            self.follow_up_job_id = None

    @property
    def input(self) -> Input:
        return self.query_one("#composer-input", Input)

    def focus_input(self) -> None:
        self.input.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        if not text:
            return
        event.input.value = ""
        self.post_message(self.Submitted(text, self.follow_up_job_id))
