"""The inbox: every run waiting for input across jobs; Enter opens one."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, cast

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message as TextualMessage
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option
from textual.worker import Worker

from tui.widgets._format import short

if TYPE_CHECKING:
    from runtime.api import RuntimeApi
    from runtime.models import InputRequest
    from tui.app import AgentTuiApp


class InboxLoaded(TextualMessage):
    def __init__(self, requests: list[InputRequest], titles: dict[str, str]) -> None:
        super().__init__()
        self.requests = requests
        self.titles = titles


INDENT = 12
"""Where a request's title and question start: after its kind (``question``)."""

INBOX_REFRESH = 2.0
"""Seconds between reads of the open requests while the inbox is open."""


class InboxScreen(ModalScreen["InputRequest | None"]):
    CSS_PATH = "inbox.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,i,q", "close", "Close inbox"),
    ]

    def __init__(self) -> None:
        super().__init__(id="inbox")
        self.requests: list[InputRequest] = []

    def compose(self) -> ComposeResult:
        with Vertical(id="inbox-box"):
            yield Static("Inbox — runs waiting for you", id="inbox-title")
            # Plain options: a job's title and a question are not markup (a job "fix [/usr]
            # path" raised MarkupError as the inbox was drawn).
            yield OptionList(id="inbox-list", markup=False)
            yield Static("Enter open · Esc close", id="inbox-keys")
        # Its own keys at the bottom: the main screen's showed through, with a docked
        # approval's y/a/n that do nothing here (a new-user trial).
        from tui.widgets.key_footer import KeyFooter

        yield KeyFooter()

    def on_mount(self) -> None:
        self._load()
        # Kept current while open: requests answered elsewhere (another agent-tui, `agent-tui
        # respond`) leave the list, new ones come (a trial's list still showed a question the
        # run had long moved past). A page of the open requests: a small read.
        self.set_interval(INBOX_REFRESH, self._load)

    @property
    def agent_app(self) -> AgentTuiApp:
        # Typed, not imported: tui.app imports the screens (no import cycle).
        return cast("AgentTuiApp", self.app)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        self.agent_app.report_worker_failure(event)

    @property
    def runtime(self) -> RuntimeApi:
        return self.agent_app.open_runtime

    @work(exit_on_error=False, group="inbox", exclusive=True)
    async def _load(self) -> None:
        requests = await self.runtime.inbox(limit=100)
        titles: dict[str, str] = {}
        for request in requests:
            if request.job_id not in titles:
                job = await self.runtime.get_job(request.job_id)
                titles[request.job_id] = job.title
        self.post_message(InboxLoaded(requests, titles))

    def on_inbox_loaded(self, message: InboxLoaded) -> None:
        if [r.id for r in message.requests] == [r.id for r in self.requests] and self.requests:
            return  # the same requests: the cursor stays where it is
        chosen = self._chosen_id()
        self.requests = message.requests
        options = self.query_one("#inbox-list", OptionList)
        options.clear_options()
        if not message.requests:
            options.add_option(Option("No run is waiting for input.", disabled=True))
        # As wide as the list: a title was cut at 30 characters beside an empty rest of the
        # row, and at 80x24 a question wrapped back under the kind's column (a new-user trial).
        room = max(20, options.scrollable_content_region.width - INDENT - 1)
        for index, request in enumerate(message.requests):
            title = message.titles.get(request.job_id, request.job_id)
            options.add_option(
                Option(
                    f"{request.kind.value:<{INDENT - 1}} {short(title, room)}\n"
                    f"{' ' * INDENT}{short(request.prompt, room)}",
                    id=str(index),
                )
            )
        ids = [request.id for request in message.requests]
        options.highlighted = ids.index(chosen) if chosen in ids else 0
        options.focus()

    def _chosen_id(self) -> str | None:
        """The request under the list's cursor (kept there when the list is read again)."""
        if not self.is_mounted:
            return None
        index = self.query_one("#inbox-list", OptionList).highlighted
        return self.requests[index].id if index is not None and index < len(self.requests) else None

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option.id is not None:
            self.dismiss(self.requests[int(event.option.id)])

    def action_close(self) -> None:
        self.dismiss(None)
