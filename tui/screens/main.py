"""The main screen: browser, conversation, composer or inline prompt, status line.

Screens stay thin: every runtime call runs in a worker (``exit_on_error=False``) that posts a
past-tense message back; the app turns any worker failure into a notification.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, cast

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.dom import DOMNode
from textual.message import Message as TextualMessage
from textual.notifications import Notification, Notify, SeverityLevel
from textual.screen import Screen
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Collapsible, Input, OptionList, Static, TextArea, Tree
from textual.widgets.collapsible import CollapsibleTitle
from textual.worker import Worker, WorkerState

from runtime.drafts import draft_revision, restorable
from runtime.errors import (
    AgentTuiError,
    AlreadyAnswered,
    InvalidInput,
    JobNotFound,
    JobRunOpen,
    RunStateConflict,
)
from runtime.fileio import write_text_atomically
from runtime.interrupted import before_its_first_checkpoint, needs_resume
from runtime.kinds import InputKind, Role, RunState
from runtime.locations import EXPORTS_IGNORED, exports_dir
from runtime.textsafe import terminal_safe, terminal_safe_line
from tui import attention, browser_filters
from tui.frame_pacer import FramePacer
from tui.messages import (
    AnswerFailed,
    ApprovalOutdated,
    CheckpointsLoaded,
    JobsLoaded,
    MessageQueued,
    MessageRefused,
    NotesLoaded,
    RequestRouted,
    RetryChoiceWanted,
    RunInterrupted,
    RunLoaded,
    RunRefreshed,
    RunsLoaded,
    RunStarted,
    SearchFinished,
)
from tui.widgets._format import found_words, short, typed_text
from tui.widgets._prompt_base import (
    KeyAfterAnswer,
    KeyBeforeSettled,
    PromptAnswered,
    SettlingPrompt,
)
from tui.widgets.composer import SLASH_COMMANDS, Composer, SlashCommand, merge_texts
from tui.widgets.conversation import Conversation
from tui.widgets.job_tree import (
    BrowserDetail,
    BrowserHeader,
    CheckpointEntry,
    FilterLine,
    JobEntry,
    JobTree,
    MoreEntry,
    RunEntry,
)
from tui.widgets.key_footer import KeyFooter
from tui.widgets.search_field import SearchField
from tui.widgets.search_results import SearchResults
from tui.widgets.status_line import (
    CANCEL_QUESTION_HINTS,
    QUESTION_HINT,
    STOP_HINT,
    StatusLine,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from textual import events

    from runtime.api import RuntimeApi, UnknownChoice
    from runtime.mcp.manager import McpManager
    from runtime.models import Checkpoint, ImageBlock, InputRequest, Job, Run
    from runtime.rewind import RewindPlan
    from runtime.transcript_pages import ItemKey, Keyed, TranscriptPager
    from tui import bridge
    from tui.app import AgentTuiApp
    from tui.extension_commands import ExtensionCommands
    from tui.widgets.confirm_bar import ConfirmBar
    from tui.widgets.question_prompt import QuestionPrompt
    from tui.widgets.retry_choice import RetryChoice
    from tui.widgets.tool_call_view import ToolCallView

STATE_FILTERS = browser_filters.FILTERS


PROMPT_WAITS_TEXT = (
    "? The agent asks: {asks} — finish your message (Enter sends it), then answer; Tab answers now."
)
"""Between a docked prompt and the message being typed when it came (``show_prompt``)."""

APPLIED_DIFF_LINES = 80
"""How much of an applied diff a tool block shows (the rest is counted)."""
DELETED_CHECK_SECONDS = 2.0
"""How often the jobs u could bring back are looked for while there are any: a job deleted by
another process (`agent-tui delete`) takes its events with it and leaves none to say so."""
PROMPTS_RETRY_SECONDS = 30.0
"""No MCP prompt found: ask the servers again when the menu opens after this long."""
NOTICE_SEVERITIES: dict[str, SeverityLevel] = {
    "info": "information",
    "warning": "warning",
    "error": "error",
}
"""A runtime notice's level as a notification's severity."""


def _runs(count: int, one: str = "", many: str = "") -> str:
    """``1 run waits`` / ``3 runs wait``: a count of runs, and its verb."""
    words = f"{count} run" + ("" if count == 1 else "s")
    verb = one if count == 1 else many
    return f"{words} {verb}" if verb else words


class _NewJob:
    """A new job this screen is starting: what is sent to it before it exists (``held``,
    queued for it once it does), then its id."""

    def __init__(self) -> None:
        self.held: list[str] = []
        self.job_id: str | None = None


class MainScreen(Screen[None]):
    # Its stylesheet, main.tcss, is the app's (``AgentTuiApp.CSS_PATH``): read with the app's,
    # not parsed again with every other stylesheet when the screen is first shown.
    AUTO_FOCUS = "#composer-input"
    _styled_at_mount = True
    """Its first ``ScreenResume`` need not restyle it (``_on_screen_resume``)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        # Before "tab Pane": while a prompt waits behind the message being typed, Tab takes it
        # (the line above the box says so), and the footer says the same.
        Binding(
            "tab",
            "take_prompt",
            "Answer",
            tooltip="While the agent asks as you type: answer now (your message stays in the box)",
        ),
        Binding(
            "tab",
            "next_pane",
            "Pane",
            tooltip="Next pane: browser → conversation → bottom (from the composer: the browser,"
            " even while a run works)",
        ),
        Binding("shift+tab", "previous_pane", "Previous pane", show=False),
        Binding(
            "escape",
            "interrupt",
            "Interrupt",
            key_display="esc",
            tooltip="Interrupt the run on screen (it streams or runs tools); Esc again: the"
            " browser",
        ),
        Binding(
            "escape",
            "leave",
            "Leave",
            key_display="esc",
            tooltip="When nothing runs: leave the composer, prompt or search for the browser",
        ),
        Binding("n", "new_job", "New job", tooltip="A new job: the composer, empty"),
        Binding("i", "inbox", "Inbox"),
        Binding("c", "cancel_run", "Cancel", tooltip="Cancel the run on screen (asks first)"),
        Binding("R", "retry", "Retry"),
        # A run later runs of its job went past: R is not offered (a retry would drop their
        # turns), but pressed anyway it says why; f, the way on from it, is offered instead.
        Binding("R", "retry_superseded", "Retry", show=False),
        Binding("f", "fork_superseded", "Fork"),
        Binding("f", "fork", "Fork", show=False),
        Binding("e", "export", "Export", show=False),
        Binding("x", "archive_job", "Archive job", show=False),
        Binding("u", "unarchive_last", "Undo archive", tooltip="Bring back the job archived last"),
        Binding("s", "cycle_filter", "Filter", show=False),
        Binding("slash", "search", "Search", key_display="/", show=False),
        Binding("p", "parent_run", "Parent run"),
        Binding("right_square_bracket", "next_tool", "Next tool", key_display="]"),
        Binding("left_square_bracket", "previous_tool", "Previous tool", key_display="["),
        Binding(
            "t",
            "thinking",
            "Thinking",
            tooltip="Open / close the thinking (and a skill's instructions) in view",
        ),
        Binding("ctrl+t", "follow_up", "Follow up the selected job", show=False),
        Binding("b", "focus_browser", "Browser", show=False),
        Binding("g", "focus_conversation", "Conversation", show=False),
        Binding("w", "cycle_browser", "Browser width", show=False),
    ]

    LETTER_ACTIONS = frozenset(
        {
            "new_job",
            "inbox",
            "cancel_run",
            "retry",
            "retry_superseded",
            "fork",
            "fork_superseded",
            "export",
            "archive_job",
            "unarchive_last",
            "cycle_filter",
            "search",
            "parent_run",
            "next_tool",
            "previous_tool",
            "thinking",
            "focus_browser",
            "focus_conversation",
        }
    )
    """Actions on plain keys: they work only where no text is being typed."""

    _pacer: FramePacer | None = None

    @property
    def _update_timer(self) -> FramePacer:  # type: ignore[override]
        # Textual's own (an interval timer) drew a change up to two frames after the last one:
        # see ``tui.frame_pacer``. The screen resumes and pauses it as it would its timer.
        if self._pacer is None:
            self._pacer = FramePacer(self, self._on_timer_update, repaint_only=self._repaint_only)
        return self._pacer

    def _repaint_only(self) -> bool:
        """Whether the next frame only paints widgets again (Textual's flags, as its
        ``_on_timer_update`` reads them): no layout, scroll or recompose."""
        return not (self._layout_required or self._scroll_required or self._recompose_required)

    def __init__(self) -> None:
        super().__init__(id="main")
        self.selected_run: Run | None = None
        self.selected_job: Job | None = None
        self.open_request: InputRequest | None = None
        self._prompt_asker: Run | None = None
        """The sub-run that asks the open request, when not the run on screen."""
        self._recovery_reported = False
        self._first_page_ahead = False
        """The browser shows the page read before the runtime opened (``show_first_page``)."""
        self._waiting_reported = False
        """The launch's "N runs wait for your input" was said: once, not again at every first
        page the browser loads (each ``s`` did, a new-user trial)."""
        self._recovery_notice: Notification | None = None
        """The "Interrupted runs" notification while it is up: it goes once the runs it
        counts are all resumed (``_resumed``), not 10 s after R was pressed."""
        self._recovery_runs: set[str] = set()
        """The runs that notification counts and nobody resumed yet."""
        self._toast_room: int | None = None  # rows the notifications may take (_fit_toasts)
        self._bottom: Widget | None = None
        self._init_archive_state()
        self._prompt_lines_mounted = False
        self._waiting_prompt: Widget | None = None
        """The open request's prompt while it waits for the message being typed: docked once
        that is sent (or on Tab), ``show_prompt``."""
        self.state_filter: browser_filters.BrowserFilter = None
        self._loading_run_id: str | None = None
        self._started_job_id: str | None = None
        """The job of the run this screen started last: what is typed meanwhile is for it."""
        self._replay: list[TextualMessage] = []
        self._loading_more = False
        self._context_windows: dict[str, int | None] = {}
        self._return_to_tool: str | None = None
        """After jumping back to a parent run: the delegation block to focus again."""
        self._answer_wanted: str | None = None
        """The request the inbox opened a run to answer: its prompt takes the keys once shown,
        also when it was docked already (left with Esc), which showing it again did not do."""
        self._files: list[str] | None = None
        self._listing_files = False
        self._resources: list[str] = []
        self._resources_servers: dict[str, Any] = {}
        """The MCP servers the resources were read from (read again when they change)."""
        self._resources_pending = False
        """The servers are being asked for their resources (the picker says so)."""
        self._prompts_servers: dict[str, Any] = {}
        """The MCP servers the prompt commands were read from (likewise)."""
        """The MCP servers' resources as `server:uri`, for the @-picker."""
        self._applied_diffs: dict[str, str] = {}
        """The diffs completed file writes applied, by tool call id (they never change)."""
        self._interrupted_runs: set[str] = set()
        """Runs stopped by Esc: their end sends no queue (it went back to the composer)."""
        self._stopping: set[str] = set()
        """Runs on screen Esc (or ctrl+c) asked to stop, until they end: a second Esc leaves
        for the browser rather than interrupting again, however soon it comes."""
        self._repairs_told: set[tuple[str, frozenset[str]]] = set()
        """The history repairs said: (job, the tool calls repaired). Each follow-up of a job
        repairs the same calls again before its model call; a person is told once."""
        self._starting_job: _NewJob | None = None
        """The new job what is sent to a new job goes to: from its task's Enter until the box
        addresses it (its run on screen), or a new job is asked for (``_hold_for_new_job``)."""
        self._answered_here: set[str] = set()
        """Requests this screen sent an answer to (a prompt that goes otherwise went elsewhere)."""
        self._cancelled_here: set[str] = set()
        """Runs this screen cancelled (c, then y): no "cancelled elsewhere" for them."""
        self._opened_checkpoint: Checkpoint | None = None
        """The checkpoint Enter opened in the browser: ``f`` forks from it while its run is on
        screen, wherever the focus went (the conversation)."""
        self._sending_queue: set[str] = set()
        self._prompt_commands: list[SlashCommand] = []
        """The MCP servers' prompts as slash commands (asked for when the menu first opens)."""
        self._loading_prompts = False
        self._prompts_asked_at = float("-inf")

    def _init_archive_state(self) -> None:
        """What this screen keeps of the jobs archived with x (part of ``__init__``)."""
        self._archived_here: list[str] = []
        """Jobs archived in this session, the last one first to come back with u: each once
        its archive was written (and until it is brought back, from anywhere)."""
        self._archive_notices: dict[str, tuple[str, Notification]] = {}
        """The title and the "Archived" notice (which offers u) of each job archived here."""
        self._elsewhere_notices: dict[str, tuple[str, Notification]] = {}
        """The title and the "archived elsewhere" notice (which offers `unarchive`) of each job
        on screen that another process archived, while that notice shows."""
        self._deletion_watch: Timer | None = None
        """Looks for the jobs archived here every ``DELETED_CHECK_SECONDS``, once there are."""
        self._archiving: list[str] = []
        """Jobs whose archive, asked for here with x, is still being written (in the order x
        was pressed): their event is told from an archive made elsewhere by this."""
        self._undoing: set[str] = set()
        """Jobs a u pressed is about to bring back (a second u undoes the archive before)."""
        self._archive_writes = asyncio.Lock()
        """Archives and their undoing, written one at a time in the order the keys came: u
        pressed while an archive is on its way undoes it once it landed."""

    @property
    def agent_app(self) -> AgentTuiApp:
        # Typed, not imported: tui.app imports the screens (no import cycle).
        return cast("AgentTuiApp", self.app)

    @property
    def runtime(self) -> RuntimeApi:
        return self.agent_app.open_runtime

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        failed = event.state is WorkerState.ERROR
        if failed and event.worker.group == "open-run":
            self._loading_run_id = None  # its state changes show in the browser again
        if failed and event.worker.group in ("launch", "open", "open-run"):
            self._nothing_opened_at_launch()
        self.agent_app.report_worker_failure(event)

    # --- layout --------------------------------------------------------------------------------
    def _on_screen_resume(self, event: events.ScreenResume) -> None:
        """Runs before ``Screen._on_screen_resume`` (Textual calls each class's handler). The
        first resume, as the app starts, comes right after every widget was styled as it
        mounted, with the same stylesheet: Textual restyled the whole screen again there
        (33 widgets and their component classes, 6-8 ms before the first frame; a bare app's
        screen has three). Any later resume is Textual's, unchanged."""
        if self._styled_at_mount:
            self._styled_at_mount = False
            event.refresh_styles = False

    def compose(self) -> ComposeResult:
        settings = self.agent_app.settings
        with Horizontal(id="body"):
            with Vertical(id="browser"):
                yield SearchField(placeholder="/ search messages", id="search")
                yield FilterLine(browser_filters.filter_name(self.state_filter), id="filter")
                with Vertical(id="tree-pane"):
                    yield BrowserHeader(id="tree-header")
                    yield JobTree(
                        hide_ages=settings.hide_ages, here=str(settings.workspace), id="tree"
                    )
                    yield BrowserDetail(id="tree-detail")
                results = SearchResults(hide_ages=settings.hide_ages, id="search-results")
                results.display = False
                yield results
            with Vertical(id="main-pane"):
                banner = Static("", id="banner", markup=False)
                banner.display = False
                yield banner
                yield Conversation(window=settings.window, id="conversation")
                with Vertical(id="bottom"):
                    origin = Static("", id="prompt-origin", markup=False)
                    origin.display = False
                    yield origin
                    yield Composer(id="composer")
        yield StatusLine(id="status")
        yield KeyFooter(compact=True)

    @property
    def job_tree(self) -> JobTree:
        return self.query_one("#tree", JobTree)

    @property
    def conversation(self) -> Conversation:
        return self.query_one("#conversation", Conversation)

    @property
    def composer(self) -> Composer:
        return self.query_one("#composer", Composer)

    @property
    def status(self) -> StatusLine:
        return self.query_one("#status", StatusLine)

    async def on_mount(self) -> None:
        await self.conversation.show_empty(
            "Type a task below and press Enter.  ? or F1 lists every key."
        )
        # The keys that work change with the focus and the run: the status line's hint too.
        self.bindings_updated_signal.subscribe(self, self._show_stop_keys)
        # The browser's rows and detail count what the status line draws, as it draws it.
        self.status.count_shown = self.job_tree.show_streamed
        self.screen_layout_refresh_signal.subscribe(self, self._fit_toasts)
        if self.agent_app.runtime is not None:  # else the app calls runtime_opened once open
            await self.runtime_opened()

    def _fit_toasts(self, _screen: Screen[object] | None = None) -> None:
        """The notifications end above the bottom pane (the composer or a prompt), however
        tall it grows: the rack stops there, and while the newest would be cut there the
        oldest goes (the app keeps ``MAX_TOASTS`` at most; seven at 80x24 reached down over
        the composer's field, a new-user trial). Called after each layout."""
        if self._bottom is None:
            # Found once: a query walks the conversation's rows first, and this runs at every
            # layout (a streamed answer lays the screen out many times a second).
            self._bottom = self.query_one("#bottom")
        top = self._bottom.region.y
        for rack in self.query_children("#textual-toastrack"):
            room = max(1, top - 1)  # less the rack's top margin (main.tcss)
            if room != self._toast_room:
                self._toast_room = room
                rack.styles.max_height = room
            toasts = list(rack.query("Toast"))
            holder = toasts[0].parent if toasts else None
            if len(toasts) > 1 and toasts[-1].region.bottom > top and isinstance(holder, Widget):
                self.agent_app.expire_toast(holder)  # the next layout looks again

    async def runtime_opened(self) -> None:
        """The runtime is open (the program opens it after the first frame): fill the screen."""
        try:
            runtime = self.runtime
            self.status.attached = self.agent_app.settings.attach
            self.status.show(model=str(runtime.default_model), notice=runtime.model_notice)
            composer = self.composer
            composer.file_source = self._file_list
            composer.command_sources.append(self._mcp_prompt_commands)
            composer.command_sources.append(self.extension_commands.slash_commands)
            settings = self.agent_app.settings
            composer.typed_ahead_for_job = bool(
                settings.open_run or settings.open_job or settings.continue_last
            )
            self.load_jobs(None, first=True)
            self.agent_app.start_bridge(self)
            self._check_sandbox()
            self._load_history()
            self._load_draft(None)
            if settings.open_run is not None:
                self.open_run(settings.open_run)
            elif settings.open_job is not None:
                self.open_job(settings.open_job)
            elif settings.continue_last:
                self._open_latest()
        finally:
            self.agent_app.input_ready()  # what was typed meanwhile, whatever happened here

    def workspace_commands(self) -> list[tuple[str, str]]:
        """This workspace's skills, custom commands and MCP prompts as the help lists them:
        (``/name ARGS``, what it does)."""
        commands = [*self.extension_commands.slash_commands(), *self._prompts_that_run()]
        return [(f"/{c.name} {c.argument}".strip(), c.help) for c in commands]

    def _prompts_that_run(self) -> list[SlashCommand]:
        """The MCP prompts found, but those a custom command of the same name (case aside)
        hides: ``/name`` runs the command, tried first (``run_command``)."""
        extension_commands = self.extension_commands
        return [c for c in self._prompt_commands if not extension_commands.runs(c.name)]

    def _mcp_prompt_commands(self) -> list[SlashCommand]:
        """The composer's menu asks: the MCP servers' prompts as ``/server:prompt`` commands.
        Asked of the servers the first time the menu opens (none start before someone types
        ``/``); while none were found (a server that was down), again after a while."""
        import time

        manager = self.runtime.mcp
        stale = time.monotonic() - self._prompts_asked_at > PROMPTS_RETRY_SECONDS
        # The servers changed since (a .mcp.json edit, followed by the runs): asked again (a
        # trial's new server worked in runs, but its prompts were not offered here).
        moved = manager is not None and manager.servers != self._prompts_servers
        wanted = moved or (not self._prompt_commands and stale)
        if manager is not None and wanted and not self._loading_prompts:
            self._loading_prompts = True
            self._prompts_asked_at = time.monotonic()
            self._prompts_servers = dict(manager.servers)
            self._load_prompt_commands(manager)
        return self._prompts_that_run()

    @work(exit_on_error=False, group="mcp-prompts")
    async def _load_prompt_commands(self, manager: McpManager) -> None:
        from tui.mcp_prompts import prompt_commands

        try:
            self._prompt_commands = await prompt_commands(manager)
        finally:
            self._loading_prompts = False
        self.composer.refresh_commands()

    @work(exit_on_error=False, group="mcp-prompts")
    async def _send_prompt(
        self,
        manager: McpManager,
        name: str,
        argument: str,
        follow_up_job_id: str | None,
        *,
        typed: str,
    ) -> None:
        from tui.mcp_prompts import prompt_text

        text: str | None = None
        try:
            text = await prompt_text(manager, name, argument)
        except AgentTuiError as error:
            self.notify(
                self.agent_app.error_text(error), title=f"/{name}", severity="error", markup=False
            )
        finally:
            if self.is_attached:
                # Failed (an error of any kind), the command comes back, to be corrected.
                self.composer.command_done(typed, keep_text=text is None)
        if text is not None:
            self._submit(text, follow_up_job_id, title=f"/{name} {argument}".strip())

    @work(exit_on_error=False, group="launch")
    async def _open_latest(self) -> None:
        page = await self.runtime.list_jobs(limit=1)
        if page.items:
            self.open_job(page.items[0].id)
        else:
            self._nothing_opened_at_launch()
            self.notify("No job yet to continue: type a task below.", title="--continue")

    def _nothing_opened_at_launch(self) -> None:
        """What was typed for the job to open at launch is the new job's (none opens): it must
        not go to the job opened next, from the browser, say."""
        for composer in self.query(Composer):
            composer.typed_ahead_for_job = False

    # --- composer support: history, drafts, files ----------------------------------------------
    @work(exit_on_error=False, group="history")
    async def _load_history(self) -> None:
        store = self.runtime.store
        prompts = await store.recent_prompts(workspace=str(self.runtime.workspace), limit=200)
        composer = self.composer
        # A skill invoked comes back as typed (``/review a.py``), not as its instructions.
        workspace = str(self.runtime.workspace)
        recalled = [typed_text(p, workspace) for p in reversed(prompts)]
        composer.history = [*recalled, *composer.history]

    @work(exit_on_error=False, group="draft-load")
    async def _load_draft(self, job_id: str | None) -> None:
        store, writer = self.runtime.store, self.runtime.owner_id
        drafts = restorable(await store.get_composer_drafts(job_id), writer=writer)
        text = drafts.text
        if not text or not self.composer.restore_draft(job_id, text):
            return
        if drafts.left:
            # Left by an agent-tui that quit or crashed: ours now, in one write, so neither a
            # third one nor the next launch puts it back again.
            await store.save_composer_draft(job_id, text, writer=writer, replacing=drafts.left_by)
        if drafts.queued:
            # Queued while a run worked, then the app quit or crashed: back in the box with
            # the draft, for the person to send (not sent by itself after a restart).
            self.notify(
                "The messages you had queued are back in the box: Enter sends them.",
                title="Queued messages",
            )
        else:
            # Said, not only shown: typed on without a look, a new task was sent with it in
            # front (a draft left by an agent-tui that quit, in a trial).
            self.notify("Text you had not sent is back in the box.", title="Draft")

    @on(Composer.DraftWanted)
    def _draft_wanted(self, message: Composer.DraftWanted) -> None:
        message.stop()
        if message.carried:
            self._merge_draft(message.job_id)
        else:
            self._load_draft(message.job_id)

    @work(exit_on_error=False, group="draft-load")
    async def _merge_draft(self, job_id: str | None) -> None:
        """Text carried to ``job_id`` by ctrl+t: that target's saved draft goes under it, and
        both are saved as its draft (the carried text alone was saved over it)."""
        store, writer = self.runtime.store, self.runtime.owner_id
        try:
            drafts = restorable(await store.get_composer_drafts(job_id), writer=writer)
            merged = self.composer.merge_draft(job_id, drafts.text)
            if merged is None:
                return
            replacing = drafts.left_by if drafts.left else []
            await store.save_composer_draft(job_id, merged, writer=writer, replacing=replacing)
            if drafts.text.strip() and drafts.text.strip() in merged and merged != drafts.text:
                self.notify("The draft this job had is kept under what you carried.", title="Draft")
        finally:
            # Failed (the store busy, an error): saves were held back until this read, and
            # stayed held for good (a review). They go on, the next one merging in the store.
            self.composer.merge_failed(job_id)

    async def _save_merged(self, job_id: str | None, text: str, *, revision: int) -> str:
        """Save ``text`` as ``job_id``'s draft with the draft saved there under it (text carried
        there by ctrl+t, whose own draft was never put in the box); that draft is returned.
        ``revision``: as the store's, taken when ``text`` was taken from the box."""
        store, writer = self.runtime.store, self.runtime.owner_id
        drafts = restorable(await store.get_composer_drafts(job_id), writer=writer)
        replacing = drafts.left_by if drafts.left else []
        merged = merge_texts(text, drafts.text)
        await store.save_composer_draft(
            job_id, merged, writer=writer, replacing=replacing, revision=revision
        )
        return drafts.text

    @on(Composer.QueueChanged)
    def _queue_changed(self, message: Composer.QueueChanged) -> None:
        message.stop()
        job_id = message.job_id
        self._save_queue(job_id, self.composer.queued(job_id), draft_revision())
        self._sync_prompt_queue()

    def _sync_prompt_queue(self) -> None:
        """While a prompt hides the composer, the messages queued for the job still show, on
        a line over the prompt (they were hidden with the box)."""
        composer = self.composer
        job_id = composer.follow_up_job_id
        queue = composer.queued(job_id) if job_id is not None else []
        line = self._prompt_line("prompt-queued")
        if line is None:
            return  # no prompt was ever shown: nothing hides the box
        hidden = self.open_request is not None and not composer.display
        typed = composer.input.text.strip()
        said = []
        if hidden and queue:
            many = f"{len(queue)} messages" if len(queue) > 1 else "1 message"
            first = short(terminal_safe_line(" ".join(queue[0].split())), 60)
            said.append(f"↳ {many} queued for this job, sent when the run finishes: {first}")
        if hidden and typed:
            # Tab took the keys to the prompt: what was being typed is kept, and says so.
            kept = short(terminal_safe_line(" ".join(typed.split())), 60)
            said.append(f"↳ Your unsent message comes back once you answer: {kept}")
        if said:
            line.update("\n".join(said))
        line.display = bool(said)

    @work(exit_on_error=False, group="queue-save")
    async def _save_queue(self, job_id: str, texts: list[str], revision: int) -> None:
        """Saves run side by side: the store keeps the queue of the highest ``revision``, taken
        with ``texts`` (else an older queue landing last brought back a message already sent)."""
        await self.runtime.store.save_queued_messages(
            job_id, texts, writer=self.runtime.owner_id, revision=revision
        )

    @on(Composer.DraftChanged)
    def _draft_changed(self, message: Composer.DraftChanged) -> None:
        message.stop()
        self._save_draft(message.job_id, message.text, message.revision, merge=message.merge)

    @work(exit_on_error=False, group="draft-save")
    async def _save_draft(
        self, job_id: str | None, text: str, revision: int, *, merge: bool = False
    ) -> None:
        """Saves run side by side: the store keeps the text of the highest ``revision``."""
        if merge:
            draft = await self._save_merged(job_id, text, revision=revision)
            self.composer.merged_in_store(job_id, text, draft)
            return
        await self.runtime.store.save_composer_draft(
            job_id, text, writer=self.runtime.owner_id, revision=revision
        )

    async def save_drafts_now(self) -> None:
        """Before quitting: the drafts being typed are saved, whatever the debounce, and the
        messages queued (as they were when queued: again, in case a save was still due).
        Nothing before the runtime is open: what was typed by then is still held, unapplied."""
        if self.agent_app.runtime is None:
            return
        composer, store, writer = self.composer, self.runtime.store, self.runtime.owner_id
        if composer.is_mounted:
            composer.flush_draft()
            if composer.merge_pending:
                # Carried there by ctrl+t, the target's own draft not read yet: kept under it,
                # not saved over (a review).
                await self._save_merged(
                    composer.follow_up_job_id, composer.input.text, revision=draft_revision()
                )
            else:
                await store.save_composer_draft(
                    composer.follow_up_job_id, composer.input.text, writer=writer
                )
            for job_id, texts in list(composer.queues.items()):
                await store.save_queued_messages(job_id, texts, writer=writer)
        question_prompt = sys.modules.get("tui.widgets.question_prompt")
        if question_prompt is None:
            return  # no question was ever shown
        for prompt in self.query(question_prompt.QuestionPrompt):
            prompt.stop_saving()  # saved here, now
            request = prompt.request
            await store.save_answer_draft(
                request.id, prompt.answer_text, job_id=request.job_id, writer=writer
            )

    def _file_list(self) -> list[str] | None:
        """The @-picker's entries: the workspace's files, then the MCP servers' resources
        (``server:uri``, asked of the servers the first time the picker opens)."""
        manager = self.runtime.mcp
        if self._files is None and not self._listing_files:
            self._listing_files = True
            self._list_files()
            if manager is not None and manager.servers:
                self._ask_resources(manager)
        elif manager is not None and manager.servers != self._resources_servers:
            self._ask_resources(manager)  # changed since: asked again
        if self._files is None:
            return None
        return [*self._files, *self._resources] if self._resources else self._files

    def _ask_resources(self, manager: McpManager) -> None:
        self._resources_servers = dict(manager.servers)
        self._resources_pending = True
        self._list_resources(manager)

    @work(exit_on_error=False, group="mcp-resources")
    async def _list_resources(self, manager: McpManager) -> None:
        from tui.mcp_resources import resource_mentions

        try:
            self._resources = await resource_mentions(manager)
        finally:
            # An open picker shows them now, not at the next key (a new-user trial read "no
            # file matches" for a resource that had arrived meanwhile).
            self._resources_pending = False
            self.composer.refresh_files()

    @work(exit_on_error=False, group="files", thread=True)
    def _list_files(self) -> None:
        from tui.file_index import list_files

        files = list_files(self.agent_app.settings.workspace)
        self.app.call_from_thread(self._files_listed, files)

    @on(Composer.FilesWanted)
    def _files_wanted(self, message: Composer.FilesWanted) -> None:
        message.stop()
        self._rank(message.query, message.files)

    @work(exit_on_error=False, group="rank-files", exclusive=True, thread=True)
    def _rank(self, query: str, files: list[str]) -> None:
        """Ranking 50,000 paths takes tens of milliseconds: off the event loop, so typing
        never waits for it; a newer keystroke replaces an older ranking."""
        ranked = _rank_files(query, files)
        pending = self._resources_pending
        self.app.call_from_thread(self.composer.show_file_matches, query, ranked, pending)

    def _files_listed(self, files: list[str]) -> None:
        self._files = files
        self._listing_files = False
        self.composer.refresh_files()

    @work(exit_on_error=False, group="sandbox", thread=True)
    def _check_sandbox(self) -> None:
        """Probe bubblewrap once (it starts a process: off the event loop). Without it, shell
        commands run unconfined and every shell call asks: say so once, and keep it in the
        status line."""
        from runtime.tools.sandbox import sandbox_status

        notice = sandbox_status().notice
        if notice is not None:
            self.app.call_from_thread(self._sandbox_missing, notice)

    def _sandbox_missing(self, notice: str) -> None:
        status = self.status
        status.sandbox_notice = notice
        status.redraw()
        self.notify(
            terminal_safe_line(notice),
            title="Shell sandbox",
            severity="warning",
            markup=False,
            timeout=10,
        )

    @work(exit_on_error=False, group="recovery")
    async def _report_recovery(self) -> None:
        """Runs a crash interrupted (recovered as the runtime opened), or else runs of this
        folder's jobs a quit interrupted that wait to be resumed (a trial quit with a run
        working, came back, and nothing but the row's ⚠ said so)."""
        report = self.runtime.recovery
        recovered = [*report.requeued, *report.failed, *report.interrupted_queued]
        if recovered:
            # f forks from a checkpoint: a trial read "f to fork" over a run stopped in its
            # first step, where f only says there is none yet.
            forkable = [run_id for run_id in recovered if await self.runtime.checkpoints(run_id)]
            if not forkable:
                keys = "press R to retry"
            elif len(forkable) < len(recovered):
                keys = "press R to retry, or f to fork one that finished a step"
            else:
                keys = "press R to retry or f to fork"
            self._notify_recovery(
                f"{_runs(len(recovered))} stopped before finishing last time: select one (its "
                f"banner says why) and {keys}, or send its job a message.",
                set(recovered),
            )
            return
        from runtime.interrupted import interrupted_runs

        stopped = in_doubt = 0
        counted: set[str] = set()
        here: dict[str, bool] = {}
        for run in await interrupted_runs(self.runtime, limit=50, scan=200):
            if run.job_id not in here:
                job = await self.runtime.get_job(run.job_id)
                here[run.job_id] = not self.job_tree.is_elsewhere(job.workspace)
            if not here[run.job_id]:
                continue
            counted.add(run.id)
            if run.failure is not None and run.failure.code == "tool_indeterminate":
                in_doubt += 1  # not a quit's or a crash's: a trial read it so
            else:
                stopped += 1
        if stopped or in_doubt:
            why = [f"{stopped} interrupted by a quit or a crash"] if stopped else []
            why += [f"{in_doubt} with a tool's outcome unknown"] if in_doubt else []
            self._notify_recovery(
                f"{_runs(stopped + in_doubt, 'waits', 'wait')} to be resumed here"
                f" ({', '.join(why)}; marked ⚠): select one and press R, or send its job a"
                " message.",
                counted,
            )

    def _notify_recovery(self, text: str, run_ids: set[str]) -> None:
        """The "Interrupted runs" notification, kept to be expired when ``run_ids`` are all
        resumed (``App.notify`` returns nothing to expire it by)."""
        notice = Notification(text, "Interrupted runs", "warning", 10)
        self._recovery_notice, self._recovery_runs = notice, set(run_ids)
        self.app.post_message(Notify(notice))

    def _resumed(self, run_id: str) -> None:
        """``run_id`` was resumed, retried or cancelled: once none of the runs the
        "Interrupted runs" notification counts waits, it goes (a trial pressed R and read it
        for ten more seconds over the resumed run)."""
        runs = self._recovery_runs
        if run_id not in runs:
            return
        runs.discard(run_id)
        notice = self._recovery_notice
        if not runs and notice is not None:
            self._recovery_notice = None
            # Expired now: the next notification shown (R's "Retrying…") leaves it out. Textual
            # has no public call that removes one notification (its toast's click uses a
            # private one); resumed from elsewhere, it keeps to its timeout.
            notice.timeout = 0.0

    # --- browser loading -----------------------------------------------------------------------
    @work(exit_on_error=False, group="jobs")
    async def load_jobs(self, cursor: str | None, *, first: bool = False) -> None:
        limit = self.agent_app.settings.page_size
        if self.state_filter == browser_filters.INTERRUPTED:
            jobs = await browser_filters.interrupted_jobs(self.runtime, limit=limit)
            self.post_message(JobsLoaded(jobs, None, first=first))
            return
        state = self.state_filter if isinstance(self.state_filter, RunState) else None
        page = await self.runtime.list_jobs(
            cursor=cursor,
            limit=limit,
            state=state,
            interrupted=browser_filters.interrupted_option(self.state_filter),
        )
        self.post_message(JobsLoaded(page.items, page.next_cursor, first=first))

    def show_first_page(self, jobs: list[Job]) -> None:
        """The browser's first page, read before the runtime opened (``tui.app``): its rows
        only; the runtime's page replaces it (``load_jobs``), with what loads more."""
        if self.agent_app.runtime is None and jobs and not self.job_tree.job_ids:
            self.job_tree.add_jobs(jobs, None)
            self._first_page_ahead = True

    def on_jobs_loaded(self, message: JobsLoaded) -> None:
        self._loading_more = False
        tree = self.job_tree
        chosen_ahead: Job | None = None
        if message.first:
            if self._first_page_ahead:
                # A row clicked on the page read ahead: the same job's row on this page, which
                # may be at another line (recovery, a job from another process).
                self._first_page_ahead = False
                chosen_ahead = tree.cursor_job()
            tree.clear_jobs()
            if chosen_ahead is not None:
                tree.cursor_line = -1
            if not self._recovery_reported:
                # After the browser's first page: its scan of interrupted runs (15-30 ms at
                # 100,000 jobs) must not hold that page back.
                self._recovery_reported = True
                self.call_after_refresh(self._report_recovery)
        tree.empty_text = browser_filters.empty_text(self.state_filter)
        tree.add_jobs(message.jobs, message.next_cursor)
        if chosen_ahead is not None and (row := tree.job_node(chosen_ahead.id)) is not None:
            tree.move_cursor(row)
        # A crash leaves runs queued, running or failed: look at those jobs' runs (a page at
        # most) so an interrupted one shows ⚠ on its job row too.
        suspects = [
            job.id
            for job in message.jobs
            if job.latest_run_state in (RunState.QUEUED, RunState.RUNNING, RunState.FAILED)
            and job.id not in tree.loaded_runs
        ]
        if suspects:
            self._check_interrupted(suspects)
        if message.first and not self._waiting_reported:
            self._waiting_reported = True  # at launch only: not at each filter's first page
            if message.jobs:
                settings = self.agent_app.settings
                # The job opened at launch shows its own prompt: not counted as waiting.
                shown = settings.open_job or (
                    message.jobs[0].id if settings.continue_last else None
                )
                self._count_waiting(shown)
        if message.first and message.jobs:
            # The focus stays where it is (the composer, at start): a person who relaunches
            # types a task at once, as in a fresh app, and letters typed into the browser are
            # its actions (`e` exported the job into the workspace). The cursor waits on the
            # first job for Tab (or Esc) to the browser.
            tree.call_after_refresh(self._cursor_to_first_row)

    def _cursor_to_first_row(self) -> None:
        """The browser's cursor on its first row, unless a row was chosen meanwhile (a run
        opened at start, ``--continue``, selects its own row: it keeps it)."""
        tree = self.job_tree
        if tree.cursor_line == -1 and tree.root.children:
            tree.wait_on_top()

    @work(exit_on_error=False, group="interrupted")
    async def _check_interrupted(self, job_ids: list[str]) -> None:
        for job_id in job_ids:
            runs = await self.runtime.job_runs(job_id)
            self.post_message(RunsLoaded(job_id, runs))

    @work(exit_on_error=False, group="inbox-count")
    async def _count_waiting(self, shown_job_id: str | None) -> None:
        waiting = [r for r in await self.runtime.inbox(limit=100) if r.job_id != shown_job_id]
        if waiting:
            self.notify(
                f"{_runs(len(waiting), 'waits', 'wait')} for your input — the inbox: i in the"
                " browser (Tab from the composer).",
                title="Inbox",
            )

    @work(exit_on_error=False, group="runs")
    async def load_runs(self, job_id: str) -> None:
        runs = await self.runtime.job_runs(job_id)
        self.post_message(RunsLoaded(job_id, runs))

    def on_runs_loaded(self, message: RunsLoaded) -> None:
        self.job_tree.set_runs(message.job_id, message.runs)
        run = self.selected_run
        if (
            run is not None
            and run.job_id == message.job_id
            and not self._at_opened_checkpoint(run.id)
        ):
            self.job_tree.select_run(run.id)

    def _at_opened_checkpoint(self, run_id: str) -> bool:
        """Whether the browser's cursor is on the checkpoint of ``run_id`` that Enter opened
        (it stays there rather than going to the run's row)."""
        node = self.job_tree.cursor_node
        opened = self._opened_checkpoint
        return (
            opened is not None
            and opened.run_id == run_id
            and node is not None
            and isinstance(node.data, CheckpointEntry)
            and node.data.checkpoint.id == opened.id
        )

    @work(exit_on_error=False, group="checkpoints")
    async def load_checkpoints(self, run_id: str) -> None:
        checkpoints = await self.runtime.checkpoints(run_id)
        self.post_message(CheckpointsLoaded(run_id, checkpoints))

    def on_checkpoints_loaded(self, message: CheckpointsLoaded) -> None:
        self.job_tree.set_checkpoints(message.run_id, message.checkpoints)

    def _load_more(self, cursor: str) -> None:
        if not self._loading_more:
            self._loading_more = True
            self.load_jobs(cursor)

    @on(Tree.NodeExpanded, "#tree")
    def _node_expanded(self, event: Tree.NodeExpanded[Any]) -> None:
        if self.agent_app.runtime is None:
            return  # a row of the first page, clicked before the runtime opened
        data = event.node.data
        if isinstance(data, JobEntry) and data.job.id not in self.job_tree.loaded_runs:
            self.load_runs(data.job.id)
        elif isinstance(data, RunEntry):
            self.load_checkpoints(data.run.id)

    @on(Tree.NodeHighlighted, "#tree")
    def _node_highlighted(self, event: Tree.NodeHighlighted[Any]) -> None:
        if self.agent_app.runtime is None:
            return  # a row of the first page, clicked before the runtime opened
        # What the row under the cursor offers changes the footer: f on a checkpoint's row
        # forked, unshown, until some other change redrew the keys (a new-user trial).
        self.refresh_bindings()
        data = event.node.data
        if isinstance(data, MoreEntry):
            self._load_more(data.cursor)
        elif isinstance(data, JobEntry):
            self.composer.set_selected_job(data.job.id, data.job.title)

    @on(Tree.NodeSelected, "#tree")
    def _node_selected(self, event: Tree.NodeSelected[Any]) -> None:
        if self.agent_app.runtime is None:
            return  # a row of the first page, clicked before the runtime opened
        data = event.node.data
        self._opened_checkpoint = None
        if isinstance(data, JobEntry):
            self.open_job(data.job.id)
        elif isinstance(data, RunEntry):
            self.open_run(data.run.id)
        elif isinstance(data, CheckpointEntry):
            # The conversation around the step's last message, marked; the cursor stays on
            # the checkpoint (it went back to the run's row, and nothing said which step was
            # open, though f then forked from it: a new-user trial).
            checkpoint = data.checkpoint
            self.open_run(checkpoint.run_id, at_position=checkpoint.last_position)
            self._opened_checkpoint = checkpoint
            self.notify(
                f"Step {checkpoint.step}: the conversation as it stood then is marked."
                " f forks a new job from here.",
                title="Checkpoint",
            )
        elif isinstance(data, MoreEntry):
            self._load_more(data.cursor)

    # --- opening a run -------------------------------------------------------------------------
    @work(exit_on_error=False, group="open", exclusive=True)
    async def open_job(self, job_id: str) -> None:
        runs = await self.runtime.job_runs(job_id)
        self.post_message(RunsLoaded(job_id, runs))
        roots = [run for run in runs if run.parent_run_id is None]
        if roots:
            latest = max(roots, key=lambda run: run.created_at)
            self.open_run(latest.id)

    def open_run(
        self, run_id: str, *, at_position: int | None = None, words: Sequence[str] = ()
    ) -> None:
        """Show the run, at its tail (followed as it grows) or, with ``at_position``, around
        its message there (a search hit, of ``words``)."""
        self._loading_run_id = run_id
        self._replay = []
        self._load_run(run_id, at_position, words)

    @work(exit_on_error=False, group="open-run", exclusive=True)
    async def _load_run(
        self, run_id: str, at_position: int | None = None, words: Sequence[str] = ()
    ) -> None:
        runtime = self.runtime
        page = self.conversation.page  # a page; the conversation pages through the rest
        run, job = await self._run_and_job(run_id)
        from runtime.transcript_pages import TranscriptPager

        pager = await TranscriptPager.open(runtime.store, run)
        items, has_older, has_newer, found = await _first_window(pager, page, at_position)
        tool_calls = await runtime.tool_calls(run_id)
        request = None
        asker: Run | None = None
        if run.state is RunState.INPUT_REQUIRED:
            request = await runtime.open_request(run_id)
        elif not run.state.is_terminal:
            waiting = await self._descendant_request(run)
            if waiting is not None:
                request, asker = waiting
        # Started (or retried) before this app saw it: its working time counts from its
        # latest start, as the store says (from its creation, a run retried in another
        # agent-tui read "running 22s" here and "running 6s" there).
        since = await runtime.store.running_since(run_id) if run.state is RunState.RUNNING else None
        self.post_message(
            RunLoaded(
                run,
                job,
                items,
                tool_calls,
                request,
                has_older=has_older,
                pager=pager,
                asker=asker,
                has_newer=has_newer,
                found=found,
                found_words=words,
                running_since=since,
            )
        )
        # After the run is on screen (a note is a line among the messages, never worth a wait).
        notes = await runtime.extensions.notes(run_id)
        if notes:
            self.post_message(NotesLoaded(run_id, notes))

    async def _is_descendant(self, run: Run, ancestor_id: str) -> bool:
        """Whether ``run`` was delegated (directly or further down) by the run ``ancestor_id``."""
        current = run
        for _ in range(32):  # delegation chains are short; a bound keeps a bad row harmless
            if current.parent_run_id is None:
                return False
            if current.parent_run_id == ancestor_id:
                return True
            current = await self.runtime.get_run(current.parent_run_id)
        return False

    async def _descendant_request(self, run: Run) -> tuple[InputRequest, Run] | None:
        """An open request of one of ``run``'s sub-runs: the parent waits on it."""
        for request in await self.runtime.inbox(limit=100):
            if request.job_id != run.job_id or request.run_id == run.id:
                continue
            asker = await self.runtime.get_run(request.run_id)
            if await self._is_descendant(asker, run.id):
                return request, asker
        return None

    @on(Conversation.Jumped)
    async def _conversation_jumped(self, message: Conversation.Jumped) -> None:
        message.stop()
        if self.is_attached:
            await self.conversation.show_jump(message)

    async def on_run_loaded(self, message: RunLoaded) -> None:
        if message.run.id != self._loading_run_id or not self.is_attached:
            # Not attached: the app is closing and the screen's queue still holds what came
            # meanwhile (a quit while a run streams). Mounting into it raised MountError, which
            # turned the quit into a traceback and exit status 1; so do the handlers below that
            # mount what the runtime sent (a message's view, notes, a prompt).
            return
        # One layout and one frame for the whole change (the tree's row, the conversation
        # cleared and its window mounted, the status line, the prompt), not one per step: each
        # await below would otherwise let the screen lay out and draw a half-opened run.
        with self.app.batch_update():
            await self._show_loaded_run(message)

    async def _show_loaded_run(self, message: RunLoaded) -> None:
        await self._close_retry_choice()
        if self.selected_run is None or self.selected_run.id != message.run.id:
            await self._close_confirm_bar()
        self.selected_run = message.run
        self.selected_job = message.job
        self._target_composer(message.job)
        self.conversation.workspace = message.job.workspace
        self.job_tree.upsert_job(message.job)
        if message.job.id not in self.job_tree.loaded_runs:
            self.load_runs(message.job.id)
        else:
            self.job_tree.upsert_run(message.run)
            if not self._at_opened_checkpoint(message.run.id):
                self.job_tree.select_run(message.run.id)
        await self.conversation.load(
            message.run.id,
            message.items,
            message.tool_calls,
            has_older=message.has_older,
            pager=message.pager,
            has_newer=message.has_newer,
            found=message.found,
            found_words=message.found_words,
        )
        self._loading_run_id = None
        replay, self._replay = self._replay, []
        for pending in replay:
            await self._apply_to_conversation(pending)
        if message.running_since is not None:
            self.status.started_running(message.run.id, message.running_since)
        self._show_run_state(message.run)
        self.status.show_open_tools(self.conversation.open_tools())
        request, asker = message.request, message.asker
        if request is None and not message.run.state.is_terminal:
            # The run may have started waiting while it loaded (its state change arrived
            # before the run was on screen): ask the store, which is the truth.
            request = await self.runtime.open_request(message.run.id)
            asker = None
            # The state changes this view may have missed while it loaded (it may even have
            # ended meanwhile): the store is the truth.
            self.refresh_run(message.run.id)
        if request is not None:
            await self.show_prompt(request, asker=asker)
            if request.id == self._answer_wanted:
                # Asked for from the inbox: a prompt that waited over the box docks, as Tab
                # docks it (it stayed hidden, and the keys went to the browser: a trial).
                await self._take_prompt(settle=False)
                self._focus_pane(2)
        else:
            await self.hide_prompt()
        self._answer_wanted = None
        back_to, self._return_to_tool = self._return_to_tool, None
        if back_to is not None:
            block = self.conversation.tool_view(back_to)
            if block is not None:
                block.focus()

    def _context_window(self, run: Run) -> int | None:
        """The window ``run`` is measured against: its folder's ``[defaults] context_window``,
        else its model's (cached per model and job); None when no provider knows the model."""
        key = f"{run.model}\0{run.job_id}"
        if key not in self._context_windows:
            job = self.selected_job
            workspace = job.workspace if job is not None and job.id == run.job_id else None
            window: int | None
            try:
                window = int(self.runtime.context_window(run.model, workspace=workspace))
            except (AgentTuiError, AttributeError, ValueError):
                window = None
            self._context_windows[key] = window
        return self._context_windows[key]

    def _show_run_state(self, run: Run) -> None:
        composer = self.composer
        self.status.next_run = dict(composer.next_run.get(composer.follow_up_job_id, {}))
        self.status.elsewhere = self._worked_elsewhere(run)
        gone_past = self.job_tree.gone_past(run)
        self.status.gone_past = gone_past
        self.status.show(
            run=run,
            context_window=self._context_window(run),
            context_floor=0 if run.context_tokens else self.job_tree.context_before(run),
        )
        self.job_tree.keep_live(run.id)
        # The rows take the status line's count as it stands now: a new usage figure ended it.
        self.job_tree.show_streamed(run, self.status.streamed_chars)
        self.refresh_bindings()
        banner = self.query_one("#banner", Static)
        if needs_resume(run):
            why = (
                terminal_safe_line(run.failure.message)
                if run.failure
                else "its process stopped mid-run"
            )
            if gone_past:
                keys = "Later runs continued this job: f fork from its last checkpoint"
            elif run.failure is not None and run.failure.code == "tool_indeterminate":
                keys = "R to choose: run it again, continue without it, or fork"
            elif before_its_first_checkpoint(run):
                # Stopped in its first step: nothing to fork from (f said "no checkpoint to
                # fork from yet" under a banner that offered it: a new-user trial).
                keys = "R retry from its start"
            else:
                keys = "R retry · f fork from the last checkpoint"
            if run.failure is not None and run.failure.code == "tool_indeterminate":
                banner.update(f"⚠ Failed · tool outcome unknown: {why}.  {keys}")
            else:
                banner.update(f"⚠ Interrupted: {why}.  {keys}")
            banner.display = True
        elif run.state is RunState.FAILED and run.failure is not None:
            failure = terminal_safe_line(run.failure.message)
            keys = "later runs continued this job: f fork" if gone_past else "R retry"
            banner.update(f"✗ Failed ({run.failure.code}): {failure}  · {keys}")
            banner.display = True
        else:
            banner.display = False

    # The tool blocks' messages are handled by name, not with ``@on``: their module is imported
    # with the first block shown, not for the first frame.
    def on_tool_call_view_open_child_requested(
        self, message: ToolCallView.OpenChildRequested
    ) -> None:
        self.conversation.focus()
        if message.child_run_id:
            self.open_run(message.child_run_id)
        elif self.selected_run is not None:
            self._find_child(self.selected_run.id, message.tool_call_id)

    def on_tool_call_view_diff_wanted(self, message: ToolCallView.DiffWanted) -> None:
        message.stop()
        self._show_applied_diff(message.view)

    @work(exit_on_error=False, group="applied-diff")
    async def _show_applied_diff(self, view: ToolCallView) -> None:
        """After an approved edit the block shows the diff it applied (from the file snapshots
        recorded with the call), live and when the run is opened again."""
        from runtime.rewind import applied_diff

        # A finished call's diff never changes: the window mounts a block again and again as the
        # person scrolls, and each time would read the job's snapshots and their blobs.
        diff = self._applied_diffs.get(view.tool_call_id)
        if diff is None:
            found = await applied_diff(
                self.runtime.store, view.tool_call_id, limit=APPLIED_DIFF_LINES
            )
            if not found:
                return
            diff = self._applied_diffs[view.tool_call_id] = found
        view.show_diff(diff)

    def on_tool_call_view_images_requested(self, message: ToolCallView.ImagesRequested) -> None:
        self._save_images(message.images)

    @work(exit_on_error=False, group="images")
    async def _save_images(self, images: list[ImageBlock]) -> None:
        """Save a result's images into the workspace (as export does) and open them with the
        desktop's viewer when there is one."""
        from runtime.images import save_image

        folder = self.agent_app.settings.workspace
        try:
            paths = [await save_image(self.runtime.store, image, folder) for image in images]
        except (AgentTuiError, OSError) as exc:
            self.notify(f"Could not save the image: {exc}", title="Image", severity="error")
            return
        opened = open_with_viewer(paths)
        names = ", ".join(str(path) for path in paths)
        self.notify(f"{'Opened' if opened else 'Saved'} {names}", title="Image", markup=False)

    def on_tool_call_view_sub_run_wanted(self, message: ToolCallView.SubRunWanted) -> None:
        message.stop()
        self._fold_sub_run(message.view, self.conversation.run_id, message.child_run_id)

    @work(exit_on_error=False, group="sub-run")
    async def _fold_sub_run(
        self, view: ToolCallView, run_id: str | None, child_run_id: str | None
    ) -> None:
        """The sub-run a delegation made, folded under its block (read when unfolded)."""
        from runtime.transcript import run_transcript
        from tui.widgets.conversation import sub_run_widgets

        child = None
        if child_run_id is not None:
            child = await self.runtime.get_run(child_run_id)
        elif run_id is not None:
            run = await self.runtime.get_run(run_id)
            child = next(
                (
                    c
                    for c in await self.runtime.job_runs(run.job_id)
                    if c.parent_run_id == run_id and c.parent_tool_call_id == view.tool_call_id
                ),
                None,
            )
        if child is None:
            await view.show_sub_run([], "This delegation has not started its sub-run yet.")
            return
        items = [item async for item in run_transcript(self.runtime.store, child)]
        note = f"{child.agent} · {child.model} · {child.state.value}"
        await view.show_sub_run(sub_run_widgets(items, self.conversation.workspace), note)

    @work(exit_on_error=False, group="open")
    async def _find_child(self, run_id: str, tool_call_id: str) -> None:
        for call in await self.runtime.tool_calls(run_id):
            if call.id == tool_call_id and call.child_run_id:
                self.open_run(call.child_run_id)
                return
        # While the delegation runs the link is on the child (``parent_tool_call_id``).
        run = await self.runtime.get_run(run_id)
        for child in await self.runtime.job_runs(run.job_id):
            if child.parent_run_id == run_id and child.parent_tool_call_id == tool_call_id:
                self.open_run(child.id)
                return
        self.notify("This tool call has not started a sub-run yet.", severity="warning")

    # --- runtime events (from the bridge) ------------------------------------------------------
    def wants_live(self, run_id: str) -> bool:
        """Whether the bridge should post ``run_id``'s deltas and tool progress: only for the
        run shown or being opened (keys first: other runs send their durable events only)."""
        return run_id == self._loading_run_id or run_id == self.conversation.run_id

    def _on_screen(self, run_id: str) -> bool:
        return self.conversation.run_id == run_id and self._loading_run_id is None

    async def _apply_to_conversation(self, message: TextualMessage) -> None:
        if not self.is_attached:
            return  # the app is closing (see on_run_loaded)
        from tui import bridge  # the runtime's events: imported with the runtime, after start

        conversation = self.conversation
        if isinstance(message, bridge.DeltaReceived):
            await conversation.delta(
                message.message_id, message.offset, message.text, thinking=message.thinking
            )
        elif isinstance(message, bridge.MessageCommitted):
            await conversation.committed(message.event.message)
        elif isinstance(message, bridge.ToolStateChanged):
            event = message.event
            self.status.tool_state(event.run_id, event.tool_call_id, event.name, event.to_state)
            await conversation.tool_state(
                event.tool_call_id,
                event.name,
                event.to_state,
                arguments=event.arguments,
                result=event.result,
                error=event.error,
            )
        elif isinstance(message, bridge.RunNotedReceived):
            await conversation.noted(message.event)
        elif isinstance(message, bridge.ToolProgressed):
            progress = message.event
            conversation.tool_progress(
                progress.tool_call_id, progress.progress, progress.total, progress.message
            )

    async def _route(self, run_id: str, message: TextualMessage) -> None:
        if self._loading_run_id == run_id:
            self._replay.append(message)
        elif self._on_screen(run_id):
            await self._apply_to_conversation(message)

    async def on_delta_received(self, message: bridge.DeltaReceived) -> None:
        self.status.streamed(message.run_id, len(message.text))  # drawn: ``_count_shown``
        await self._route(message.run_id, message)

    async def on_message_committed(self, message: bridge.MessageCommitted) -> None:
        event = message.event
        await self._route(event.run_id, message)
        if event.message.role is not Role.ASSISTANT:
            return
        # The step's message counts the step and its usage: the run's figures change. The run
        # on screen takes them before the step's tool calls are handled (its first tools read
        # "step 0/50 │ ~88 tok", the run as read before its message).
        if not (self._on_screen(event.run_id) and await self._refresh_run_now(event.run_id)):
            self.refresh_run(event.run_id)

    async def on_tool_state_changed(self, message: bridge.ToolStateChanged) -> None:
        await self._route(message.event.run_id, message)

    async def on_tool_progressed(self, message: bridge.ToolProgressed) -> None:
        await self._route(message.event.run_id, message)

    async def on_notes_loaded(self, message: NotesLoaded) -> None:
        if self.is_attached and self.conversation.run_id == message.run_id:
            await self.conversation.insert_notes(message.notes)

    async def on_run_noted_received(self, message: bridge.RunNotedReceived) -> None:
        event = message.event
        if event.note == "cut_short":
            self._cut_short_counted(event.run_id, str(event.data.get("message_id", "")))
        elif event.note == "compaction":
            # The summary call's usage is committed with the note: the run's and the job's
            # totals changed, and nothing else may come to say so (`/compact` after the run
            # ended; a trial saw the rows keep the old total until a restart).
            self.refresh_run(event.run_id)
        await self._route(event.run_id, message)

    @work(exit_on_error=False, group="cut-short")
    async def _cut_short_counted(self, run_id: str, message_id: str) -> None:
        """An answer of the run cut short was counted: its totals changed (a new-user trial
        read 0 tokens in both agent-tuis after cancelling, from one, a run the other executed:
        that usage is written after the cancel), and its partial answer may have grown by what
        its executing process saved last; the run on screen is read again then."""
        from runtime.transcript import partial_answer

        self.refresh_run(run_id)
        run = await self.runtime.get_run(run_id)
        if not run.state.is_terminal or self._loading_run_id is not None:
            return
        shown = self.conversation.shown_chars(run_id, message_id)
        if shown is None:
            return
        partial = await partial_answer(self.runtime.store, run)
        if partial is not None and partial.message_id == message_id and len(partial.text) > shown:
            self.open_run(run_id)

    def on_checkpoint_created(self, message: bridge.CheckpointCreated) -> None:
        self.refresh_run(message.event.run_id)

    def on_job_archived(self, message: bridge.JobArchived) -> None:
        """Archived here, with `agent-tui archive`, or in another agent-tui: the browser hides
        the job (what is on screen stays); brought back, it shows it again."""
        event = message.event
        if event.archived:
            self._leave_archived(event.job_id)
        else:
            # Back (brought back here or elsewhere): archived again elsewhere later, it is
            # not this session's archive, and u has nothing of it to undo.
            if event.job_id in self._archived_here:
                self._forget_archive(event.job_id)
                self.refresh_bindings()
            self.refresh_run(event.run_id)

    def _leave_archived(self, job_id: str) -> None:
        """The job's rows go; if it was on screen, a new job takes its place: a message typed
        next must not go into a job nobody sees any more (nor into the row below it). Archived
        elsewhere, that is said, and what the box holds stays there, for the new job."""
        node = self.job_tree.job_node(job_id)
        shown_job = self.selected_job
        if node is not None and isinstance(node.data, JobEntry):
            title = node.data.job.title
        elif shown_job is not None and shown_job.id == job_id:  # its row filtered out
            title = shown_job.title
        else:
            title = job_id[:8]
        self.job_tree.remove_job(job_id)
        self.query_one("#search-results", SearchResults).drop_job(job_id)  # search skips it
        shown = shown_job.id if shown_job is not None else None
        if job_id in (shown, self.composer.follow_up_job_id):
            here = job_id in self._archiving or job_id in self._archived_here
            # The keys stay where they are: after x in the browser, u there brings the job
            # back at once (given to the new job's box, a trial's u was typed into it).
            self.action_new_job(take_keys=False, carry=not here)
            if not here:
                typed = self.composer.input.text.strip()
                kept = " What you typed stays in the box, for a new job." if typed else ""
                command = self._command_line()
                notice = Notification(
                    terminal_safe_line(
                        f"{short(title, 40)} was archived elsewhere (another agent-tui, or"
                        f" `{command} archive`): `{command} unarchive {job_id[:8]}` brings it"
                        f" back.{kept}"
                    ),
                    title="Archived",
                )
                # Kept to expire if the job is deleted while it shows: `agent-tui delete`
                # takes an archived job only, so it often follows the archive at once.
                self._elsewhere_notices[job_id] = (title, notice)
                self.app.post_message(Notify(notice))
                self._watch_for_deleted()

    def _command_line(self) -> str:
        """``agent-tui`` as a command this screen suggests must be typed: with ``--db`` when
        this database is not the one it opens by default."""
        from tui._cli.settings import command_line

        return command_line(self.runtime.store.location)

    def on_notice_received(self, message: bridge.NoticeReceived) -> None:
        event = message.event
        severity = NOTICE_SEVERITIES[event.level]
        self.notify(terminal_safe(event.text), severity=severity, markup=False)

    def on_history_repair_received(self, message: bridge.HistoryRepairReceived) -> None:
        from runtime.events import repair_text

        event = message.event
        repaired = frozenset(note.tool_call_id or note.tool_use_id for note in event.repairs)
        if (event.job_id, repaired) in self._repairs_told:
            return
        self._repairs_told.add((event.job_id, repaired))
        self.notify(terminal_safe(repair_text(event)), markup=False)

    async def on_run_state_changed(self, message: bridge.RunStateChanged) -> None:
        event = message.event
        await self._drop_question_about(event.run_id)
        if event.to_state is RunState.RUNNING and event.created_at:
            self.status.started_running(event.run_id, event.created_at)
        ended_on_screen = event.to_state.is_terminal and self._on_screen(event.run_id)
        if ended_on_screen and event.to_state is RunState.CANCELLED:
            self._tell_cancelled_elsewhere(event.run_id, event.reason)
        if ended_on_screen and event.to_state is not RunState.COMPLETED:
            from runtime.transcript import partial_label

            await self.conversation.run_stopped(partial_label(event.to_state))
        # The run on screen takes its state from the store here, and the prompt with it
        # (``on_run_refreshed``): through the worker the state came first, and a run answered
        # from another process that asked again read "input required" over the message box
        # until the event of its next request arrived (up to two seconds, in a trial).
        refreshed = self._on_screen(event.run_id) and await self._refresh_run_now(event.run_id)
        if not refreshed:
            self.refresh_run(event.run_id)
        if event.to_state.is_terminal:
            self._interrupted_runs.discard(event.run_id)
            self._stopping.discard(event.run_id)
            if self.composer.queued(event.job_id):
                self._after_run_ended(event.job_id, event.run_id, event.to_state)
        on_screen = self._on_screen(event.run_id)
        if event.to_state is RunState.INPUT_REQUIRED and event.request is not None:
            if on_screen:
                if not refreshed:  # else docked as the store has it (not when answered since)
                    await self.show_prompt(event.request)
                if not self.agent_app.terminal_focused:
                    self._tell_waiting(event.request, None)
            elif self.conversation.run_id is not None and event.job_id == (
                self.selected_job.id if self.selected_job else None
            ):
                self._route_request(event.request, self.conversation.run_id)
            else:
                self._tell_waiting(event.request, None)
        elif (
            not refreshed
            and self.open_request is not None
            and self.open_request.run_id == event.run_id
        ):
            self._tell_unsent_answer(self.open_request, event.to_state)
            await self.hide_prompt()

    def _tell_cancelled_elsewhere(self, run_id: str, reason: str | None) -> None:
        """The run on screen was cancelled by someone else (`agent-tui cancel`, another
        agent-tui): say so, and why; a new-user trial saw it stop without a word."""
        shown = self.selected_run
        if run_id in self._interrupted_runs or run_id in self._cancelled_here:
            return
        if shown is None or shown.id != run_id or shown.parent_run_id is not None:
            return  # a sub-run goes with its parent: its parent's screen says why
        why = f" ({reason})" if reason else ""
        self.notify(
            terminal_safe_line(f"The run was cancelled elsewhere{why}."),
            title="Cancelled",
            severity="warning",
            markup=False,
        )

    def _tell_unsent_answer(self, request: InputRequest, now: RunState) -> None:
        """The question on screen went (answered with `agent-tui respond`, in another
        agent-tui, or its run cancelled) while an answer was being typed to it here: say so,
        with the words, which would otherwise vanish with the prompt unsaid."""
        from tui.widgets.question_prompt import QuestionPrompt

        if request.id in self._answered_here:
            return
        typed = " ".join(
            prompt.answer_text for prompt in self.query(QuestionPrompt) if prompt.is_attached
        ).strip()
        if not typed:
            return
        went = (
            "The question was answered elsewhere"
            if not now.is_terminal  # queued, or read further on: running, asking again
            else f"The run was {now.value.replace('_', ' ')} before you answered"
        )
        self.notify(
            terminal_safe_line(f"{went}; your answer was not sent: {short(typed, 120)}"),
            title="Not sent",
            severity="warning",
            timeout=20,
            markup=False,
        )

    def _tell_waiting(self, request: InputRequest, asker: Run | None) -> None:
        """Ring the bell and say a run waits, with the key that reaches it from here."""
        # Any text field, the composer's box among them (a TextArea, not an Input: a trial
        # read "press i" while i was a letter in the box).
        key = f"{self._way_out()}, then i" if self.typing() else "i"
        who = f"{asker.agent}: " if asker is not None and asker.parent_run_id else ""
        mode = self.runtime.config.defaults.notify
        attention.alert(self.app, mode, "agent-tui: a run waits", who + request.prompt)
        self.notify(
            terminal_safe_line(f"{who}{short(request.prompt, 60)} — press {key} for the inbox"),
            title="A run is waiting for you",
            severity="warning",
            markup=False,
        )

    @work(exit_on_error=False, group="route")
    async def _route_request(self, request: InputRequest, shown_run_id: str) -> None:
        asker = await self.runtime.get_run(request.run_id)
        inline = await self._is_descendant(asker, shown_run_id)
        self.post_message(
            RequestRouted(request, asker, shown_run_id=shown_run_id if inline else None)
        )

    async def on_request_routed(self, message: RequestRouted) -> None:
        shown = message.shown_run_id
        if shown is not None and self._on_screen(shown) and self.open_request is None:
            await self.show_prompt(message.request, asker=message.asker)
            if not self.agent_app.terminal_focused:
                self._tell_waiting(message.request, message.asker)
        elif self.open_request is None or self.open_request.id != message.request.id:
            self._tell_waiting(message.request, message.asker)

    @work(exit_on_error=False, group="refresh")
    async def refresh_run(self, run_id: str) -> None:
        self.post_message(await self._refreshed(run_id))

    async def _run_and_job(self, run_id: str) -> tuple[Run, Job]:
        run = await self.runtime.get_run(run_id)
        return run, await self.runtime.get_job(run.job_id)

    async def _refreshed(self, run_id: str) -> RunRefreshed:
        """The run and its job as the store has them now; for the run on screen waiting for
        input, with the request it waits on (read after the run: its prompt comes with it)."""
        run, job = await self._run_and_job(run_id)
        request = None
        selected = self.selected_run
        if run.state is RunState.INPUT_REQUIRED and selected is not None and selected.id == run_id:
            request = await self.runtime.open_request(run_id)
        return RunRefreshed(run, job, request)

    async def _refresh_run_now(self, run_id: str) -> bool:
        """The run on screen ended: its row, status line and keys take its final state here,
        so the frame that shows its last words shows them too. Through ``refresh_run`` (a
        worker posting ``RunRefreshed``) they came a frame later, and Textual's frame clock,
        after a long frame (the last piece of a fast answer), waits one or two ticks more:
        the end of a streamed answer took three frames, 60 ms apart. False when the rows
        could not be read (then the worker tries)."""
        try:
            refreshed = await self._refreshed(run_id)
        except AgentTuiError:
            return False
        if self.is_attached:
            await self.on_run_refreshed(refreshed)
        return True

    async def on_run_refreshed(self, message: RunRefreshed) -> None:
        run = message.run
        if self._recovery_runs:
            # Resumed or cancelled elsewhere too (another agent-tui, the command line).
            if run.retry_of_run_id:
                self._resumed(run.retry_of_run_id)
            if not needs_resume(run):
                self._resumed(run.id)
        shown_run, shown_job = self.job_tree.shown_rows(run)
        if shown_run is not None and shown_run.revision > run.revision:
            return  # read before a change that is shown already (a refresh that came late)
        if (shown_run, shown_job) == (run, message.job) and (
            self.selected_run is None or self.selected_run.id != run.id or self.selected_run == run
        ):
            return  # nothing new: not even a frame (a checkpoint's refresh after the run ended)
        if run.id == self._loading_run_id and self.job_tree.job_node(run.job_id) is None:
            return  # a new job's rows come with its run on screen, in that frame
        if message.job.archived:
            self.job_tree.remove_job(run.job_id)  # read after it was archived elsewhere
        else:
            if self.job_tree.job_node(run.job_id) is not None or self.state_filter is None:
                self.job_tree.upsert_job(message.job)
            self.job_tree.upsert_run(run)
        if self.selected_run is not None and self.selected_run.id == run.id:
            if not await self._prompt_as_stored(run, message.request):
                return  # answered since it was read: the answer's change follows
            self.selected_run = run
            self.selected_job = message.job
            self._show_run_state(run)
        elif self._follows_on_screen(run):
            # A follow-up of the job on screen sent from elsewhere (another agent-tui, the
            # CLI) is shown as one sent here is, instead of only in the browser.
            self.open_run(run.id)

    async def _prompt_as_stored(self, run: Run, request: InputRequest | None) -> bool:
        """The prompt of ``run``, the run on screen, as read with it: docked before its state
        says "input required" (never after: the keys typed meanwhile went into the message
        box), gone once it waits no more. False when the state must not be shown yet: it
        waits, but its request was answered before it could be read."""
        shown = self.open_request
        here = shown is not None and shown.run_id == run.id
        if run.state is not RunState.INPUT_REQUIRED:
            if shown is not None and here:
                self._tell_unsent_answer(shown, run.state)
                await self.hide_prompt()
            return True
        if request is None:
            return here
        if shown is not None and here and shown.id != request.id:
            self._tell_unsent_answer(shown, run.state)  # answered, and it asks again
        await self.show_prompt(request)
        return True

    def _follows_on_screen(self, run: Run) -> bool:
        """Whether ``run`` is a newer root run of the job on screen, whose shown run has ended
        and waits for nobody (then the person is not in the middle of something there)."""
        shown = self.selected_run
        return (
            shown is not None
            and run.parent_run_id is None
            and run.job_id == shown.job_id
            and run.id != self._loading_run_id
            and run.created_at > shown.created_at
            and shown.state.is_terminal
            and self.open_request is None
        )

    # --- composer, prompts ---------------------------------------------------------------------
    def _target_composer(self, job: Job) -> None:
        """The composer addresses the job on screen; its saved draft comes back. What was typed
        for another job stays that job's draft, but for a run this screen just started (a new
        job's task, a fork): what is typed after Enter goes on to it; and for the job opened
        at launch, what was typed before it opened (``typed_ahead_for_job``: a trial's "yes
        please" went to it as "se", "yes plea" left as the new job's draft)."""
        composer = self.composer
        changed = composer.follow_up_job_id != job.id
        started, self._started_job_id = self._started_job_id == job.id, None
        if self._starting_job is not None and self._starting_job.job_id is not None:
            self._starting_job = None  # the box addresses a job now: what is sent goes there
        if composer.typed_ahead_for_job and changed:
            composer.carry_to(job.id, job.title)  # the job's own saved draft goes under it
            return
        composer.target(job.id, job.title, carry=started)
        if changed:
            self._load_draft(job.id)

    @on(Composer.Submitted)
    def _composer_submitted(self, message: Composer.Submitted) -> None:
        message.stop()
        self.call_after_refresh(self._take_prompt)
        from tui.file_index import with_attachments

        text = with_attachments(message.text, self.agent_app.settings.workspace)
        job_id = message.follow_up_job_id
        if message.after_command:
            # Sent before a command sent ahead of it had run (``/new``, Enter, the task,
            # Enter in one burst): it goes where that command left the box addressed.
            job_id = self.composer.follow_up_job_id
        if job_id is None and self._starting_job is not None:
            # Once the new job exists, what is sent is its follow-up, also before its run is on
            # screen (which points the box at it): a trial's message sent right after the
            # task's Enter started a second job. (None: it does not exist yet, and holds it.)
            job_id = self._starting_job.job_id
        if job_id is None and self._hold_for_new_job(text):
            return
        manager = self.runtime.mcp
        if manager is not None and "@" in text:
            from tui.mcp_resources import mentioned_resources, server_names

            if mentioned_resources(text, server_names(manager)):
                self._attach_resources(manager, message.text, text, job_id)
                return
        self.composer.message_taken()
        self._submit(text, job_id)

    def _hold_for_new_job(self, text: str) -> bool:
        """A message sent to a new job while the last one sent is still being started goes to
        that job, queued: not to a second new job, nor to the job the box addressed before
        ``/new TASK`` (a trial's message sent half a second after ``/new`` became a follow-up
        of the old job). Whether it was held; if not, a new job starts with it now."""
        if self._starting_job is None:
            return False
        # Out of the box since its Enter: what the box holds now was typed after it, and stays.
        self.composer.message_taken()
        self._starting_job.held.append(text)
        self.notify("The new job is still starting: your message is queued for it.", title="Queued")
        return True

    def _new_job_started(self, new: _NewJob, job_id: str | None) -> list[str]:
        """The new job exists (``job_id``), or could not be started (None): what was held
        for it goes to its queue, or is returned to go back to the box."""
        held, new.held, new.job_id = new.held, [], job_id
        if job_id is not None:
            for text in held:
                self.composer.enqueue(job_id, text)
            return []
        if self._starting_job is new:
            self._starting_job = None
        return held

    @work(exit_on_error=False, group="mcp-resources")
    async def _attach_resources(
        self, manager: McpManager, typed: str, text: str, follow_up_job_id: str | None
    ) -> None:
        """``@server:uri`` mentions: the resources' content goes with the message; a resource
        that cannot be read says so, and what was typed comes back to the composer."""
        from tui.mcp_resources import server_names, with_resources

        try:
            text = await with_resources(manager, text, server_names(manager))
        except AgentTuiError as error:
            self.notify(str(error), title="@ resource", severity="error")
            if not self.composer.input.text:
                self.composer.input.text = typed
            return
        self.composer.message_taken()
        self._submit(text, follow_up_job_id)

    def _submit(self, text: str, follow_up_job_id: str | None, *, title: str | None = None) -> None:
        """Send ``text`` as a follow-up in ``follow_up_job_id``, or as a new job's task (None:
        what is sent to a new job from now on goes to that job, held until it exists, see
        ``_hold_for_new_job``). ``title``: a new job's, when not the text's first line (a
        command's: what the person typed, not what it expands to)."""
        new = None
        if follow_up_job_id is None:
            self._starting_job = new = _NewJob()
        self._send(text, follow_up_job_id, title=title, new=new)

    @work(exit_on_error=False, group="start")
    async def _send(
        self, text: str, follow_up_job_id: str | None, *, title: str | None, new: _NewJob | None
    ) -> None:
        try:
            await self._send_or_refuse(text, follow_up_job_id, title=title, new=new)
        finally:
            if new is not None and new.job_id is None:
                # Neither started nor refused (an error of another kind, reported by the
                # worker's handler): what was held comes back to the box, not held forever.
                held = self._new_job_started(new, None)
                if held and not self.composer.input.text:
                    self.composer.input.value = "\n\n".join(held)

    async def _send_or_refuse(
        self,
        text: str,
        follow_up_job_id: str | None,
        *,
        title: str | None,
        new: _NewJob | None,
    ) -> None:
        """``new``: the new job being started, when ``follow_up_job_id`` is None."""
        composer = self.composer
        settings = self.agent_app.settings
        try:
            if follow_up_job_id is None:
                choices = composer.take_next_run(None)
                run = await self.runtime.start(
                    text,
                    model=choices.get("model"),
                    agent=choices.get("agent") or settings.agent,
                    detached=settings.attach,  # --attach: a worker executes it
                    title=title,
                )
            else:
                working = await self._working_root_run(follow_up_job_id)
                if working is not None and needs_resume(working):
                    # Queued, it would wait for a run that waits for the person: forever. The
                    # screen asks whether to cancel that run and send this as the next turn.
                    refusal = RunStateConflict(
                        "This job's run was interrupted (a quit or a crash) and waits to be "
                        "resumed: Esc, then R resumes it (c cancels it). Your message is in "
                        "the box."
                    )
                    self.post_message(
                        MessageRefused(follow_up_job_id, text, refusal, interrupted_run=working)
                    )
                    return
                if working is not None:
                    self.post_message(MessageQueued(follow_up_job_id, text))
                    return
                choices = composer.next_run.get(follow_up_job_id, {})
                run = await self.runtime.follow_up(
                    follow_up_job_id,
                    text,
                    model=choices.get("model"),
                    agent=choices.get("agent"),
                )
                composer.take_next_run(follow_up_job_id)
        except RunStateConflict:
            # The job's run started working between the check and the follow-up: wait for it.
            assert follow_up_job_id is not None
            self.post_message(MessageQueued(follow_up_job_id, text))
            return
        except AgentTuiError as error:
            held = self._new_job_started(new, None) if new is not None else []
            self.post_message(MessageRefused(follow_up_job_id, "\n\n".join([text, *held]), error))
            return
        if new is not None:
            self._new_job_started(new, run.job_id)
            if self.composer.queued(run.job_id):
                # Queued after its run may have ended already (an instant model): the end
                # seen by the screen before the queue filled would have sent nothing.
                now = await self.runtime.get_run(run.id)
                if now.state.is_terminal:
                    self._after_run_ended(run.job_id, run.id, now.state)
        self._loading_run_id = run.id
        job = await self.runtime.get_job(run.job_id)
        self.post_message(RunStarted(run, job))

    async def _working_root_run(self, job_id: str) -> Run | None:
        """The job's root run that has not ended (one at most), if any."""
        runs = await self.runtime.job_runs(job_id)
        return next((r for r in runs if r.parent_run_id is None and not r.state.is_terminal), None)

    def on_message_queued(self, message: MessageQueued) -> None:
        self.composer.enqueue(message.job_id, message.text)

    async def on_message_refused(self, message: MessageRefused) -> None:
        """The runtime refused the message (a bad model, say): it comes back to the box. To a
        job whose run a quit or a crash interrupted, the screen asks whether to cancel that run
        and send the message as the next turn (as one types on after an interrupted turn in
        other agents' terminals; a trial found only a refusal)."""
        composer = self.composer
        if composer.follow_up_job_id == message.job_id and not composer.input.text:
            composer.input.value = message.text
        run = message.interrupted_run
        if run is None or message.job_id is None or composer.follow_up_job_id != message.job_id:
            self.notify(
                self.agent_app.error_text(message.error),
                title="Not sent",
                severity="error",
                markup=False,
            )
            return
        from tui.widgets.confirm_bar import ConfirmBar

        job_id = message.job_id
        bar = ConfirmBar(
            f"This job's run {run.id[:8]} was interrupted (a quit or a crash). Cancel it and send"
            " your message as the next turn? (R in the browser resumes it instead)",
            lambda: self._send_over_interrupted(job_id, run.id),
            returning_to=composer.input,
            declined="Not sent: your message is in the box. Esc, then R resumes the run.",
            about_run=run.id,
            settle_seconds=self.agent_app.settings.prompt_settle_seconds,
        )
        await self._ask(bar)

    def _send_over_interrupted(self, job_id: str, run_id: str) -> None:
        composer = self.composer
        text = composer.input.text
        if composer.follow_up_job_id != job_id or not text.strip():
            return
        composer.clear_text()
        composer.message_taken()
        self._supersede(job_id, run_id, text)

    @work(exit_on_error=False, group="start")
    async def _supersede(self, job_id: str, run_id: str, text: str) -> None:
        run = await self.runtime.get_run(run_id)
        if not needs_resume(run):
            # Resumed (or ended) elsewhere since the question was asked: a trial's "y" here
            # cancelled the retry another agent-tui had just started. The message follows it.
            self.notify(
                f"The run {run_id[:8]} was {run.state.value.replace('_', ' ')} elsewhere"
                " meanwhile: nothing cancelled, your message goes after it.",
                title="Not cancelled",
            )
            self._submit(text, job_id)
            return
        self._cancelled_here.add(run_id)
        try:
            await self.runtime.cancel(run_id, reason="superseded by a new message")
        except RunStateConflict:
            pass  # it ended, or was resumed elsewhere meanwhile: the message follows it
        except AgentTuiError as error:
            self.post_message(MessageRefused(job_id, text, error))
            return
        self._submit(text, job_id)

    @work(exit_on_error=False, group="queue")
    async def _after_run_ended(self, job_id: str, run_id: str, state: RunState) -> None:
        """What was queued for the job goes as its next run once a run completes; when the
        job's run is cancelled or fails instead, it comes back to the box, unsent (a trial's
        Esc, c, y cancelled the run and the queued message started a run of its own at once:
        cancelling stops the work)."""
        if state is RunState.COMPLETED:
            self._flush_queue(job_id)
            return
        run = await self.runtime.get_run(run_id)
        if run.parent_run_id is not None or await self._working_root_run(job_id) is not None:
            return  # a sub-run ended, or another run of the job works: its end decides
        await self._queue_back(
            job_id, "the run failed" if state is RunState.FAILED else f"the run was {state.value}"
        )

    async def _queue_back(self, job_id: str, why: str) -> None:
        """The messages queued for ``job_id`` back in its box, unsent: in the box when it
        addresses the job, else in the job's draft (saved before the queue is emptied, so no
        moment holds them nowhere)."""
        composer = self.composer
        texts = composer.queued(job_id)
        if not texts:
            return
        if composer.follow_up_job_id == job_id:
            self._into_box(composer.take_queue(job_id))
            self.notify(f"{why.capitalize()}: your queued message is back in the box, unsent.")
            return
        store, writer = self.runtime.store, self.runtime.owner_id
        drafts = await store.get_composer_drafts(job_id)
        own = next((draft.text for draft in drafts if draft.writer == writer), "")
        kept = "\n\n".join([*texts, own] if own.strip() else texts)
        await store.save_composer_draft(job_id, kept, writer=writer)
        composer.take_queue(job_id)
        job = await self.runtime.get_job(job_id)
        self.notify(
            terminal_safe_line(
                f"{short(job.title, 40)}: {why}; your queued message is kept unsent as the"
                " job's draft."
            ),
            markup=False,
        )

    def _into_box(self, texts: list[str]) -> None:
        """Queued messages taken back into the box, before what it holds."""
        if not texts:
            return
        existing = self.composer.input.text
        self.composer.input.value = "\n\n".join([*texts, existing] if existing else texts)
        self.composer.mark_put_back()

    def _flush_queue(self, job_id: str) -> None:
        if self.composer.queued(job_id) and job_id not in self._sending_queue:
            self._sending_queue.add(job_id)
            self._send_queue(job_id)

    @work(exit_on_error=False, group="queue")
    async def _send_queue(self, job_id: str) -> None:
        try:
            if await self._working_root_run(job_id) is not None:
                return
            texts = self.composer.take_queue(job_id)
            if not texts:
                return
            text = "\n\n".join(texts)
            choices = self.composer.take_next_run(job_id)
            try:
                run = await self.runtime.follow_up(
                    job_id, text, model=choices.get("model"), agent=choices.get("agent")
                )
            except RunStateConflict:
                for queued in texts:
                    self.post_message(MessageQueued(job_id, queued))
                return
            job = await self.runtime.get_job(job_id)
            if self.selected_job is not None and self.selected_job.id == job_id:
                self._loading_run_id = run.id
                self.post_message(RunStarted(run, job))
            else:
                self.notify(f"Sent your queued message to {short(job.title, 40)}.")
        finally:
            self._sending_queue.discard(job_id)

    @on(Composer.CommandSubmitted)
    def _command_submitted(self, message: Composer.CommandSubmitted) -> None:
        message.stop()
        self.call_after_refresh(self._take_prompt)
        self.run_command(message.name, message.argument, typed=message.typed)

    @property
    def extension_commands(self) -> ExtensionCommands:
        """Skills and custom commands of the workspace as slash commands."""
        found = getattr(self, "_extension_commands", None)
        if found is None:
            # Imported here: skills bring the tool catalog, which the first frame does not need.
            from tui.extension_commands import ExtensionCommands

            found = self._extension_commands = ExtensionCommands(self.agent_app.settings.workspace)
        return found

    def run_command(self, name: str, argument: str, *, typed: str) -> None:
        """A slash command typed in the composer (``typed``, as it was typed: taken out of
        the box at Enter, and given back if the command fails); an unknown one changes
        nothing. What was typed after its Enter stays in the box, whatever the command does."""
        composer = self.composer
        known = {command.name for command in SLASH_COMMANDS}
        if name not in known:
            # Which of them /name runs is runtime.commands' rule, as in `run` and the reports.
            expanded = self.extension_commands.expand(name, argument)
            if expanded is not None:
                # A skill or a custom command: what it expands to is the message.
                composer.command_done(typed)
                # The job is titled as typed ("/explain main.py"), not by the expansion's
                # first line ("# Skill: explain␊…": a new-user trial).
                title = f"/{name} {argument}".strip()
                self._submit(expanded, composer.follow_up_job_id, title=title)
                return
        manager = self.runtime.mcp
        if ":" in name and manager is not None:
            # Only after the custom commands (runtime.commands' order): `git/commit.md` is
            # /git:commit whether or not an MCP server is configured.
            follow_up_job_id = composer.follow_up_job_id
            self._send_prompt(manager, name, argument, follow_up_job_id, typed=typed)
            return
        if self._refused(name, argument, typed):
            return
        keep = False
        if name == "help":
            self.agent_app.action_help()
        elif name == "new":
            composer.command_done(typed)
            self._new_from_command(argument)
            return
        elif name in ("model", "agent"):
            keep = not self._choose_next(name, argument)
        elif name == "retry":
            self.action_retry()
        elif name == "fork":
            self.action_fork(argument or None)
        elif name == "export":
            # The job the box addresses, as /compact and /context take it: "this job".
            job_id = composer.follow_up_job_id
            if job_id is None:
                self.notify("Open a job first: /export writes it as Markdown.", title="/export")
                keep = True
            else:
                self._export(job_id)
        elif name == "theme":
            keep = not self._choose_theme(argument)
        elif name == "permissions":
            self.agent_app.action_permissions()
        elif name == "inbox":
            self.action_inbox()
        elif name == "compact":
            keep = not self.compact_job()
        elif name == "rewind":
            keep = not self.rewind_files(argument)
        elif name == "context":
            self.action_context()
        elif name == "quit":
            composer.command_done(typed)
            self.app.call_later(self.agent_app.action_quit)
            return
        composer.command_done(typed, keep_text=keep)

    def _refused(self, name: str, argument: str, typed: str) -> bool:
        """An unknown command, or one given an argument it does not take, is refused under the
        box (a toast at the top right went unread), ``typed`` given back to be corrected."""
        command = next((known for known in SLASH_COMMANDS if known.name == name), None)
        if command is None:
            # With the very text that sends it as a message.
            shown = short(" ".join(typed.split()), 40)
            said = (
                f"/{terminal_safe_line(short(name, 24))} is not a command."
                f" To send it as a message: /{terminal_safe_line(shown)} · /help lists commands"
            )
        elif argument and not command.argument and name != "help":
            # `/export notes.md`, `/retry --rerun`, `/quit now` ran as if bare, the words
            # dropped unsaid: the file was not named so, the call not run again (a new-user
            # trial). /help opens whatever follows it.
            said = (
                f"/{name} takes no argument ({terminal_safe_line(short(argument, 24))}):"
                f" /{name} alone does it — {command.help}"
            )
        elif name == "rewind" and argument not in ("", "start"):
            said = (
                f"/rewind takes start or nothing ({terminal_safe_line(short(argument, 24))}):"
                " /rewind start goes to the job's start; /rewind alone to the checkpoint under"
                " the cursor (else the start)"
            )
        else:
            return False
        self.composer.command_done(typed, keep_text=True)
        self.composer.show_error(said)
        return True

    def _new_from_command(self, task: str) -> None:
        """``/new [TASK]``; what was typed after its Enter (in the box now) goes to the new job,
        and so does a ``/model`` or ``/agent`` chosen for the job left and not used yet (a
        trial typed ``/agent coordinator``, then ``/new survey``, and got the default agent)."""
        self._choices_to_new_job()
        if not task:
            self.action_new_job(carry=True)
            return
        # Straight to a new job: its run on screen addresses the composer to it, with no empty
        # new-job screen in between. The box addresses the new job from now on: what is sent
        # before it exists is held for it (``_hold_for_new_job``), not sent to the job on screen.
        composer = self.composer
        if composer.input.text:
            composer.carry_to(None)
        else:
            composer.target(None)
        # ``//`` at its start escapes a slash as in the box (a trial's ``/new //stream 20`` sent
        # both slashes; ``/new /stream 20`` sent one).
        self._submit(task[1:] if task.startswith("//") else task, None)

    def _choices_to_new_job(self) -> None:
        composer = self.composer
        left = composer.follow_up_job_id
        if left is None or not composer.next_run.get(left):
            return
        moved = composer.take_next_run(left)
        for key, value in moved.items():
            composer.next_run.setdefault(None, {}).setdefault(key, value)
        chosen = " and ".join(f"{key} {value}" for key, value in moved.items())
        self.notify(f"The new job's first run uses {chosen}.", title="/new")

    def action_compact(self) -> None:
        self.compact_job()

    def compact_job(self) -> bool:
        """``/compact`` (and the palette's "Compact"): the job the box addresses, summarised.
        False when it addresses none (said)."""
        job_id = self.composer.follow_up_job_id
        if job_id is None:
            self.notify("Open a job first: /compact summarises its history.", title="/compact")
            return False
        self._compact(job_id)
        return True

    def action_rewind(self) -> None:
        self.rewind_files("")

    def rewind_files(self, argument: str) -> bool:
        """``/rewind [start]``: put back the files the agent of the job the box addresses
        wrote, as they were at the checkpoint under the browser's cursor (a step of that job),
        else at the job's start, before its first step (no checkpoint marks it: a trial's
        /rewind right after the first answer had nothing earlier to go to). Asks first,
        saying which files; False when nothing is asked (said)."""
        job_id = self.composer.follow_up_job_id
        if job_id is None:
            self.notify("Open a job first: /rewind puts back its files.", title="/rewind")
            return False
        node = self.job_tree.cursor_node
        checkpoint: Checkpoint | None = None
        if (
            not argument
            and node is not None
            and isinstance(node.data, CheckpointEntry)
            and node.data.checkpoint.job_id == job_id
        ):
            checkpoint = node.data.checkpoint
        self.run_worker(
            self._ask_to_rewind(job_id, checkpoint), exit_on_error=False, group="confirm"
        )
        return True

    async def _ask_to_rewind(self, job_id: str, checkpoint: Checkpoint | None) -> None:
        from runtime.rewind import plan_rewind, plan_rewind_to_start
        from tui.widgets.confirm_bar import ConfirmBar

        if checkpoint is None:
            plan = await plan_rewind_to_start(self.runtime.store, job_id)
            where = "the job's start (before its first step)"
        else:
            plan = await plan_rewind(self.runtime.store, checkpoint.id)
            where = f"step {checkpoint.step} of run {checkpoint.run_id[:8]}"
        if not plan.changes:
            self.notify(
                f"Nothing to rewind: every file this job's agent wrote is as it was at {where}.",
                title="/rewind",
            )
            return
        listed = terminal_safe_line(", ".join(f"{c.path} ({c.action})" for c in plan.safe[:6]))
        more = f" and {len(plan.safe) - 6} more" if len(plan.safe) > 6 else ""
        outside = terminal_safe_line(", ".join(c.path for c in plan.changed_outside))
        kept = f" Left alone, changed since the job wrote them: {outside}." if outside else ""
        if not plan.safe:
            target = plan.checkpoint_id or f"--start {plan.job_id}"
            self.notify(
                f"Nothing rewound: {outside} changed since the job wrote them; `agent-tui rewind"
                f" {target} --files --force` overwrites them.",
                title="/rewind",
                markup=False,
            )
            return
        bar = ConfirmBar(
            f"Rewind the files to {where}? {listed}{more}.{kept}",
            lambda: self._rewind(plan),
            returning_to=self.focused,
            declined="No file was changed.",
        )
        await self._ask(bar)

    @work(exit_on_error=False, group="rewind")
    async def _rewind(self, plan: RewindPlan) -> None:
        from runtime.rewind import apply_rewind

        done = await asyncio.to_thread(apply_rewind, plan)
        skipped = [c.path for c in plan.changes if c not in done]
        said = "; ".join(f"{'removed' if c.target is None else 'restored'} {c.path}" for c in done)
        if skipped:
            said += f"; left alone: {', '.join(skipped)}"
        self.notify(terminal_safe(said or "No file was changed."), title="/rewind", markup=False)

    def action_context(self) -> None:
        """``/context`` (and the palette's "Context"): what is in effect, for the job the box
        addresses."""
        self._show_context(self.composer.follow_up_job_id)

    def type_command(self, name: str) -> None:
        """The palette's "Model" and "Agent": ``/name `` in the box, for the name to follow.
        Not over a message being typed (it would be lost), nor while the box is hidden."""
        composer = self.composer
        if not composer.display:
            self.notify("Answer the prompt first.", severity="warning")
            self._focus_pane(2)
            return
        if composer.input.text.strip():
            self.notify(
                f"The box holds a message: send or clear it, then type /{name} NAME.",
                title=f"/{name}",
                severity="warning",
            )
        else:
            composer.input.value = f"/{name} "
        composer.focus_input()

    @work(exit_on_error=False, group="compact")
    async def _compact(self, job_id: str) -> None:
        self.notify("Compacting the job's history…", title="/compact")
        try:
            note = await self.runtime.extensions.compact(job_id)
        except AgentTuiError as error:
            self.notify(str(error), title="Not compacted", severity="warning")
            return
        self.notify(terminal_safe(note.text), title="/compact", markup=False)
        if self.selected_run is not None and self.selected_run.id == note.run_id:
            await self.conversation.noted(note)

    @work(exit_on_error=False, group="context", exclusive=True)
    async def _show_context(self, job_id: str | None) -> None:
        from runtime.engine.context_usage import usage_lines
        from runtime.engine.extensions import report_lines

        lines: list[str] = []
        if job_id is not None:
            # What the job's context holds, part by part (a trial looked for it here).
            try:
                lines += [*usage_lines(await self.runtime.context_usage(job_id)), ""]
            except AgentTuiError as error:
                lines += [f"Context of this job: {error}", ""]
        report = self.runtime.extensions.report(self.agent_app.settings.workspace)
        lines += report_lines(report)
        # And what a trial looked for here in vain: the MCP servers and the agents.
        manager = self.runtime.mcp
        states = manager.status() if manager is not None else {}
        lines.append("MCP servers:")
        lines += [f"  {name}: {state}" for name, state in states.items()] or ["  none"]
        agents = self.runtime.config.agents
        lines.append("Agents:")
        lines.append("  default (built in)")
        lines += [
            f"  {name}: {agent.model or 'the default model'}" for name, agent in agents.items()
        ]
        # A report to read, not a notice: over the conversation until Esc, scrollable (as a
        # toast it stayed half a minute over the conversation, and toasts piled up).
        from tui.screens.report import ReportScreen

        self.app.push_screen(ReportScreen("In effect here (/context)", lines))

    def _choose_next(self, key: str, value: str) -> bool:
        composer = self.composer
        current = composer.next_run.get(composer.follow_up_job_id, {}).get(key)
        if not value:
            shown = current or (
                self.selected_run.model if key == "model" and self.selected_run else None
            )
            if key == "model":
                self._pick_model(shown)
                return True
            self.notify(f"Usage: /agent NAME. Now: {shown or 'the default'}.", title=f"/{key}")
            return False
        if key == "model":
            try:
                self.runtime.check_model(value)
            except AgentTuiError as error:
                # Said now, not at the next send: found by a new-user trial, "/model
                # gpt-nonsense" was taken, and the message sent next was refused.
                self.notify(str(error), title="/model", severity="error")
                return False
        if key == "agent":
            try:
                self.runtime.check_agent(value)  # the one unknown-agent check (reads again)
            except InvalidInput as error:
                self.notify(str(error), severity="error")
                return False
        composer.choose_next(key, value)
        if key == "model":
            from runtime.providers.registry import preload_provider_soon

            preload_provider_soon(value)  # its SDK, before the next run needs it
        where = "this job" if composer.follow_up_job_id else "the new job"
        self.notify(f"The next run in {where} uses {key} {value}.", title=f"/{key}")
        self.status.next_run = dict(composer.next_run.get(composer.follow_up_job_id, {}))
        self.status.redraw()
        return True

    def _model_choices(self, shown: str | None) -> dict[str, str]:
        """The models a bare /model offers, each with why: the one in effect, the default,
        the agents' own, the demo, and Claude's default when a key is set. (Any other
        reference is typed: /model openai:llama3.1.)"""
        from runtime.providers.registry import DEFAULT_CLAUDE_MODEL

        default = self.runtime.default_model
        choices: dict[str, list[str]] = {}

        def offer(reference: str | None, why: str) -> None:
            if reference:
                choices.setdefault(reference, []).append(why)

        offer(shown or default, "in effect")
        offer(default, "the default")
        for name, agent in self.runtime.config.agents.items():
            offer(agent.model, f"agent {name}'s")
        if os.environ.get("ANTHROPIC_API_KEY", "").strip():
            offer(f"anthropic:{DEFAULT_CLAUDE_MODEL}", "Claude")
        offer("demo", "offline demo")
        offer("demo:instant", "offline demo, no pacing")
        return {reference: ", ".join(reasons) for reference, reasons in choices.items()}

    def _pick_model(self, shown: str | None) -> None:
        """A bare /model: a list to choose the next run's model from, as Claude Code offers,
        instead of only its usage."""
        from textual.command import SimpleCommand

        commands = [
            SimpleCommand(reference, partial(self._choose_next, "model", reference), why)
            for reference, why in self._model_choices(shown).items()
        ]
        self.app.search_commands(commands, placeholder="Model for the next run (or /model NAME)…")

    def _choose_theme(self, name: str) -> bool:
        app = self.app
        if not name:
            # Textual's theme list, with the theme in use first and marked.
            from textual.command import SimpleCommand

            def use(theme: str) -> None:
                app.theme = theme

            in_use_first = sorted(app.available_themes, key=lambda theme: theme != app.theme)
            commands = [
                SimpleCommand(theme, partial(use, theme), "in use" if theme == app.theme else None)
                for theme in in_use_first
            ]
            app.search_commands(commands, placeholder="Theme…")
            return True
        if name not in app.available_themes:
            names = ", ".join(sorted(app.available_themes))
            self.notify(f"No theme {name!r}; installed: {names}", severity="error")
            return False
        app.theme = name
        return True

    def on_run_started(self, message: RunStarted) -> None:
        # The browser's rows come with the run on screen (``_show_loaded_run``), in the same
        # frame: put in here, they were a layout of the whole screen of their own, a frame
        # before the one that opened the run. (Should the run fail to load, its next state
        # change puts them in: ``on_run_refreshed``.)
        self._started_job_id = message.job.id
        self.open_run(message.run.id)

    async def show_prompt(self, request: InputRequest, *, asker: Run | None = None) -> None:
        """Dock the prompt for ``request`` under the conversation; ``asker`` is the sub-run
        that asks when it is not the run on screen."""
        if not self.is_attached:
            return  # the app is closing (see on_run_loaded)
        origin = self.query_one("#prompt-origin", Static)
        if asker is not None:
            origin.update(f"↳ Asked by sub-run {asker.agent} — answering resumes it, then this run")
        origin.display = asker is not None
        if self.open_request is not None and self.open_request.id == request.id:
            return
        await self._remove_prompt()
        self.open_request = request
        self._prompt_asker = asker
        # The prompts' modules (and what they bring: json, forms) are not for the first frame.
        from tui.widgets.approval_prompt import ApprovalPrompt
        from tui.widgets.elicitation_form import ElicitationForm
        from tui.widgets.question_prompt import QuestionPrompt

        widget: Widget
        if request.kind is InputKind.APPROVAL:
            shown = await self._as_of_now(request)
            if self.open_request is not request:
                return  # another prompt (or none) took its place meanwhile
            job = self.selected_job
            elsewhere = (
                job.workspace
                if job is not None
                and job.id == request.job_id
                and self.job_tree.is_elsewhere(job.workspace)
                else None
            )
            widget = ApprovalPrompt(shown, elsewhere=elsewhere)
        elif request.kind is InputKind.QUESTION:
            draft = await self._answer_draft(request)
            if self.open_request is not request:
                return  # another prompt (or none) took its place meanwhile
            widget = QuestionPrompt(request, draft=draft)
            if draft:
                self.notify("The answer you had not sent is back in the field.", title="Draft")
        else:
            widget = ElicitationForm(request)
        composer = self.composer
        bottom = self.query_one("#bottom", Vertical)
        if not self._prompt_lines_mounted:
            # The lines around a prompt, mounted with the first one (not for the first frame).
            self._prompt_lines_mounted = True
            lines = [
                Static("", id=name, markup=False) for name in ("prompt-waits", "prompt-queued")
            ]
            for line in lines:
                line.display = False
            await bottom.mount(*lines, before=composer)
        if self.focused is composer.input and composer.input.text.strip() and not composer.put_back:
            # A message is being typed: the prompt waits, said in one line over the box, and
            # takes no key yet (it took the keys at once, and the letters typed next answered
            # it: a trial's "please also…" allowed a write for the whole run with its "a").
            # One line, not the prompt itself: on a short terminal the prompt pushed the box
            # off the screen. Text the app put back, untouched since (the message kept while
            # a question was answered), is not being typed: the prompt takes the keys (a
            # trial's "A" to allow went into that text instead).
            self._waiting_prompt = widget
            self._say_prompt_waits(request)
            return
        self._waiting_prompt = None  # a prompt that waited was replaced (focus had left the box)
        self._hide_prompt_line("prompt-waits")
        await self._dock(widget, request)

    async def _dock(self, widget: Widget, request: InputRequest, *, settle: bool = True) -> None:
        """The prompt in the bottom area instead of the composer, with the keys. Taking them
        from the message box (``settle``), it answers to them only once settled: keys typed as
        it came are text (``SettlingPrompt``)."""
        from tui.widgets.elicitation_form import ElicitationForm

        focused = self.focused
        typing = settle and self._pane_of(focused) not in (0, 1)
        self.composer.display = False
        self._sync_prompt_queue()
        if widget.is_attached:
            widget.display = True  # it waited for typing (``_key_before_settled``)
        else:
            await self.query_one("#bottom", Vertical).mount(widget)
        if isinstance(widget, ElicitationForm):
            return
        if isinstance(focused, SearchField) and focused.is_attached:
            # Typing a search: the prompt docks without the keys (they answered it: a trial's
            # "a" typed there allowed a write for the run); Tab reaches it.
            if isinstance(widget, SettlingPrompt):
                widget.start_settling(0)
            return
        widget.focus()
        if isinstance(widget, SettlingPrompt):
            widget.start_settling(self.agent_app.settings.prompt_settle_seconds if typing else 0)
        # Again once laid out: the hidden composer must not keep the focus. (Unless the
        # prompt went meanwhile, answered elsewhere: a removed widget would keep it.)
        self.call_after_refresh(self._focus_prompt, widget, request)

    def _focus_prompt(self, widget: Widget, request: InputRequest) -> None:
        if widget.is_attached and widget.display and self.open_request is request:
            widget.focus()

    def _say_prompt_waits(self, request: InputRequest) -> None:
        """The line over the box while the prompt waits for the message being typed."""
        waits = self._prompt_line("prompt-waits")
        assert waits is not None
        waits.update(PROMPT_WAITS_TEXT.format(asks=short(terminal_safe_line(request.prompt), 70)))
        waits.display = True

    @on(KeyBeforeSettled)
    def _key_before_settled(self, message: KeyBeforeSettled) -> None:
        """A key typed at a prompt too soon after it docked to answer it (typing begun as it
        came): the key goes into the message box, and the prompt waits over the box as it
        does for a message being typed (Enter sends it, then the prompt docks; Tab answers
        now)."""
        message.stop()
        from textual import events

        prompt = message.prompt
        request = self.open_request
        if (
            isinstance(prompt, SettlingPrompt)
            and prompt.is_attached
            and prompt.display
            and request is not None
            and self._waiting_prompt is None
        ):
            prompt.hold()
            prompt.display = False
            self._waiting_prompt = prompt
            self._say_prompt_waits(request)
            self.composer.display = True
            self._sync_prompt_queue()
            self.set_focus(self.composer.input)  # now: the keys typed next go to the box
        # Posted to the box, behind what it was already sent: in the order typed.
        if message.pasted is not None:
            self.composer.input.post_message(events.Paste(message.pasted))
        else:
            self.composer.input.post_message(events.Key(message.key, message.character))

    @on(Composer.EmptyEnter)
    def _empty_enter(self, message: Composer.EmptyEnter) -> None:
        """Enter in the empty box while a prompt waits over it (the stray key that held it
        rubbed out): the prompt docks, with the keys (it stayed hidden, and only Tab, which
        nothing on screen pointed to once the box was empty, brought it back)."""
        message.stop()
        if self._waiting_prompt is not None:
            self.run_worker(self._take_prompt(settle=False), exit_on_error=False, group="prompt")

    def _prompt_line(self, name: str) -> Static | None:
        found = self.query(f"#bottom > #{name}")
        return found.first(Static) if found else None

    def _hide_prompt_line(self, name: str) -> None:
        line = self._prompt_line(name)
        if line is not None:
            line.display = False

    @property
    def prompt_waits(self) -> bool:
        """The open request's prompt waits for the message being typed (``show_prompt``)."""
        return self._waiting_prompt is not None

    async def _take_prompt(self, *, settle: bool = True) -> None:
        """The message typed is sent (or set aside with Tab: not ``settle``): the prompt that
        waited docks and takes the keys."""
        widget, self._waiting_prompt = self._waiting_prompt, None
        if widget is None:
            return
        self._hide_prompt_line("prompt-waits")
        request = self.open_request
        if request is not None:
            # Says what stays in the box, hidden under it. Asked for with Tab, it takes the
            # keys at once; after a message sent, once settled (the next one may be begun).
            await self._dock(widget, request, settle=settle)

    async def _remove_prompt(self) -> None:
        for widget in self.query(
            "#bottom > ApprovalPrompt, #bottom > QuestionPrompt, #bottom > ElicitationForm"
        ):
            await widget.remove()

    async def hide_prompt(self) -> None:
        """The composer takes the prompt's place, and its focus if the prompt had it (an answer
        sent: type the next message). Focus elsewhere (a job opened from the browser, whose
        run waits for nobody) stays: whether a letter typed next is text or a key must not
        depend on whether the run shown before had a question open."""
        focused = self.focused
        bottom = self.query_one("#bottom", Vertical)
        prompt_had_focus = self.open_request is not None and (
            focused is None
            or not focused.is_attached  # a prompt replaced by the next one keeps it a moment
            or (bottom in focused.ancestors and self.composer not in focused.ancestors)
        )
        self.open_request = None
        self._waiting_prompt = None
        self._hide_prompt_line("prompt-waits")
        await self._remove_prompt()
        self.query_one("#prompt-origin", Static).display = False
        if not self.composer.display:
            self.composer.mark_put_back()  # kept under the prompt: back, untouched
        self.composer.display = True
        self._sync_prompt_queue()
        now = self.focused
        if prompt_had_focus or now is None or not now.is_attached:
            self.composer.focus_input()

    @on(PromptAnswered)
    def _prompt_answered(self, message: PromptAnswered) -> None:
        message.stop()
        self._answered_here.add(message.request.id)
        self._respond(message.request, message.value)
        if self.conversation.run_id is not None and not self.conversation.following:
            # The run goes on from here: its tail, followed (a run opened at a search hit
            # stayed there, and what it did next landed out of view: a new-user trial).
            self.conversation.action_jump(False)
        # The box takes the keys at once, not when the run's next state arrives: a key typed
        # right after the answer landed in the answer field on its way out, and was lost (a
        # trial's "hello there" queued as "ello there").
        answered = self.query("#bottom > ApprovalPrompt, #bottom > QuestionPrompt")
        if (
            answered
            and self.open_request is not None
            and self.open_request.id == message.request.id
        ):
            for widget in answered:
                widget.display = False
            if not self.composer.display:
                self.composer.mark_put_back()  # kept under the prompt: back, untouched
            self.composer.display = True
            self.composer.focus_input()

    @on(KeyAfterAnswer)
    def _key_after_answer(self, message: KeyAfterAnswer) -> None:
        """Typed on right after an answer: the keys go to the message box, in order."""
        message.stop()
        from textual import events

        self.composer.input.post_message(events.Key(message.key, message.character))

    async def _as_of_now(self, request: InputRequest) -> InputRequest:
        """An approval as it should be shown now: a file write's diff made against the file
        as it is (``Runtime.current_request``); as stored if that cannot be read."""
        try:
            return await self.runtime.current_request(request)
        except AgentTuiError:
            return request

    @work(exit_on_error=False, group="respond")
    async def _respond(self, request: InputRequest, value: Any) -> None:
        if (
            request.kind is InputKind.APPROVAL
            and isinstance(value, dict)
            and value.get("decision") != "deny"
        ):
            now = await self._as_of_now(request)
            if now.detail.get("diff") != request.detail.get("diff"):
                # The file changed while the prompt was on screen: what was shown is not what
                # allowing would do. Nothing is answered; the prompt comes back as of now.
                self.post_message(ApprovalOutdated(now))
                return
        try:
            await self.runtime.respond(request.run_id, request.id, value)
        except AgentTuiError as error:
            self.post_message(AnswerFailed(request, error, value))

    async def on_approval_outdated(self, message: ApprovalOutdated) -> None:
        request = message.request
        if self.open_request is None or self.open_request.id != request.id:
            return
        self.notify(
            "The file changed while you looked: the approval shows the change as of now."
            " Nothing was answered.",
            title="Look again",
            severity="warning",
        )
        await self._remove_prompt()
        self.open_request = None
        await self.show_prompt(request, asker=self._prompt_asker)

    async def _answer_draft(self, request: InputRequest) -> str:
        """The answer typed to ``request`` here, or by an agent-tui that quit or crashed
        meanwhile ('' if none or unreadable: a draft is a convenience, never a reason not to
        show the question). Another live agent-tui's half-typed answer is its own."""
        store, writer = self.runtime.store, self.runtime.owner_id
        try:
            drafts = restorable(await store.get_answer_drafts(request.id), writer=writer)
            text = drafts.text
            if drafts.left:
                await store.save_answer_draft(
                    request.id,
                    text,
                    job_id=request.job_id,
                    writer=writer,
                    replacing=drafts.left_by,
                )
        except AgentTuiError:
            return ""
        return text

    def on_question_prompt_answer_draft_changed(
        self, message: QuestionPrompt.AnswerDraftChanged
    ) -> None:
        message.stop()
        self._save_answer_draft(message.request, message.text, message.revision)

    @work(exit_on_error=False, group="answer-draft-save")
    async def _save_answer_draft(self, request: InputRequest, text: str, revision: int) -> None:
        await self.runtime.store.save_answer_draft(
            request.id, text, job_id=request.job_id, writer=self.runtime.owner_id, revision=revision
        )

    async def on_answer_failed(self, message: AnswerFailed) -> None:
        text = self.agent_app.error_text(message.error)
        typed = message.value if isinstance(message.value, str) else None
        if isinstance(message.error, AlreadyAnswered):
            # Said without the request's internal id (a trial read a 32-digit hex in it).
            text = "It was answered first elsewhere (another agent-tui or the command line)"
            if typed and typed.strip():
                # Found by a new-user trial: answered in two places at once, the words typed
                # in the slower one went without a trace.
                text += f"; yours was not sent: {short(typed.strip(), 120)}"
        self.notify(
            terminal_safe(text),
            title="Answer refused",
            severity="error",
            markup=False,
        )
        from tui.widgets.elicitation_form import ElicitationForm

        for form in self.query(ElicitationForm):
            form.show_errors({"": str(message.error)})
        from tui.widgets.approval_prompt import ApprovalPrompt
        from tui.widgets.question_prompt import QuestionPrompt

        request = self.open_request
        hidden = self.query("#bottom > ApprovalPrompt, #bottom > QuestionPrompt")
        if request is not None and request.id == message.request.id and hidden:
            # Still open (the answer was refused, not taken): the prompt comes back, with the keys.
            self.composer.display = False
            for widget in hidden:
                widget.display = True
                if isinstance(widget, ApprovalPrompt | QuestionPrompt):
                    widget.reopen()
            hidden.first().focus()

    # --- actions -------------------------------------------------------------------------------
    def action_compose(self) -> None:
        if self.open_request is None:
            self.composer.focus_input()

    def action_new_job(self, take_keys: bool = True, carry: bool = False) -> None:
        """An explicit new job: the conversation empties and the composer addresses a new job
        (``take_keys``: and has the focus; ``carry``: with what the box holds, typed after
        ``/new``'s Enter, rather than leave it as the draft of the job it addressed).

        What the keys act on changes here, at once: the box addresses the new job and no run
        is selected. The widgets go after, in the screen's own turn (``_new_job``), as a
        loaded run is shown: a worker beside the screen's handlers, clearing a long
        conversation, left the box on the job shown before (a message sent meanwhile became
        its follow-up), and a run opened meanwhile had "New job" put over it."""
        self.selected_run = None
        self.selected_job = None
        self._loading_run_id = None
        # What is sent from now on starts it: it joins no new job started before (whose held
        # messages still go to that one).
        self._starting_job = None
        self.query_one("#banner", Static).display = False
        self.status.show(model=str(self.runtime.default_model))
        self.job_tree.keep_live(None)
        composer = self.composer
        composer.typed_ahead_for_job = False  # a new job asked for before the one opening
        if composer.follow_up_job_id is not None:
            if carry:
                composer.carry_to(None)  # the new job's own draft comes back (under it)
            else:
                composer.target(None)
                self._load_draft(None)
        self.refresh_bindings()
        self.call_later(self._new_job, take_keys=take_keys)

    async def _new_job(self, *, take_keys: bool = True) -> None:
        if self.selected_run is not None or self._loading_run_id is not None:
            return  # a run opened since, after the new job was asked for: it is shown
        await self._close_confirm_bar()
        await self.hide_prompt()
        await self.conversation.show_empty("New job: type the task below and press Enter.")
        if take_keys:
            self.composer.focus_input()
        self.refresh_bindings()

    def _working_run(self) -> Run | None:
        """The run on screen while it streams or runs tools (not while it waits for input)."""
        run = self.selected_run
        if run is None or run.state not in (RunState.RUNNING, RunState.QUEUED):
            return None
        if self.open_request is not None:
            return None  # it waits for the person (a sub-run's question): Esc leaves the prompt
        if needs_resume(run):
            return None
        if run.id in self._stopping:
            return None  # stopped already: Esc, again, goes to the browser
        if self._worked_elsewhere(run):
            # Another process works it (a CLI retry, another agent-tui): Esc keeps meaning
            # "leave" here, and c cancels it, asking first. (A trial pressed Esc to go to the
            # browser and cancelled the retry a shell had just started.)
            return None
        return run

    def _way_out(self) -> str:
        """The key that takes the keys from the text field they are in to the browser: Esc,
        but Tab from the composer while the run on screen works (Esc would stop it)."""
        working = self._working_run() is not None
        return "Tab" if working and self.focused is self.composer.input else "Esc"

    def _show_stop_keys(self, _screen: object = None) -> None:
        """The status line names what stops the run from where the focus is: Esc where it
        interrupts, else c (asking first), else the way to c (Esc from a text field: the
        answer field of a sub-run's question, the composer while another process works). On a
        yes/no question, what Esc does there: it answers no (with "Cancel the run?" docked,
        the line said "esc to interrupt" while Esc kept the run going: a new-user trial)."""
        bar = _confirm_bar(self.focused)
        hint: tuple[str, ...]
        if bar is not None:
            hint = CANCEL_QUESTION_HINTS if bar.stops_run else (QUESTION_HINT,)
        elif self.check_action("interrupt", ()):
            hint = (STOP_HINT,)
        elif self.check_action("cancel_run", ()):
            hint = ("c cancels",)
        else:
            hint = ("esc, then c cancels",)
        if hint != self.status.stop_hint:
            self.status.stop_hint = hint
            self.status.redraw()

    def _worked_elsewhere(self, run: Run) -> bool:
        """Whether another process executes ``run`` (with ``--attach``, workers execute what
        this agent-tui starts: those count as its own)."""
        owner = run.owner_id
        return (
            owner is not None
            and owner != self.runtime.owner_id
            and not self.agent_app.settings.attach
        )

    def action_interrupt(self) -> None:
        self.interrupt()

    def interrupt(self) -> bool:
        """Esc or ctrl+c: stop the run on screen (its root, so sub-runs stop too). False when
        nothing works on screen."""
        run = self._working_run()
        if run is None:
            return False
        # Like the peers: what was queued comes back to the box, ready to edit or send (to
        # the job's draft when the box addresses another job, once the run has stopped).
        if self.composer.follow_up_job_id == run.job_id:
            self._into_box(self.composer.take_queue(run.job_id))
        self._stopping.add(run.id)
        self.refresh_bindings()  # Esc means "leave" again (the footer, the status line)
        self._interrupt(run)
        return True

    @work(exit_on_error=False, group="interrupt")
    async def _interrupt(self, run: Run) -> None:
        try:
            root = run
            for _ in range(32):
                if root.parent_run_id is None:
                    break
                root = await self.runtime.get_run(root.parent_run_id)
            self._interrupted_runs.add(root.id)
            try:
                cancelled = await self.runtime.cancel(root.id, reason="interrupted")
            except RunStateConflict:
                self._interrupted_runs.discard(root.id)
                return  # it ended on its own meanwhile
        except Exception:
            self._stopping.discard(run.id)  # not stopped: Esc stops it still
            raise
        self.post_message(RunInterrupted(cancelled))

    def on_run_interrupted(self, message: RunInterrupted) -> None:
        composer = self.composer
        # The keys stay where they are: Esc pressed in the composer leaves them there, for a
        # follow-up; pressed in the browser (or again meanwhile, to get there), they stay in the
        # browser. Taken to the composer, the browser's next key (b) went into the box and Enter
        # sent it as a follow-up (a new-user trial); Esc, Esc, ↑, Enter sent the last prompt
        # again (another).
        in_box = (
            self.focused is composer.input
            and composer.follow_up_job_id == message.run.job_id
            and self.open_request is None
        )
        # Name what works where the keys are: in a text field, R is a letter. In a box holding
        # text (the queued messages given back), /retry would be added to it.
        if in_box and not composer.input.text.strip():
            text = "Interrupted. Type a follow-up or send /retry to retry; Esc: the browser."
        elif self.typing():
            text = "Interrupted. Type a follow-up, or press Esc, then R to retry."
        else:
            text = "Interrupted. Press R to retry."
        self.notify(text, title="Run interrupted")

    def action_follow_up(self) -> None:
        """Follow up the highlighted job (of the row under the browser's cursor: its own, a
        run's, a checkpoint's), else the one on screen: the composer addresses it, focused,
        and the conversation shows it (its latest run, as Enter on its row opens it)."""
        if self.open_request is not None:
            # To the prompt, where typing goes now: left in the browser, the message typed
            # next fired its single-letter keys (new job, export, archive, cancel…).
            self.notify("Answer the prompt first.", severity="warning")
            self._focus_pane(2)
            return
        job = self.job_tree.cursor_job() or self.selected_job
        if job is None:
            self.notify("Select a job first.", severity="warning")
            return
        composer = self.composer
        if not composer.display:
            self.notify(
                "Choose how to retry first (Esc leaves the run as it is).", severity="warning"
            )
            self._focus_pane(2)  # the retry's choice, docked in the composer's place
            return
        # Through ``target``: set directly, the job changed but not the title the line names
        # (empty in a fresh agent-tui, or the job shown before), nor the draft in the box.
        changed = composer.follow_up_job_id != job.id
        composer.target(job.id, job.title)
        if changed:
            self._load_draft(job.id)
        shown = self.selected_job
        if shown is None or shown.id != job.id:
            # A new-user trial read job A while the box said "Follow-up in: B" (ctrl+t on B's
            # row without Enter): nothing said the reply went elsewhere than what was read.
            self.open_job(job.id)
        # Now, not as ``focus()`` does it, behind the keys already queued: the task typed with
        # ctrl+t (at once, as tmux sends it) goes into the box (see ``JobTree.BINDINGS``).
        self.set_focus(composer.input)

    def action_focus_browser(self) -> None:
        self.query_one("#browser").remove_class("-hidden")
        self._focus_pane(0)

    def action_focus_conversation(self) -> None:
        self._focus_pane(1)

    # Focus moves between three panes — browser, conversation, bottom (composer or prompt) —
    # with Tab and shift+Tab; inside the bottom pane Tab first visits the prompt's own fields.
    PANES = ("browser", "conversation", "bottom")

    def _pane_of(self, widget: Widget | None) -> int | None:
        node: DOMNode | None = widget
        while node is not None and node is not self:
            if node.id in self.PANES:
                return self.PANES.index(node.id)
            node = node.parent
        return None

    def _focus_pane(self, index: int) -> None:
        pane = self.PANES[index]
        if pane == "browser":
            results = self.query_one("#search-results", OptionList)
            (results if results.display else self.job_tree).focus()
        elif pane == "conversation":
            self.conversation.focus()
        elif choices := self.query("RetryChoice"):
            choices.first().focus()
        elif self.open_request is not None and not self.prompt_waits:
            prompt = self.query(
                "#bottom > ApprovalPrompt, #bottom > QuestionPrompt, #bottom > ElicitationForm"
            )
            if prompt:
                from tui.widgets.elicitation_form import ElicitationForm

                widget = prompt.first()
                if isinstance(widget, ElicitationForm):
                    widget.focus_first_field()
                else:
                    widget.focus()
        else:
            self.composer.focus_input()

    def _cycle(self, step: int) -> None:
        focused = self.focused
        pane = self._pane_of(focused)
        if pane is None:
            self._focus_pane(0 if step > 0 else 2)
            return
        if self.PANES[pane] == "bottom" and focused is not None:
            chain = self.focus_chain
            index = chain.index(focused) if focused in chain else -1
            neighbour = index + step
            if (
                index >= 0
                and 0 <= neighbour < len(chain)
                and self._pane_of(chain[neighbour]) == pane
            ):
                chain[neighbour].focus()
                return
        self._focus_pane((pane + step) % len(self.PANES))

    def _prompt_takes_tab(self) -> bool:
        """A prompt waits behind the message being typed in the composer: Tab answers it."""
        return self.prompt_waits and self.focused is self.composer.input

    def action_take_prompt(self) -> None:
        # The message stays in the box, hidden until the prompt is answered.
        self.run_worker(self._take_prompt(settle=False), exit_on_error=False, group="prompt")

    def action_next_pane(self) -> None:
        self._cycle(1)

    def action_previous_pane(self) -> None:
        self._cycle(-1)

    def action_leave(self) -> None:
        focused = self.focused
        if focused is not None and focused.id in ("search", "search-results"):
            self._close_search()
        elif self._pane_of(focused) == 0:
            if self.open_request is not None:
                self._focus_pane(2)
        else:
            self._focus_pane(0)

    def _tool_views(self) -> list[ToolCallView]:
        from tui.widgets.tool_call_view import ToolCallView

        return [view for view in self.conversation.query(ToolCallView) if view.display]

    def _step_tool(self, step: int) -> None:
        views = self._tool_views()
        if not views:
            self.notify("No tool call in this conversation.", severity="information")
            return
        focused = self.focused
        if focused in views:
            index = max(0, min(len(views) - 1, views.index(focused) + step))
        else:
            # From the conversation itself: the first (]) or last ([) block in view.
            viewport = self.conversation.region
            in_view = [i for i, v in enumerate(views) if v.region.overlaps(viewport)]
            index = (in_view[0] if step > 0 else in_view[-1]) if in_view else len(views) - 1
        views[index].focus()
        views[index].scroll_visible(animate=False)

    def _thinking_blocks(self) -> list[Collapsible]:
        """The folded blocks ``t`` opens: thinking, and the instructions of a skill invoked."""
        blocks = self.conversation.query("#thinking, #skill-body").results(Collapsible)
        return [c for c in blocks if c.display]

    def action_thinking(self) -> None:
        blocks = self._thinking_blocks()
        viewport = self.conversation.region
        in_view = [b for b in blocks if b.region.overlaps(viewport)] or blocks[-1:]
        # The message widgets' module brings Markdown: imported with the first message shown.
        from tui.widgets.message_view import toggle_thinking

        block = toggle_thinking(in_view, self.focused)
        if block is not None:
            # Enter on the title opens and closes it too. (A block mounted just now, with its
            # message's first thinking, has no title until its own task composes it.)
            for title in block.query_children(CollapsibleTitle):
                title.focus(scroll_visible=False)

    def action_next_tool(self) -> None:
        self._step_tool(1)

    def action_previous_tool(self) -> None:
        self._step_tool(-1)

    def action_parent_run(self) -> None:
        run = self.selected_run
        if run is None or run.parent_run_id is None:
            self.notify("This run was not delegated by another run.", severity="information")
            return
        self._return_to_tool = run.parent_tool_call_id
        self.open_run(run.parent_run_id)

    def typing(self) -> bool:
        """Whether a text field has focus: then printable keys are text, never actions."""
        return isinstance(self.focused, Input | TextArea)

    RUN_ACTIONS = frozenset(
        {"parent_run", "cancel_run", "retry", "retry_superseded", "fork", "fork_superseded"}
    )
    """Actions on the run on screen, offered only when they make sense for it."""

    def offers(self, action: str) -> bool:
        """Whether ``action`` makes sense for the run on screen, whatever has the focus (the
        command palette asks this; ``check_action`` too)."""
        run = self.selected_run
        if action == "parent_run":
            return run is not None and run.parent_run_id is not None
        if action == "cancel_run":
            return run is not None and not run.state.is_terminal
        if action in ("retry", "retry_superseded", "fork_superseded"):
            # Failed, cancelled (Esc's interrupt says "Esc, then R") or interrupted: the runtime
            # retries each from its last checkpoint, unless later runs of its job went past it
            # (``run_superseded``): then a fork is the way on.
            if run is None or not (
                needs_resume(run) or run.state in (RunState.FAILED, RunState.CANCELLED)
            ):
                return False
            gone_past = self.job_tree.gone_past(run)
            return not gone_past if action == "retry" else gone_past
        if action == "fork":
            node = self.job_tree.cursor_node
            return run is not None or (node is not None and isinstance(node.data, CheckpointEntry))
        if action == "unarchive_last":
            return self._archive_to_undo() is not None
        if action in ("compact", "rewind"):
            return self.composer.follow_up_job_id is not None
        return True

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Keys that make no sense right now are hidden from the footer (and do nothing);
        single-letter actions are off while a text field has focus."""
        if action in self.LETTER_ACTIONS and self.typing():
            return False
        if action in self.LETTER_ACTIONS and _is_retry_choice(self.focused):
            return False  # its own keys only, until the person chose
        if action in self.LETTER_ACTIONS and _in_form(self.focused):
            return False  # on a form's choice list or tick box too: c must not cancel the run
        if action in self.RUN_ACTIONS:
            return self.offers(action)
        if action in ("next_tool", "previous_tool"):
            return self._pane_of(self.focused) == 1
        if action == "thinking":
            return self._pane_of(self.focused) == 1 and bool(self._thinking_blocks())
        if action == "unarchive_last":
            return self._archive_to_undo() is not None
        if action == "take_prompt":
            return self._prompt_takes_tab()
        searching = self.focused is not None and self.focused.id in ("search", "search-results")
        if action == "interrupt":
            return self._working_run() is not None and not searching
        if action == "leave":
            if searching:
                return True
            if self._pane_of(self.focused) == 0:  # the browser: back to an open prompt
                return self.open_request is not None
            return self._working_run() is None
        return True

    def action_inbox(self) -> None:
        from tui.screens.inbox import InboxScreen

        def chosen(request: InputRequest | None) -> None:
            if request is not None:
                self._answer_wanted = request.id
                self.open_run(request.run_id)

        self.app.push_screen(InboxScreen(), chosen)

    def _selected_run_or_warn(self) -> Run | None:
        if self.selected_run is None:
            self.notify("Select a run first.", severity="warning")
        return self.selected_run

    def action_cancel_run(self) -> None:
        run = self._selected_run_or_warn()
        if run is None:
            return
        if run.state.is_terminal:
            self.notify(f"This run already {run.state.value}.", severity="information")
            return
        self.run_worker(self._ask_to_cancel(run), exit_on_error=False, group="confirm")

    async def _ask_to_cancel(self, run: Run) -> None:
        from tui.widgets.confirm_bar import ConfirmBar

        bar = ConfirmBar(
            f"Cancel the run {run.id[:8]} ({run.state.value.replace('_', ' ')})?",
            lambda: self._cancel(run.id),
            returning_to=self.focused,
            stops_run=True,
        )
        await self._ask(bar)

    async def _ask(self, bar: ConfirmBar) -> None:
        """Dock ``bar`` (a yes/no question) over the bottom area, in place of any other, with
        the keys."""
        for old in self.query(type(bar)):
            await old.remove()
        await self.query_one("#bottom", Vertical).mount(bar, before=0)
        bar.focus()

    async def _drop_question_about(self, run_id: str) -> None:
        """A yes/no question about ``run_id`` (cancel the interrupted run?) goes once the run's
        state changed: resumed elsewhere, the question no longer stands (a trial's stayed
        docked through the whole resumed run, its y going into the box)."""
        from tui.widgets.confirm_bar import ConfirmBar

        for bar in self.query("#bottom > ConfirmBar").results(ConfirmBar):
            if bar.about_run == run_id:
                back = bar.returning_to
                await bar.remove()
                if back is not None and back.is_mounted:
                    back.focus()
                self.notify(
                    f"The run {run_id[:8]} changed meanwhile (resumed elsewhere?): the question"
                    " is withdrawn, your message is in the box.",
                    title="Question withdrawn",
                )

    async def _close_confirm_bar(self) -> None:
        """A question about the run shown before (cancel it?) goes with it, unanswered: found by
        a new-user trial, it stayed docked over other jobs, out of Tab's reach."""
        for bar in self.query("#bottom > ConfirmBar"):
            await bar.remove()

    async def on_confirm_bar_closed(self, message: ConfirmBar.Closed) -> None:
        await message.bar.close(confirmed=message.confirmed)

    @work(exit_on_error=False, group="cancel")
    async def _cancel(self, run_id: str) -> None:
        self._cancelled_here.add(run_id)
        await self.runtime.cancel(run_id, reason="cancelled in agent-tui")
        self.notify("Run cancelled.")

    def action_retry(self) -> None:
        run = self._selected_run_or_warn()
        if run is None:
            return
        if run.state is RunState.COMPLETED:
            # `R` is not offered here, but /retry and the palette reach it: say what to do in
            # the app, not the runtime's refusal (a hex id and the command line's "follow-up").
            self.notify(
                "This run completed: there is nothing to retry. Type a follow-up in the box, or"
                " fork it (f or /fork MESSAGE) to take another way from one of its steps.",
                title="/retry",
            )
            return
        self._retry(run.id)

    def action_retry_superseded(self) -> None:
        """R on a run later runs went past: not offered, but answered with the runtime's
        refusal (and its way on), not silence."""
        self.action_retry()

    def action_fork_superseded(self) -> None:
        self.action_fork()

    @work(exit_on_error=False, group="start")
    async def _retry(self, run_id: str) -> None:
        """Retry the run; when its last step left calls whose outcome is unknown, show them
        and let the person choose first (nothing runs again silently)."""
        runtime = self.runtime
        run = await runtime.get_run(run_id)
        calls = await runtime.unknown_calls(run.id) if run.state.is_terminal else []
        if not calls:
            await self._start_retry(run_id, None)
            return
        try:
            # Without a choice the runtime checks the model first (no key: a clear error,
            # before anything is asked), then refuses, writing nothing.
            await self._start_retry(run_id, None)
            return
        except InvalidInput:
            pass
        checkpoints = await runtime.checkpoints(run.id)
        latest = checkpoints[-1].id if checkpoints else None
        self.post_message(RetryChoiceWanted(run, calls, latest))

    async def _start_retry(self, run_id: str, unknown: UnknownChoice | None) -> None:
        from_start = not await self.runtime.checkpoints(run_id)
        run = await self.runtime.retry(run_id, unknown=unknown)
        self._resumed(run_id)
        self._loading_run_id = run.id
        job = await self.runtime.get_job(run.job_id)
        self.post_message(RunStarted(run, job))
        if unknown == "rerun":
            self.notify("Retrying: the call whose outcome was unknown runs again.")
        elif unknown == "skip":
            self.notify("Retrying without the call: the model is told its outcome is unknown.")
        elif from_start:
            self.notify("Retrying the run from its start (it had no checkpoint yet).")
        else:
            self.notify("Retrying the run from its last checkpoint.")

    async def on_retry_choice_wanted(self, message: RetryChoiceWanted) -> None:
        await self._close_retry_choice()
        if self.selected_run is None or self.selected_run.id != message.run.id:
            return  # another run is on screen now
        from tui.widgets.retry_choice import RetryChoice

        choice = RetryChoice(message.run, message.calls, checkpoint_id=message.checkpoint_id)
        self.composer.display = False
        await self.query_one("#bottom", Vertical).mount(choice)
        choice.focus()
        self.call_after_refresh(choice.focus)

    async def _close_retry_choice(self) -> bool:
        """Remove the retry choice, if one is open; the composer comes back."""
        open_choices = list(self.query("RetryChoice"))
        for widget in open_choices:
            await widget.remove()
        if open_choices and self.open_request is None:
            self.composer.display = True
        return bool(open_choices)

    async def on_retry_choice_chosen(self, message: RetryChoice.Chosen) -> None:
        message.stop()
        await self._close_retry_choice()
        self.composer.focus_input()
        choice = message.choice
        if choice is None:
            self.notify("Nothing was retried.", severity="information")
        elif choice == "fork":
            self._fork(message.widget.checkpoint_id, message.run.id, None)
        else:
            self._retry_with(message.run.id, choice)

    @work(exit_on_error=False, group="start")
    async def _retry_with(self, run_id: str, unknown: UnknownChoice) -> None:
        await self._start_retry(run_id, unknown)

    def action_fork(self, message: str | None = None) -> None:
        """``f``, or ``/fork [MESSAGE]``: a new job from the checkpoint under the browser's
        cursor, else the one Enter opened, else the run's last. ``f`` asks first: the fork's
        run calls the model at once (a new-user trial forked by typing into the browser)."""
        node = self.job_tree.cursor_node
        checkpoint: Checkpoint | None = None
        run_id: str | None = None
        if node is not None and isinstance(node.data, CheckpointEntry):
            checkpoint = node.data.checkpoint
        else:
            run = self._selected_run_or_warn()
            if run is None:
                return
            opened = self._opened_checkpoint
            if opened is not None and opened.run_id == run.id:
                checkpoint = opened  # the step the person opened, not the last
            else:
                run_id = run.id
        if message is not None:
            self._fork(checkpoint.id if checkpoint else None, run_id, message)
        else:
            self.run_worker(
                self._ask_to_fork(checkpoint, run_id), exit_on_error=False, group="confirm"
            )

    async def _ask_to_fork(self, checkpoint: Checkpoint | None, run_id: str | None) -> None:
        from tui.widgets.confirm_bar import ConfirmBar

        if checkpoint is None and run_id is not None:
            checkpoints = await self.runtime.checkpoints(run_id)
            if not checkpoints:
                self.notify("This run has no checkpoint to fork from yet.", severity="warning")
                return
            checkpoint = checkpoints[-1]
        assert checkpoint is not None
        source = await self.runtime.get_run(checkpoint.run_id)
        if (
            source.state is RunState.COMPLETED
            and (await self.runtime.checkpoints(source.id))[-1].id == checkpoint.id
        ):
            # Nothing to ask: the runtime would refuse it (the model would only repeat its
            # answer, at the cost of a call); the fork needs the person's next words.
            self.notify(
                f"run {source.id[:8]} ended at step {checkpoint.step} with its answer: give the "
                "fork a first message to go on with: send /fork and your message.",
                title="Fork",
                markup=False,
            )
            return
        fork_id = checkpoint.id
        bar = ConfirmBar(
            f"Fork step {checkpoint.step} of run {checkpoint.run_id[:8]} into a new job? It runs"
            " at once.",
            lambda: self._fork(fork_id, None, None),
            returning_to=self.focused,
            declined="Nothing was forked.",
        )
        await self._ask(bar)

    @work(exit_on_error=False, group="start")
    async def _fork(
        self, checkpoint_id: str | None, run_id: str | None, message: str | None = None
    ) -> None:
        if checkpoint_id is None and run_id is not None:
            checkpoints = await self.runtime.checkpoints(run_id)
            if not checkpoints:
                self.notify("This run has no checkpoint to fork from yet.", severity="warning")
                return
            checkpoint_id = checkpoints[-1].id
        assert checkpoint_id is not None
        try:
            run = await self.runtime.fork(checkpoint_id, message)
        except InvalidInput as error:
            # A run's last step, where it answered: asked again, the model would only repeat
            # itself (at the cost of a call). The fork needs the person's next words.
            self.notify(
                f"{error.message}: send /fork and your message.", title="Fork", markup=False
            )
            return
        self._loading_run_id = run.id
        job = await self.runtime.get_job(run.job_id)
        self.post_message(RunStarted(run, job))
        self.notify(f"Forked into a new job: {terminal_safe_line(job.title)}", markup=False)

    def _job_acted_on(self) -> str | None:
        """The id of the job a key like ``e`` or ``x`` acts on: in the browser, the job of the
        row under the cursor (a run's or a checkpoint's row too, a search hit's); elsewhere
        (the conversation, the palette) the job on screen. The cursor's job went from the
        conversation too, another job than the one read there (a new-user trial)."""
        if isinstance(self.focused, SearchResults):
            hit = self.focused.highlighted_hit
            return hit.job_id if hit is not None else None
        cursor_job = self.job_tree.cursor_job()
        if self._pane_of(self.focused) == 0:
            job = cursor_job or self.selected_job
        else:
            job = self.selected_job or cursor_job
        return job.id if job is not None else None

    def action_export(self) -> None:
        """``e``: the job of ``_job_acted_on``, written as Markdown to the exports folder."""
        job_id = self._job_acted_on()
        if job_id is None:
            self.notify("Select a job first.", severity="warning")
            return
        self._export(job_id)

    @work(exit_on_error=False, group="export")
    async def _export(self, job_id: str) -> None:
        text = await self.runtime.export_job(job_id, format="md")
        job = await self.runtime.get_job(job_id)
        workspace = self.agent_app.settings.workspace
        path = export_path(workspace, job.title, job_id, time.time())
        folder = path.parent.relative_to(workspace)
        try:
            ignore = path.parent / ".gitignore"
            if not ignore.exists():
                write_text_atomically(ignore, EXPORTS_IGNORED)
            write_text_atomically(path, text)  # a failed write leaves no part of the file
        except OSError as error:
            # Said of the folder: the error names the temporary file the write went to.
            why = error.strerror or str(error)
            self.notify(
                f"Could not write to {folder}/: {why}",
                title="Not exported",
                severity="error",
                markup=False,
            )
            return
        # The folder the person is in, then the file on a line of its own: on one line, the
        # notice broke the file's name mid-word (a new-user trial).
        self.notify(f"Exported to {folder}/\n{path.name}", title="Export", markup=False)

    def action_archive_job(self) -> None:
        job_id = self._job_acted_on()  # x on an older job's run row archived the job on screen
        if job_id is None:
            self.notify("Select a job first.", severity="warning")
            return
        # Counted as being archived here before its event can come back (``_leave_archived``
        # tells an archive made here from one made elsewhere), and before a u pressed next.
        self._archiving.append(job_id)
        self.refresh_bindings()
        self._archive(job_id)

    @work(exit_on_error=False, group="archive")
    async def _archive(self, job_id: str) -> None:
        try:
            async with self._archive_writes:
                job = await self.runtime.store.set_job_archived(job_id, True)
                # On the undo stack only once written: a u pressed meanwhile waits for it.
                self._archived_here.append(job_id)
        except JobRunOpen as exc:
            on_screen = self.selected_job is not None and self.selected_job.id == job_id
            self.notify(
                archive_refusal(exc, on_screen=on_screen),
                title="Not archived",
                severity="warning",
                markup=False,
            )
            return
        except AgentTuiError as exc:
            self.notify(
                self.agent_app.error_text(exc),
                title="Not archived",
                severity="warning",
                markup=False,
            )
            return
        finally:
            self._archiving.remove(job_id)
            self.refresh_bindings()
        if job_id in self._undoing:
            return  # u was pressed already: "is back" follows
        # Archiving leaves the keys where they are; in a text field u is a letter.
        undo = f"{self._way_out()}, then u brings it back" if self.typing() else "u brings it back"
        command = self._command_line()
        notice = Notification(
            terminal_safe_line(
                f"Archived {short(job.title, 40)}: hidden here and from `{command} runs`. {undo}"
                f" (or `{command} unarchive {job.id[:8]}`)."
            ),
            title="Archived",
        )  # its job_archived event takes the rows away (``on_job_archived``)
        # Kept to expire if the job is deleted meanwhile, with the u it offers.
        self._archive_notices[job_id] = (job.title, notice)
        self.app.post_message(Notify(notice))
        self._watch_for_deleted()

    def _watch_for_deleted(self) -> None:
        if self._deletion_watch is None:
            self._deletion_watch = self.set_interval(DELETED_CHECK_SECONDS, self._look_for_deleted)

    def _look_for_deleted(self) -> None:
        for job_id, (_, notice) in list(self._elsewhere_notices.items()):
            if notice.has_expired:  # gone by itself: nothing it says needs taking back
                del self._elsewhere_notices[job_id]
        watched = [*self._archived_here, *self._elsewhere_notices]
        if watched:
            self._find_deleted(watched)
        elif self._deletion_watch is not None:
            # Nothing left to look for: no more looking (the next archive starts it again).
            self._deletion_watch.stop()
            self._deletion_watch = None

    @work(exit_on_error=False, group="deleted", exclusive=True)
    async def _find_deleted(self, job_ids: list[str]) -> None:
        for job_id in job_ids:
            try:
                await self.runtime.get_job(job_id)
            except JobNotFound:
                self._deleted_elsewhere(job_id)

    def _deleted_elsewhere(self, job_id: str) -> None:
        """A job archived here was deleted by another process: u brings it back no more, and
        its "Archived" notice, which says u does, goes (a trial read it on over the deletion).
        So does the notice of a job archived elsewhere, which says `unarchive` does. Said
        once: the look and u's refusal can both find it gone."""
        if (
            job_id not in self._archived_here
            and job_id not in self._archive_notices
            and job_id not in self._elsewhere_notices
        ):
            return
        title, notice = self._forget_archive(job_id)
        if job_id in self._elsewhere_notices:
            title, notice = self._elsewhere_notices.pop(job_id)
        if notice is not None:
            notice.timeout = 0.0  # expired: the next notice shown leaves it out
        self.refresh_bindings()
        self.notify(
            terminal_safe_line(
                f"{short(title, 40)} was deleted elsewhere (`{self._command_line()} delete`, "
                "or another agent-tui): it can no longer be brought back."
            ),
            title="Deleted",
            markup=False,
        )

    def _forget_archive(self, job_id: str) -> tuple[str, Notification | None]:
        """The job is no more this session's archive to undo: its title and notice."""
        if job_id in self._archived_here:
            self._archived_here.remove(job_id)
        title, notice = self._archive_notices.pop(job_id, (job_id[:8], None))
        return title, notice

    def action_unarchive_last(self) -> None:
        """The archive asked for last comes undone; one still being written, once it landed
        (refused, there is nothing to undo: its refusal says so)."""
        job_id = self._archive_to_undo()
        if job_id is not None:
            self._undoing.add(job_id)
            self.refresh_bindings()
            self._unarchive(job_id)

    def _archive_to_undo(self) -> str | None:
        pressed = [*self._archived_here, *self._archiving]  # those written came first
        return next((job_id for job_id in reversed(pressed) if job_id not in self._undoing), None)

    @work(exit_on_error=False, group="archive")
    async def _unarchive(self, job_id: str) -> None:
        try:
            async with self._archive_writes:
                if job_id not in self._archived_here:
                    return  # not archived after all (its refusal said so), or brought back
                self._archived_here.remove(job_id)
                job = await self.runtime.store.set_job_archived(job_id, False)
                self._archive_notices.pop(job_id, None)
        except JobNotFound:
            self._deleted_elsewhere(job_id)
            return
        except AgentTuiError as exc:
            self._archive_notices.pop(job_id, None)
            self.notify(
                self.agent_app.error_text(exc),
                title="Not brought back",
                severity="warning",
                markup=False,
            )
            return
        finally:
            self._undoing.discard(job_id)
            self.refresh_bindings()
        self.notify(
            terminal_safe_line(f"{short(job.title, 40)} is back."),
            title="Archive undone",
            markup=False,
        )
        # Its job_archived event (archived: false) puts the rows back (``on_job_archived``).

    def action_cycle_filter(self) -> None:
        index = STATE_FILTERS.index(self.state_filter)
        self.state_filter = STATE_FILTERS[(index + 1) % len(STATE_FILTERS)]
        self.query_one("#filter", FilterLine).show(browser_filters.filter_name(self.state_filter))
        self.load_jobs(None, first=True)

    BROWSER_WIDTHS = ("", "-wide", "-narrow", "-hidden")

    def action_cycle_browser(self) -> None:
        """The browser: normal → wide → narrow → hidden (the conversation takes the rest)."""
        browser = self.query_one("#browser")
        index = next((i for i, c in enumerate(self.BROWSER_WIDTHS) if browser.has_class(c)), 0)
        shown = self.BROWSER_WIDTHS[(index + 1) % len(self.BROWSER_WIDTHS)]
        browser.remove_class(*(c for c in self.BROWSER_WIDTHS if c))
        if shown:
            browser.add_class(shown)
        if shown == "-hidden" and self.focused is not None and browser in self.focused.ancestors:
            self.conversation.focus()

    def action_search(self) -> None:
        self.query_one("#search", Input).focus()

    @on(SearchField.Wanted)
    def _search_wanted(self, event: SearchField.Wanted) -> None:
        event.stop()
        self._search(event.query, typed=event.typed)

    @on(SearchField.Emptied)
    def _search_emptied(self, event: SearchField.Emptied) -> None:
        event.stop()
        if event.leave:
            self._close_search()
        else:
            self._show_search_results(False)

    @on(SearchField.ToResults)
    def _to_search_results(self, event: SearchField.ToResults) -> None:
        event.stop()
        results = self.query_one("#search-results", SearchResults)
        if results.display and results.option_count:
            results.focus()

    @on(SearchResults.ToField)
    def _back_to_search_field(self, event: SearchResults.ToField) -> None:
        event.stop()
        self.query_one("#search", SearchField).refine()

    @work(exit_on_error=False, group="search", exclusive=True)
    async def _search(self, query: str, *, typed: bool = False) -> None:
        hits = await self.runtime.search(query, limit=50)
        self.post_message(SearchFinished(query, hits, typed=typed))

    def on_search_finished(self, message: SearchFinished) -> None:
        field = self.query_one("#search", Input)
        if message.typed and (not field.has_focus or field.value.strip() != message.query):
            return  # the words changed since, or the person left the field
        results = self.query_one("#search-results", SearchResults)
        results.show_hits(message.query, message.hits)
        self._show_search_results(True)
        if message.typed:
            return  # the focus stays in the field, typing on; Enter or Down goes to the hits
        if message.hits:
            results.focus()
        else:
            # Nothing to pick: the words stay in the field to be changed (a new-user trial went
            # on typing after "no match", and its letters ran the browser's keys: e exported).
            field.focus()

    def _show_search_results(self, shown: bool) -> None:
        """The hits in the browser's place of the job tree, or the tree again."""
        self.query_one("#search-results", OptionList).display = shown
        self.query_one("#tree-pane").display = not shown

    @on(OptionList.OptionSelected, "#search-results")
    def _hit_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option.id is not None:
            hit = self.query_one("#search-results", SearchResults).hits[int(event.option.id)]
            self.open_run(hit.run_id, at_position=hit.position, words=found_words(hit.snippet))

    def _close_search(self) -> None:
        self.query_one("#search", Input).value = ""
        self._show_search_results(False)
        self.job_tree.focus()


