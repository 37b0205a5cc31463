"""The one composition root: ``create_app(runtime, settings)`` builds the app for the program and
for every test; ``run_app`` runs it on a database.

Start-up (DESIGN §13): the program gives the app an opener to call after the first frame, not an
open runtime. The app composes and draws its first screen, and only then (in a worker) imports
the engine, the providers and MCP, opens the database and recovers it; the screen is told with
``MainScreen.runtime_opened``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeAlias, runtime_checkable

from textual import events, on, work
from textual.app import App, SystemCommand
from textual.binding import BindingType
from textual.driver import Driver
from textual.events import AppBlur, AppFocus
from textual.notifications import Notification, Notify, SeverityLevel
from textual.screen import Screen
from textual.theme import Theme
from textual.worker import Worker, WorkerState

from runtime.errors import AgentTuiError, ConfigError, DatabaseCorrupt
from themes import THEMES_DIR, load_themes
from tui.bindings import APP_BINDINGS
from tui.screens.main import MainScreen
from tui.stylesheet_cache import StoredRules, StoredStylesheet
from tui.stylesheet_cache import cache_path as stylesheet_cache_path

if TYPE_CHECKING:
    from textual.widget import Widget

    # Typing only: the engine is imported after the first frame (see ``program_app``).
    from runtime.api import RuntimeApi
    from runtime.config import Config
    from runtime.models import Run

log = logging.getLogger(__name__)

DEFAULT_THEME = "agent-dusk"


@dataclass(frozen=True)
class Settings:
    """How the app looks and behaves; tests pass their own (fixed theme, ages hidden)."""

    workspace: Path
    theme: str | None = None
    hide_ages: bool = False
    """Hide relative times (snapshot tests: nothing on screen depends on the clock)."""
    remember_theme: bool = True
    """Save a theme chosen in the palette to the user config."""
    page_size: int = 50
    window: int = 100
    theme_dirs: tuple[Path, ...] = field(default_factory=lambda: (THEMES_DIR,))
    agent: str | None = None
    """``--agent``: the agent of new jobs (None: the configured default)."""
    open_job: str | None = None
    """``--resume JOB_ID``: the job shown at start."""
    open_run: str | None = None
    """``--resume RUN_ID``: the run shown at start (a sub-agent's too), in its job ``open_job``."""
    continue_last: bool = False
    """``--continue``: show the most recent job at start."""
    attach: bool = False
    """``--attach``: new jobs are queued for workers (``agent-tui worker``); this app watches
    and answers but executes nothing it creates."""
    stylesheet_cache: Path | None = None
    """Where the stylesheets parsed at one launch are kept for the next
    (``tui.stylesheet_cache``); None: parsed at each launch (tests)."""
    prompt_settle_seconds: float = 0.5
    """How long a prompt that docks takes text, not answers, from the keys (keys typed as it
    came are typing: ``tui.widgets._prompt_base``); 0: answers at once."""


QUIT_AGAIN_SECONDS = 2.0


QUIT_NOTE_IDS = 3
"""The runs a quit note names (``quit_note``); more are counted."""


def quit_note(run_ids: Sequence[str], *, command: str = "agent-tui") -> str | None:
    """What the terminal is told after a quit stopped ``run_ids`` (None: nothing was working):
    each as the command that resumes it, with the id's first 8 characters (the CLI takes any
    unique prefix), so it can be copied. ``command``: ``agent-tui`` as it must be typed
    (``tui._cli.settings.command_line``)."""
    if not run_ids:
        return None
    resumable = "stopped now, resumable next time"
    if len(run_ids) == 1:
        return (
            f"agent-tui: 1 run was still working; {resumable} (select it and press R, or"
            f" {command} retry {run_ids[0][:8]})."
        )
    lines = [
        f"agent-tui: {len(run_ids)} runs were still working; {resumable} (select one and press"
        " R, or use these commands):"
    ]
    lines.extend(f"  {command} retry {run_id[:8]}" for run_id in run_ids[:QUIT_NOTE_IDS])
    if len(run_ids) > QUIT_NOTE_IDS:
        lines.append(
            f"  and {len(run_ids) - QUIT_NOTE_IDS} more: {command} runs --state interrupted"
        )
    return "\n".join(lines)


def forms_note(run_ids: Sequence[str], *, command: str = "agent-tui") -> str | None:
    """What the terminal is told after a quit ended the forms MCP servers asked for in
    ``run_ids`` (None: there were none). A form lives in its server's session, which ends with
    agent-tui, so its run fails (``runtime.engine.leases``); a retry asks the model again from
    before the call that asked."""
    if not run_ids:
        return None
    if len(run_ids) == 1:
        return (
            "agent-tui: the form an MCP server asked for ended with its session, and its run"
            f" failed (select it and press R, or {command} retry {run_ids[0][:8]}, to go on)."
        )
    retries = ", ".join(f"{command} retry {run_id[:8]}" for run_id in run_ids[:QUIT_NOTE_IDS])
    more = f" and {len(run_ids) - QUIT_NOTE_IDS} more" if len(run_ids) > QUIT_NOTE_IDS else ""
    return (
        f"agent-tui: the forms MCP servers asked for in {len(run_ids)} runs ended with their"
        f" sessions, and those runs failed (R, or {retries}{more}, to go on)."
    )


def _home_relative(path: Path) -> str:
    """``path`` as people write it: ``~/…`` under the home folder."""
    try:
        return f"~/{path.relative_to(Path.home())}"
    except (ValueError, RuntimeError):  # not under it, or no home to speak of
        return str(path)


class AgentTuiApp(App[int]):
    TITLE = "agent-tui"

    BINDINGS: ClassVar[list[BindingType]] = APP_BINDINGS

    def __init__(self, runtime: RuntimeSource, settings: Settings) -> None:
        # ``runtime`` is an open Runtime, or an async callable that opens one in the app's own
        # event loop (sync snapshot tests and the screenshot script: App.run makes the loop).
        self._open_runtime: Callable[[], Awaitable[RuntimeApi]] | None = None
        self._open_after_first_frame: Callable[[AgentTuiApp], Awaitable[RuntimeApi]] | None = None
        self._held_input: list[events.Key | events.Paste] | None = []
        """Keys and pastes that arrived before the main screen could take them (mounted, with
        the runtime open), replayed once it can (``input_ready``): what is typed at once, while
        the app starts, is not lost."""
        self.runtime: RuntimeApi | None = None
        """The open runtime; None until it is opened (after the first frame, for the program)."""
        if isinstance(runtime, _AfterFirstFrame):
            self._open_after_first_frame = runtime.opener
        elif isinstance(runtime, _Opener):
            self._open_runtime = runtime
        else:
            self.runtime = runtime
            self._runtime_came(runtime)
        self._input_until = 0.0
        """Until when a person's input counts as waiting (``note_input``)."""
        self.settings = settings
        self.terminal_focused = True
        self._bridge_failures = 0
        self._theme_problems: list[str] = []
        self._start_variables: dict[str, str] | None = None
        """The stylesheet's variables as set before anything was styled (see refresh_css)."""
        self._last_ctrl_c = 0.0
        self._notices: list[Notification] = []
        """The notifications raised, oldest first, until they expire (``_make_room``)."""
        self.quit_note: str | None = None
        """Said on the terminal after the app closed (runs that were still working)."""
        self.exit_error: str | None = None
        """Why the app left by itself, said on the terminal: the runtime could not be opened
        after the first frame, or the database file turned out damaged (``_database_damaged``)."""
        self.provider_preload: asyncio.Future[None] | None = None
        """The default model's SDK being imported on a thread (done once the import ended; a failure
        is logged, not raised)."""
        super().__init__()
        self._stored_rules: StoredRules | None = None
        if settings.stylesheet_cache is not None:
            self._stored_rules = StoredRules.load(settings.stylesheet_cache)
            self.stylesheet = StoredStylesheet(
                variables=self.get_css_variables(), stored=self._stored_rules
            )
        themes, self._theme_problems = load_themes(settings.theme_dirs)
        for theme in themes:
            self.register_theme(theme)
        wanted = settings.theme or DEFAULT_THEME
        if wanted in self.available_themes:
            self._first_theme(wanted)
        else:
            self._theme_problems.append(f"theme {wanted!r} is not installed; using the default")
            self.theme = DEFAULT_THEME if DEFAULT_THEME in self.available_themes else "textual-dark"

    def _first_theme(self, name: str) -> None:
        """Start in theme ``name``. Set as ``self.theme = name`` is, its watcher has every
        stylesheet parsed and applied again, twice, after the first screen is styled (11-12 ms
        before the first frame; a bare app has none of it). Before anything is styled, the
        stylesheet can simply start with the theme's colours: the watcher's other work is the
        theme's classes (set here) and the filter that maps ANSI colours to the theme's, which
        only a theme with other ANSI colours, or a light one, needs (those take the long way)."""
        default = self.current_theme
        theme = self.get_theme(name)
        if theme is None or theme.dark != default.dark or theme.ansi != default.ansi:
            self.theme = name
            return
        self.set_reactive(App.theme, name)
        self.add_class(f"-theme-{name}", update=False)
        variables = self.get_css_variables()
        self.stylesheet.set_variables(variables)
        self._start_variables = variables

    def refresh_css(self, animate: bool = True) -> None:
        """Parse and apply every stylesheet again, unless asked first before the app is mounted,
        with the variables the stylesheet started with (``_first_theme``). Textual asks as it
        makes the start mode's screen (a new screen counts as behind the app's stylesheet):
        that reparse emptied the parse cache, so every sheet was parsed a third time as the
        screen's widgets added theirs, 9-10 ms before the first frame, for the same rules."""
        start, self._start_variables = self._start_variables, None
        if start is not None and start == self.get_css_variables():
            return
        super().refresh_css(animate)

    @property
    def open_runtime(self) -> RuntimeApi:
        """The runtime, for what only acts once it is open (screens fill themselves in
        ``MainScreen.runtime_opened``; keys typed before are held until then)."""
        if self.runtime is None:
            raise RuntimeError("the runtime is not open yet")
        return self.runtime

    def error_text(self, error: AgentTuiError) -> str:
        """A runtime error as this app shows it: the commands it names (``agent-tui retry
        ID``) with this database's ``--db``, or typed in a shell they would open another."""
        if self.runtime is None:
            return str(error)
        from tui._cli.settings import naming_the_database

        return naming_the_database(str(error), self.runtime.store.location)

    CSS_PATH = "screens/main.tcss"
    """The main screen's stylesheet, read with the app's own at start: as the screen's
    ``CSS_PATH`` it had every stylesheet parsed and applied again when the screen was first
    shown."""

    def get_default_screen(self) -> Screen[Any]:
        """The main screen is the default screen, not a mode's: a mode's first screen is
        composed and laid out inside Textual's start-up batch, whose frame is thrown away; the
        terminal then got part of the screen when the first resize came and the whole of it a
        frame-clock tick later. The default screen's first frame is written at once. (Keys
        typed before the screen is ready are held until the runtime opens: ``on_event``.)"""
        return MainScreen()

    def get_driver_class(self) -> type[Driver]:
        """Textual's terminal driver, except that on Linux and macOS what it reads is posted to
        the app a turn of the event loop sooner (``tui.input_driver``). A driver the person
        chose (``TEXTUAL_DRIVER``) is kept."""
        driver = super().get_driver_class()
        if sys.platform != "win32":
            from textual.drivers.linux_driver import LinuxDriver

            from tui.input_driver import KeysFirstDriver

            if driver is LinuxDriver:
                return KeysFirstDriver
        return driver

    async def on_load(self) -> None:
        if self._open_runtime is not None:
            self.runtime = await self._open_runtime()
            self._runtime_came(self.runtime)

    async def on_unmount(self) -> None:
        if self._stored_rules is not None:
            self._stored_rules.save()  # what was parsed since the first frame (a screen's CSS)
        if self._open_runtime is not None and self.runtime is not None:
            await self.runtime.close()

    def on_mount(self) -> None:
        self._start_variables = None  # from now on, every refresh_css is done
        for problem in self._theme_problems:
            self.notify(problem, title="Theme", severity="warning")
        self.theme_changed_signal.subscribe(self, self._theme_changed)
        if self._open_after_first_frame is None:
            _tune_gc()
        else:
            # After the first frame is on the terminal: open the runtime behind it.
            self.call_after_refresh(self._open_in_background)

    def _open_in_background(self) -> None:
        self.run_worker(
            self._open(), exit_on_error=False, group="open-runtime", name="open-runtime"
        )

    async def _open(self) -> None:
        assert self._open_after_first_frame is not None
        unsaved = self._stored_rules.unsaved() if self._stored_rules is not None else None
        if self._stored_rules is not None and unsaved is not None:
            # The first frame's stylesheets, for the next launch (a first launch, or the CSS
            # changed): kept now, should this one not end by quitting.
            await asyncio.to_thread(self._stored_rules.write, unsaved)
        try:
            self.runtime = await self._open_after_first_frame(self)
        except AgentTuiError as error:
            # Nothing to show without a database: leave, saying why on the terminal.
            self._leave(error)
            return
        finally:
            _tune_gc()  # collection back on (the program starts with it off), however it went
        self._runtime_came(self.runtime)
        if self.exit_error is not None:
            return  # found damaged while it opened
        main = self._main_screen()
        if main is not None and main.is_mounted:
            await main.runtime_opened()

    def _leave(self, error: AgentTuiError) -> None:
        """End the app with status 2, saying ``error`` on the terminal (one line) once it is
        gone; the first reason given is the one said."""
        if self.exit_error is None:
            self.exit_error = f"agent-tui: error: {error}"
        self.exit(2, return_code=2)

    def _runtime_came(self, runtime: RuntimeApi) -> None:
        """What the app asks of the runtime once it has it."""
        runtime.store.on_damaged(self._database_damaged)
        runtime.give_way_to_input(self.input_pending)

    def note_input(self) -> None:
        """A person's input arrived (called on the driver's input thread: one float written)."""
        self._input_until = time.monotonic() + INPUT_WAITS

    def input_pending(self) -> bool:
        """Whether input came in the last ``INPUT_WAITS`` seconds: the runs streaming in this
        process give the event loop up more often meanwhile, so it is taken and drawn sooner."""
        return self._input_until > time.monotonic()

    def _database_damaged(self, error: DatabaseCorrupt) -> None:
        """The store found the database file damaged, whichever read or write found it (it
        refuses every write from now on): leave as the CLI does, instead of showing an empty
        browser and one "database error" after another."""
        log.error("%s", error)
        self._leave(error)

    def input_ready(self) -> None:
        """The main screen can take keys now (mounted, the runtime open): what was typed before,
        while the app started or the database opened, comes now, in order."""
        held, self._held_input = self._held_input or [], None
        typed = _typed_text(held)
        main = self._main_screen()
        if typed is not None and main is not None:
            # Text goes into the box as typed. Replayed key by key, a line feed (a binding,
            # run once the key has gone round the widgets) landed after the letters typed
            # after it.
            text, entered = typed
            if text:
                main.composer.input.insert(text)
            if entered:
                self.post_message(events.Key("enter", "\r"))
            return
        for event in held:
            self.post_message(
                events.Key(event.key, event.character)
                if isinstance(event, events.Key)
                else events.Paste(event.text)
            )

    async def on_event(self, event: events.Event) -> None:
        held = self._held_input
        if (
            held is not None
            and isinstance(event, events.Key | events.Paste)
            and not event.is_forwarded
            and not (isinstance(event, events.Key) and event.key == "ctrl+q")
        ):
            held.append(event)  # the main screen cannot act on it yet
            return
        await super().on_event(event)

    # --- the bridge from runtime events --------------------------------------------------------
    def start_bridge(self, target: Screen[Any]) -> None:
        self._bridge_target = target
        self._pump_events(target)

    @work(exit_on_error=False, group="bridge", name="bridge")
    async def _pump_events(self, target: Screen[Any]) -> None:
        from tui.bridge import Bridge  # the runtime's events (pydantic): not for the first frame

        await Bridge(
            self.open_runtime, target, wants_live=getattr(target, "wants_live", None)
        ).pump()

    def _restart_bridge(self) -> None:
        self._pump_events(self._bridge_target)

    # --- errors never close the app ------------------------------------------------------------
    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        self.report_worker_failure(event)

    def report_worker_failure(self, event: Worker.StateChanged) -> None:
        """The one handler: a failed worker becomes a notification, never a crash. Screens
        forward their workers' state changes here (worker messages do not bubble)."""
        if event.state is not WorkerState.ERROR:
            return
        error = event.worker.error
        if event.worker.group == "bridge":
            self._bridge_failures += 1
            log.error("event stream failed", exc_info=error)
            if self._bridge_failures <= 5:
                self.notify(f"Live updates stopped ({error}); reconnecting.", severity="warning")
                self.set_timer(0.5 * self._bridge_failures, self._restart_bridge)
            else:
                self.notify(f"Live updates are off: {error}", severity="error")
            return
        if isinstance(error, AgentTuiError):
            self.notify(
                self.error_text(error),
                title=error.code.replace("_", " "),
                severity="error",
                markup=False,  # a refusal names commands with [OPTIONAL] words
            )
        else:
            log.error("worker %s failed", event.worker.name, exc_info=error)
            self.notify(f"{type(error).__name__}: {error}", title="Error", severity="error")

    # --- focus of the terminal -----------------------------------------------------------------
    def on_app_focus(self, event: AppFocus) -> None:
        self.terminal_focused = True

    def on_app_blur(self, event: AppBlur) -> None:
        self.terminal_focused = False

    # --- themes --------------------------------------------------------------------------------
    def _theme_changed(self, theme: Theme) -> None:
        if not self.settings.remember_theme:
            return
        try:
            from runtime.config import save_user_setting

            saved_in = save_user_setting("defaults", "theme", theme.name)
        except (AgentTuiError, OSError, ValueError) as error:
            self.notify(f"Could not remember the theme: {error}", severity="warning")
            return
        # Writing a file the person owns is said, with the file, so it is no surprise later.
        from runtime.locations import CONFIG_FILE_NAME, peek_file_default

        workspace_file = self.settings.workspace / CONFIG_FILE_NAME
        here = peek_file_default(workspace_file, "theme")
        if here is not None and here != theme.name:
            # A trial chose a theme, read "saved", and came back to the folder's own.
            self.notify(
                f"Theme {theme.name} saved in {_home_relative(saved_in)}, but this folder's"
                f" {CONFIG_FILE_NAME} sets theme = {here!r}, which wins here next time.",
                title="Theme",
                severity="warning",
            )
            return
        self.notify(f"Theme {theme.name} saved in {_home_relative(saved_in)}", title="Theme")

    # --- quitting ------------------------------------------------------------------------------
    def _main_screen(self) -> MainScreen | None:
        for screen in self.screen_stack:
            if isinstance(screen, MainScreen):
                return screen
        return None

    async def action_copy_or_interrupt(self) -> None:
        """ctrl+c: copy a selection if there is one, else interrupt the run on screen; a second
        ctrl+c within 2 s quits."""
        now = time.monotonic()
        if now - self._last_ctrl_c <= QUIT_AGAIN_SECONDS:
            self._last_ctrl_c = 0.0
            await self.action_quit()
            return
        self._last_ctrl_c = now
        selected = self._selected_text()
        if selected:
            self.copy_to_clipboard(selected)
            self.notify("Copied. (ctrl+c again within 2 s quits)", timeout=2)
            return
        main = self._main_screen()
        if main is not None and self.screen is main and main.interrupt():
            self.notify("Interrupting… (ctrl+c again within 2 s quits)", timeout=2)
            return
        self.notify("Press ctrl+c again to quit.", timeout=2)

    def _selected_text(self) -> str | None:
        from textual.widgets import Input, TextArea

        focused = self.focused
        if isinstance(focused, TextArea | Input) and focused.selected_text:
            return focused.selected_text
        try:
            return self.screen.get_selected_text() or None
        except Exception:  # a selection over widgets that cannot give text: nothing to copy
            return None

    async def action_quit(self) -> None:
        """Quit: save the draft, and say which runs were still working (they stay resumable)."""
        main = self._main_screen()
        try:
            if main is not None:
                await main.save_drafts_now()
            working = await self._working_runs()
            forms = await self._forms_held()
        except AgentTuiError as error:
            log.warning("before quitting: %s", error)
            working, forms = [], []
        if (working or forms) and self.runtime is not None:
            from tui._cli.settings import command_line

            command = command_line(self.runtime.store.location)
            notes = [
                quit_note([run.id for run in working], command=command),
                forms_note(forms, command=command),
            ]
            self.quit_note = "\n".join(note for note in notes if note)
        else:
            self.quit_note = None
        self.exit(0)

    async def _forms_held(self) -> list[str]:
        """The runs this process's MCP sessions hold a form for (an elicitation), oldest
        first: the forms end with the sessions as the app closes (a trial typed into one,
        quit, and was not told it was gone)."""
        from runtime.models import InputKind

        runtime = self.runtime
        if runtime is None:
            return []
        held: list[str] = []
        for request in await runtime.inbox(limit=1000):
            if request.kind is not InputKind.ELICITATION or request.run_id in held:
                continue
            if (await runtime.get_run(request.run_id)).owner_id == runtime.owner_id:
                held.append(request.run_id)
        return held

    async def _working_runs(self) -> list[Run]:
        """The runs this process works on, newest first, less those whose parent is one of them
        (retrying the parent takes its delegated runs up again)."""
        from runtime.models import RunState

        runtime = self.runtime
        if runtime is None:
            return []
        owner = runtime.owner_id
        working: list[Run] = []
        for state in (RunState.RUNNING, RunState.QUEUED):
            page = await runtime.list_runs(limit=1000, state=state)
            working.extend(run for run in page.items if run.owner_id == owner)
        ids = {run.id for run in working}
        working.sort(key=lambda run: run.created_at, reverse=True)
        return [run for run in working if run.parent_run_id not in ids]

    # --- notifications -------------------------------------------------------------------------
    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Every notice shows its words as written, never read as markup (``markup`` is
        ignored: a widget's ``notify`` passes Textual's default, True). A notice quotes what is
        not ours: a job's title, a typed name, a path, an error's words. Read as markup, "No
        theme '[/usr]'" raised MarkupError as its toast was drawn and the app quit, and
        "site[b]" read "site". No notice of ours is styled with markup."""
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=False)

    @on(Notify)
    def _make_room(self, event: Notify) -> None:
        """At most ``MAX_TOASTS`` notifications on screen: a new one takes the place of the
        oldest, expired now (handled before Textual's own handler, which adds the new one,
        drops the expired and removes their toasts). Seven at 80x24 reached over the
        composer's field, and from the command palette's foot up over its input (a new-user
        trial); the newest are the ones to read."""
        notices = [notice for notice in self._notices if not notice.has_expired]
        for oldest in notices[: max(0, len(notices) - MAX_TOASTS + 1)]:
            oldest.timeout = 0.0
        self._notices = [*notices[-(MAX_TOASTS - 1) :], event.notification]

    def expire_toast(self, holder: Widget) -> None:
        """The notification a toast shows goes now, and the toast (``holder``: Textual's
        container of one toast, named after its notification's identity) with it."""
        for notice in self._notices:
            if holder.id == f"--textual-toast-{notice.identity}":
                notice.timeout = 0.0  # expired: not shown again
        holder.remove()

    @on(events.DeliveryComplete)
    def _screenshot_saved(self, event: events.DeliveryComplete) -> None:
        """Textual's own notice of a saved screenshot styles the path with markup, which
        ``notify`` shows as written: this one says it plainly, in its place."""
        if event.name == "screenshot":
            event.prevent_default()  # Textual's handler (the class's base) is not called
            where = "" if event.path is None else f" to {str(event.path)!r}"
            self.notify(f"Saved screenshot{where}", title="Screenshot")

    # --- help and the command palette ----------------------------------------------------------
    def action_help(self) -> None:
        from tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            main = self._main_screen()
            self.push_screen(HelpScreen(main.workspace_commands() if main is not None else ()))

    def deliver_screenshot(
        self,
        filename: str | None = None,
        path: str | None = None,
        time_format: str | None = None,
    ) -> str | None:
        """The palette's "Screenshot": an SVG of the screen into the workspace's exports folder,
        beside the jobs exported there, and the notice names the file. Textual's own place,
        ~/Downloads, is missing on many a server or container, and then all it said was
        "Failed to save screenshot" (a new-user trial)."""
        from runtime.fileio import write_text_atomically
        from runtime.locations import EXPORTS_IGNORED, exports_dir

        if path is None:
            folder = exports_dir(self.settings.workspace)
            try:
                folder.mkdir(parents=True, exist_ok=True)
                if not (folder / ".gitignore").exists():
                    write_text_atomically(folder / ".gitignore", EXPORTS_IGNORED)
            except OSError as error:
                self.notify(f"Not saved: {error}", title="Screenshot", severity="error")
                return None
            path = str(folder)
        return super().deliver_screenshot(filename, path, time_format)

    def _main_action(self, name: str) -> None:
        for screen in self.screen_stack:
            if isinstance(screen, MainScreen):
                getattr(screen, f"action_{name}")()
                return

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        for command in super().get_system_commands(screen):
            # Textual's "Keys" panel lists the text box's own keys: F1's help lists ours.
            if command.title != "Keys":
                yield command
        # Every action, and every command of the composer's / menu (a new-user trial looked
        # here for /context and /compact in vain). Textual's own give /theme and /quit.
        commands = [
            ("Composer", "Focus the composer (a new job or a follow-up, as it says)", "compose"),
            (
                "New job",
                "An empty conversation; the composer addresses a new job (/new)",
                "new_job",
            ),
            ("Inbox", "Runs waiting for your input", "inbox"),
            ("Cancel run", "Cancel the run on screen", "cancel_run"),
            ("Fork", "Fork a new job from the selected checkpoint", "fork"),
            ("Retry", "Retry the selected failed or interrupted run", "retry"),
            ("Parent run", "Open the run that delegated this one", "parent_run"),
            ("Export job", "Write the job as Markdown into .agent-tui/exports/", "export"),
            ("Archive job", "Hide the selected job (u brings it back)", "archive_job"),
            ("Undo archive", "Bring back the job archived last", "unarchive_last"),
            ("Filter by state", "Cycle the browser's state filter", "cycle_filter"),
            ("Search messages", "Full-text search over every message", "search"),
            ("Browser", "Focus the job browser", "focus_browser"),
            ("Browser width", "Normal, wide, narrow or hidden", "cycle_browser"),
            ("Conversation", "Focus the conversation", "focus_conversation"),
            ("Next tool call", "Focus the next tool block in the conversation", "next_tool"),
            ("Previous tool call", "Focus the previous tool block", "previous_tool"),
            (
                "Thinking",
                "Open / close the thinking (and a skill's instructions) in view",
                "thinking",
            ),
            (
                "Compact",
                "Summarise this job's history so far; originals are kept (/compact)",
                "compact",
            ),
            (
                "Rewind files",
                "Put back the files this job's agent wrote, to the checkpoint under the cursor"
                " or the job's start (/rewind)",
                "rewind",
            ),
            (
                "Context",
                "Instructions, skills, hooks, servers, agents in effect (/context)",
                "context",
            ),
        ]
        main = next((s for s in self.screen_stack if isinstance(s, MainScreen)), None)
        for title, help_text, action in commands:
            if main is not None and not main.offers(action):
                continue  # a new-user trial was offered "Cancel run" on a completed run
            yield SystemCommand(title, help_text, lambda a=action: self._main_action(a))
        if main is not None:
            for name in ("model", "agent"):
                yield SystemCommand(
                    name.title(),
                    f"The {name} of the next run in this job: /{name} in the box, then its name",
                    lambda n=name, screen=main: screen.type_command(n),
                )
        yield SystemCommand(
            "Permissions", "Every allow / ask / deny rule, revocable", self.action_permissions
        )
        yield SystemCommand("Help", "List every key", self.action_help)
        yield from self._extension_system_commands()

    def _extension_system_commands(self) -> Iterable[SystemCommand]:
        """Each skill and custom command of the workspace: choosing one types it into the
        composer, ready for its arguments."""
        main = next((s for s in self.screen_stack if isinstance(s, MainScreen)), None)
        if main is None:
            return
        for command in main.extension_commands.slash_commands():
            kind = "Skill" if command.help.startswith("skill: ") else "Command"
            # The palette reads a command's help as markup: a file's "Review the [WIP] change"
            # lost its "[WIP]", and with a "[/usr]" in it the palette listed nothing. Every
            # bracket is escaped (``textual.markup.escape`` leaves "[WIP]", a tag to Textual).
            help_text = command.help.removeprefix("skill: ").replace("[", "\\[")

            def type_it(screen: MainScreen = main, name: str = command.name) -> None:
                screen.composer.input.value = f"/{name} "
                screen.composer.focus_input()

            yield SystemCommand(f"{kind} /{command.name}", help_text, type_it)

    def action_permissions(self) -> None:
        from tui.screens.permissions import PermissionsScreen

        if not isinstance(self.screen, PermissionsScreen):
            self.push_screen(PermissionsScreen(self.settings.workspace))


GC_GEN0_THRESHOLD = 5000
GC_GEN1_EVERY = 3
GC_GEN2_EVERY = 33


def _tune_gc() -> None:
    """Keep garbage collection out of the way of streaming (DESIGN §13: stalls ≤ 50 ms).

    Everything alive by now (modules, the runtime, the app's first screen) lives as long as the
    app, so it is frozen out of full collections, which would otherwise scan it all. And the
    young generation is collected every 5,000 allocations instead of 700: Textual's per-frame
    objects (strips, layout maps) then die before they are promoted, instead of piling into the
    old generation and triggering a full collection (50-150 ms here) a few times per big stream.

    The middle generation is collected after every GC_GEN1_EVERY young collections instead of
    10: the objects that survive the young one (a Strip carries seven caches) made each of those
    collections 20-55 ms with 10 runs streaming, a pause a keypress waited for; three times as
    often, each is a third of that (≤ 16 ms), for the same total work (every survivor is
    scanned there once either way). The full collection keeps its cadence: after
    GC_GEN2_EVERY middle ones, 99 young ones as before (and only once enough has piled up).

    The program starts with collection off (``tui.cli``); it is turned back on here.
    """
    gc.freeze()
    gc.enable()
    threshold0, _, _ = gc.get_threshold()
    if 0 < threshold0 < GC_GEN0_THRESHOLD:
        gc.set_threshold(GC_GEN0_THRESHOLD, GC_GEN1_EVERY, GC_GEN2_EVERY)


def _typed_text(held: list[events.Key | events.Paste]) -> tuple[str, bool] | None:
    """What was typed while the app started, when it is all text (printable keys, line feeds,
    pastes), and whether an Enter ends it; None when other keys are among it (they are
    replayed as they came). A line feed that ends it is that Enter: typed before the terminal
    left its line mode, whose ICRNL turns a carriage return into a line feed, the Enter of a
    task typed at once (``agent-tui``, then typing) reads as ctrl+J, a new line, and the task
    sat unsent."""
    parts: list[str] = []
    entered = False
    for index, event in enumerate(held):
        last = index == len(held) - 1
        if isinstance(event, events.Paste):
            parts.append(event.text)
        elif event.key in ("enter", "ctrl+j") and last:
            entered = True
        elif event.key == "ctrl+j":
            parts.append("\n")
        elif event.is_printable and event.character is not None:
            parts.append(event.character)
        else:
            return None
    return "".join(parts), entered


def create_app(runtime: RuntimeSource, settings: Settings) -> AgentTuiApp:
    """The one factory: the program and every test build the app here."""
    return AgentTuiApp(runtime, settings)


@dataclass(frozen=True)
class _AfterFirstFrame:
    """An opener the app calls after its first frame (the program's start-up)."""

    opener: Callable[[AgentTuiApp], Awaitable[RuntimeApi]]


@runtime_checkable
class _Opener(Protocol):
    """An async callable that opens the runtime in the app's own event loop."""

    def __call__(self) -> Awaitable[RuntimeApi]: ...


RuntimeSource: TypeAlias = "RuntimeApi | _Opener | _AfterFirstFrame"
"""What ``create_app`` takes: an open runtime, an opener, or the program's after-first-frame
opener."""


def program_app(db_path: Path | str, workspace: Path, launch: Launch | None = None) -> AgentTuiApp:
    """The app as the program runs it: it reads its configuration and opens its runtime
    itself, after the first frame. Only the theme is read first, with the standard library
    (``peek_default``); a configuration with a problem ends the app after that frame, with the
    ConfigError naming the file on the terminal and exit status 2, as a database that cannot be
    opened does. ``db_path``: a SQLite file, or a ``postgresql://`` URL as a string."""
    from runtime.locations import peek_default

    launch = launch or Launch()

    async def opener(app: AgentTuiApp) -> RuntimeApi:
        await _show_first_page(app, db_path)
        # The configuration (pydantic), the engine, store, providers and MCP: imported here,
        # after the first frame, in a thread, so the event loop (and Textual's writer thread)
        # keep drawing and reading keys.
        await asyncio.to_thread(_import_engine)
        from runtime.config import load_config

        config = await asyncio.to_thread(load_config, workspace)
        # What the command line asked for is checked before the runtime opens: a typo must not
        # recover (or, with auto_resume, resume) runs only to close again.
        if launch.agent is not None:
            config.check_agent(launch.agent)
        if launch.model is not None:
            from runtime.model_refs import check_reference

            check_reference(launch.model)  # as an unknown agent: refused now, not at the first send
        if config.mcp_servers:
            # The MCP SDK (a second or more to import): Runtime.open builds the servers'
            # manager on the event loop, which would freeze the screen meanwhile.
            await asyncio.to_thread(_import_mcp)
        from runtime.api import Runtime
        from runtime.compose import open_store

        store = open_store(db_path)
        runtime = await Runtime.open(
            db_path=db_path,
            workspace=workspace,
            config=config,
            store=store,
            model=launch.model,
        )
        named_runs: list[str] = []
        try:
            open_job = None
            if launch.resume is not None:
                from tui._cli.ids import resolve_id

                open_job = await resolve_id(
                    runtime.store,
                    "job",
                    launch.resume,
                    db_path=db_path,
                    named_run=named_runs.append,
                )
        except AgentTuiError:
            await runtime.close()
            raise
        # A run's id opens that run, not its job's latest: a sub-agent's conversation asked
        # for by its id showed the root run's instead.
        open_run = named_runs[0] if named_runs else None
        app.settings = replace(app.settings, open_job=open_job, open_run=open_run)
        if launch.agent is None:
            _say_unusable_agent_model(app, config, workspace)
        # The default model's SDK, imported now on a thread, not by the first task on the
        # event loop (the anthropic SDK: a second or two, with the screen frozen).
        from runtime.providers.registry import preload_provider_soon

        app.provider_preload = preload_provider_soon(runtime.default_model)
        return runtime

    settings = Settings(
        workspace=workspace,
        theme=peek_default(workspace, "theme"),
        stylesheet_cache=stylesheet_cache_path(),
        agent=launch.agent,
        continue_last=launch.continue_last,
        attach=launch.attach,
    )
    return create_app(_AfterFirstFrame(opener), settings)


MAX_TOASTS = 3
"""Notifications on screen at once (``AgentTuiApp._make_room``): three fit over a prompt at
80x24, and under the command palette's input."""

LASTING_NOTICE_SECONDS = 30.0
"""How long a notification about the configuration stays: long enough to read its file, line
and key. Not for the whole session: Textual's toasts go only at a click, and the keyboard has
no way to them (a review); a new job with that agent is refused in the same words."""


def _say_unusable_agent_model(app: AgentTuiApp, config: Config, workspace: Path) -> None:
    """The agent of new jobs (``[defaults] agent``) with a model that cannot be used: said
    once the runtime is open, naming the file, line and key, as ``--agent`` with that agent is
    refused at launch. The app stays: follow-ups, the browser and other agents still work (it
    was learnt only from "Not sent" on the first task)."""
    name = config.defaults.agent
    try:
        config.check_agent_model(name, workspace)
    except ConfigError as error:
        app.notify(
            f"New jobs use agent {name!r} ([defaults] agent), whose model cannot be used: {error}",
            title="Configuration",
            severity="error",
            timeout=LASTING_NOTICE_SECONDS,
            markup=False,
        )


def _import_mcp() -> None:
    import runtime.mcp.manager  # noqa: F401


def _current_database(db_path: Path | str) -> bool:
    """Whether ``db_path`` is an SQLite file of this schema version (refused or not: the full
    path says why), after importing its store: read at once, nothing set up or migrated."""
    from runtime.locations import is_postgres_url
    from runtime.store.checks import check_database_file
    from runtime.store.schema_latest import LATEST_VERSION

    if is_postgres_url(db_path):
        return False
    import runtime.store.sqlite  # noqa: F401 - the store, before the rest of the engine

    try:
        return check_database_file(Path(db_path)) == LATEST_VERSION
    except AgentTuiError:
        return False


async def _show_first_page(app: AgentTuiApp, db_path: Path | str) -> None:
    """The browser's first page, read as soon as the store is imported, before the rest of
    the engine (as long again to import) and before the runtime opens: with 100,000 jobs it
    came 140-150 ms sooner, ~410 ms after the spawn against ~560 (``pty_bench first-frame``).
    Read through SQLite's read-only mode (``SqliteStore(peek=True)``), and only from a
    database of the current schema: nothing is set up, migrated, recovered or written before
    the configuration and the command line were checked. The runtime's own first page
    replaces it (a dead process's run reads as interrupted once recovered); anything wrong
    here is left to that path to say."""
    try:
        current = await asyncio.to_thread(_current_database, db_path)
    except Exception:  # as below: left to the runtime's path
        log.info("the first page was not read ahead of the runtime", exc_info=True)
        return
    if not current:
        return
    from runtime.store.sqlite import SqliteStore

    main = app._main_screen()
    if main is None:
        return
    store = SqliteStore(Path(db_path), peek=True)
    try:
        await store.open()
        page = await store.list_jobs(limit=app.settings.page_size)
    except Exception:  # a look ahead only: the runtime's own path opens and says what is wrong
        log.info("the first page was not read ahead of the runtime", exc_info=True)
        return
    finally:
        await store.close()
    main.show_first_page(page.items)


def _import_engine() -> None:
    # With what the first task used to import on the event loop between
    # its Enter and its run on screen (a few milliseconds).
    import runtime.api
    import runtime.config
    import runtime.engine.hook_files
    import runtime.mcp.workspaces
    import runtime.rewind
    import runtime.store.sqlite
    import runtime.tools.builtin
    import runtime.transcript
    import runtime.transcript_pages  # noqa: F401

    # The composer's @-mentions and attachments (pathspec, for .gitignore rules): the first
    # Enter reads them.
    import tui.file_index

    # Not the engine, but not for the first frame either: the message widgets bring Markdown
    # (markdown-it, Rich's Markdown), needed by the first run opened, so loaded here, off the
    # event loop, rather than on the first Enter.
    import tui.widgets.message_view  # noqa: F401


INPUT_WAITS = 0.05
"""Seconds a key (a paste, a click) counts as waiting to be drawn: in the keys benchmark, while
ten runs streamed flat out, nearly every key was echoed within that (median 9 ms)."""

UI_SWITCH_INTERVAL = 0.001
"""Seconds a thread that wants the GIL waits before the running one must hand it over, while the
app runs (the interpreter's default is 0.005).

Textual reads keys on one thread and writes frames on another, and each needs the GIL back after
every system call: after its ``select``, and after each ``write`` and ``flush`` of a frame.
While runs stream, the event loop's thread holds the GIL all the time, so each of those waits
lasted the whole interval: a frame's write waited about three of them. Measured with 10 runs
streaming flat out (``bench/pty_bench.py keys``): a key's frame waited a median 17 ms between
being queued and reaching the terminal at 5 ms, 2.7 ms at 1 ms; the echo of a key, median 34-36
ms -> 21-22 ms."""


@contextlib.contextmanager
def responsive_threads(interval: float = UI_SWITCH_INTERVAL) -> Iterator[None]:
    """The interpreter's switch interval at ``interval`` while the app runs, restored after."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(interval)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


async def _run(db_path: Path | str, workspace: Path, launch: Launch) -> int:
    try:
        app = program_app(db_path, workspace, launch)
    except AgentTuiError as error:
        print(f"agent-tui: error: {error}", file=sys.stderr)
        return 2
    stopped_by: list[int] = []
    try:
        with responsive_threads(), _quitting_on_stop_signals(app, stopped_by):
            await app.run_async()
    finally:
        if app.runtime is not None:
            await app.runtime.close()
    if app.exit_error:
        print(app.exit_error, file=sys.stderr)
    if app.quit_note:
        print(app.quit_note, file=sys.stderr)
    if stopped_by:
        return 128 + stopped_by[0]  # what a shell reports for a process the signal ended
    return app.return_code or 0


@contextlib.contextmanager
def _quitting_on_stop_signals(app: AgentTuiApp, stopped_by: list[int]) -> Iterator[None]:
    """SIGTERM (``kill PID``) and SIGHUP (the terminal closed) quit ``app`` as ctrl+q does,
    saving drafts and releasing its runs, and are noted in ``stopped_by``; a second one ends
    the process at once. Left to its default action SIGTERM ended the process on the spot: the
    terminal stayed in the app's alternate screen with mouse reporting on and no cursor, and its
    runs read "running (its process is gone)" until another agent-tui recovered them (a trial);
    SIGHUP did the same to the runs."""
    import signal

    from tui.hangup import hangup_ignored, let_go_of_a_closed_terminal

    loop = asyncio.get_running_loop()

    def stop(signum: signal.Signals) -> None:
        if stopped_by:  # asked again while quitting: as if nothing handled it
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)
            return
        stopped_by.append(signum)
        app.call_later(app.action_quit)

    def hung_up(signum: int, frame: object) -> None:
        # At once, not from the event loop as SIGTERM is: the SIGCONT that comes with a
        # hangup makes Textual start its output again, and on the closed terminal that
        # output died at its first write and the quit waited on it for ever (tried in tmux).
        let_go_of_a_closed_terminal()
        loop.call_soon_threadsafe(stop, signal.SIGHUP)

    try:
        loop.add_signal_handler(signal.SIGTERM, stop, signal.SIGTERM)
    except (NotImplementedError, RuntimeError):  # pragma: no cover - not on Unix
        yield
        return
    before = None if hangup_ignored() else signal.signal(signal.SIGHUP, hung_up)
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
        if before is not None:
            signal.signal(signal.SIGHUP, before)


@dataclass(frozen=True)
class Launch:
    """What the command line asks of the TUI at start."""

    model: str | None = None
    agent: str | None = None
    resume: str | None = None
    continue_last: bool = False
    attach: bool = False


def run_app(*, db_path: Path | str, workspace: Path, launch: Launch | None = None) -> int:
    """Open the runtime on ``db_path`` with ``workspace`` and run the app; the exit status."""
    location = db_path if isinstance(db_path, str) else Path(db_path)
    return asyncio.run(_run(location, Path(workspace).resolve(), launch or Launch()))