def open_with_viewer(paths: list[Path]) -> bool:
    """Open files with the desktop's viewer (``open`` on macOS, ``xdg-open`` under X11 or
    Wayland), detached; False when there is none (a terminal over SSH: the files stay saved)."""
    import shutil
    import subprocess
    import sys

    if sys.platform == "darwin":
        opener = shutil.which("open")
    elif os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        opener = shutil.which("xdg-open")
    else:
        opener = None
    if opener is None:
        return False
    for path in paths:
        subprocess.Popen(
            [opener, str(path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    return True


async def _first_window(
    pager: TranscriptPager, page: int, at_position: int | None
) -> tuple[list[Keyed], bool, bool, ItemKey | None]:
    """The items a run opens with: its tail, or (``at_position``) the half page before its
    message there, that message and the half page after; whether there is more before and
    after them; and the key of the message to show."""
    if at_position is None:
        items = await pager.tail(page)
        return items, len(items) >= page, False, None
    found = pager.key_of(at_position)
    half = page // 2
    before = await pager.before(pager.key_of(at_position + 1), half + 1)  # with the message
    after = await pager.after(found, page - half)
    return before + after, len(before) > half, len(after) >= page - half, found


EXPORT_SLUG = 24
"""Characters of the job's title in an export's file name: the name fits a notice's line."""


def archive_refusal(error: JobRunOpen, *, on_screen: bool) -> str:
    """Why ``x`` did not archive a job, in this app's keys: the error's own message gives the
    command line's (``agent-tui respond RUN_ID ANSWER``), which a trial read in the TUI.
    ``on_screen``: the job is the one open, its run's prompt and ``c`` at hand."""
    open_it = "" if on_screen else "open the job (enter), then "
    if error.waits_for_retry:
        what = f"was interrupted and waits for a retry: {open_it}R retries it or c cancels it"
    elif error.run_state != RunState.INPUT_REQUIRED.value:
        what = f"is {error.run_state}: let it finish, or {open_it}c cancels it"
    elif on_screen:
        what = "waits for input: answer it in its prompt, or c cancels it"
    else:
        what = (
            "waits for input: open the job (enter) or the inbox (i) to answer it,"
            f" or {open_it}c cancels it"
        )
    return f"A run of this job {what}. Then x archives the job."


def export_path(workspace: Path, title: str, job_id: str, now: float) -> Path:
    """A new file for an export of the job: ``WORKSPACE/.agent-tui/exports/<title>-<id>-<when>
    .md``. Each export is a snapshot of the job at that moment; one never replaces another."""
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower())[:EXPORT_SLUG].strip("-") or "job"
    stem = f"{slug}-{job_id[:8]}-{time.strftime('%Y%m%d-%H%M%S', time.localtime(now))}"
    folder = exports_dir(workspace)
    path = folder / f"{stem}.md"
    number = 1
    while path.exists():  # two exports within a second
        number += 1
        path = folder / f"{stem}-{number}.md"
    return path


def _rank_files(query: str, files: list[str]) -> list[str]:
    from tui.file_index import fuzzy_rank

    return [match.path for match in fuzzy_rank(query, files, limit=12)]


def _in_form(widget: Widget | None) -> bool:
    """Whether ``widget`` is a field of an elicitation form (its module is imported once one is
    shown)."""
    form = sys.modules.get("tui.widgets.elicitation_form")
    return (
        form is not None
        and widget is not None
        and any(isinstance(node, form.ElicitationForm) for node in widget.ancestors)
    )


def _confirm_bar(widget: Widget | None) -> ConfirmBar | None:
    """``widget`` as a yes/no question, if it is one (its module is imported once one is
    asked)."""
    confirm_bar = sys.modules.get("tui.widgets.confirm_bar")
    if confirm_bar is not None and isinstance(widget, confirm_bar.ConfirmBar):
        return cast("ConfirmBar", widget)
    return None


def _is_retry_choice(widget: Widget | None) -> bool:
    """Whether ``widget`` is the retry choice (its module is imported once one is shown)."""
    retry_choice = sys.modules.get("tui.widgets.retry_choice")
    return retry_choice is not None and isinstance(widget, retry_choice.RetryChoice)
