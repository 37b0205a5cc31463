"""The one composition root: ``create_app(runtime, settings)`` builds the app for the program and
for every test; ``run_app`` opens the runtime on a database and runs it."""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.events import AppBlur, AppFocus
from textual.screen import Screen
from textual.theme import Theme
from textual.worker import Worker, WorkerState

from runtime.errors import AgentTuiError
from themes import THEMES_DIR, load_themes
from tui.bridge import Bridge
from tui.screens.main import MainScreen

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


class AgentTuiApp(App[int]):
    TITLE = "agent-tui"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+q", "quit", "Quit", priority=True),
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
        Binding("f1", "help", "Help", priority=True),
        Binding("question_mark", "help", "Help", show=False),
    ]

    def __init__(self, runtime: Any, settings: Settings) -> None:
        # ``runtime`` is an open Runtime, or an async callable that opens one in the app's own
        # event loop (sync snapshot tests and the screenshot script: App.run makes the loop).
        self._open_runtime: Callable[[], Awaitable[Any]] | None = None
        if callable(runtime) and not hasattr(runtime, "start"):
            self._open_runtime = runtime
            runtime = None
        self.runtime = runtime
        self.settings = settings
        self.terminal_focused = True
        self._bridge_failures = 0
        self._theme_problems: list[str] = []
        super().__init__()
        themes, self._theme_problems = load_themes(settings.theme_dirs)
        for theme in themes:
            self.register_theme(theme)
        wanted = settings.theme or DEFAULT_THEME
        if wanted in self.available_themes:
            self.theme = wanted
        else:
            self._theme_problems.append(f"theme {wanted!r} is not installed; using the default")
            self.theme = DEFAULT_THEME if DEFAULT_THEME in self.available_themes else "textual-dark"

    DEFAULT_MODE = "main"
    MODES: ClassVar[dict[str, Any]] = {"main": MainScreen}

    async def on_load(self) -> None:
        if self._open_runtime is not None:
            self.runtime = await self._open_runtime()

    async def on_unmount(self) -> None:
        if self._open_runtime is not None and self.runtime is not None:
            await self.runtime.close()

    def on_mount(self) -> None:
        _tune_gc()
        for problem in self._theme_problems:
            self.notify(problem, title="Theme", severity="warning")
        self.theme_changed_signal.subscribe(self, self._theme_changed)

    # --- the bridge from runtime events --------------------------------------------------------
    def start_bridge(self, target: Screen[Any]) -> None:
        self._bridge_target = target
        self._pump_events(target)

    @work(exit_on_error=False, group="bridge", name="bridge")
    async def _pump_events(self, target: Screen[Any]) -> None:
        await Bridge(self.runtime, target).pump()

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
            self.notify(str(error), title=error.code.replace("_", " "), severity="error")
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
            from runtime import config

            save = getattr(config, "save_user_setting", None)
            if save is None:
                return
            save("defaults", "theme", theme.name)
        except (AgentTuiError, OSError, ValueError) as error:
            self.notify(f"Could not remember the theme: {error}", severity="warning")

    # --- help and the command palette ----------------------------------------------------------
    def action_help(self) -> None:
        from tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def _main_action(self, name: str) -> None:
        for screen in self.screen_stack:
            if isinstance(screen, MainScreen):
                getattr(screen, f"action_{name}")()
                return

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        commands = [
            ("New job / follow-up", "Focus the composer", "compose"),
            ("Inbox", "Runs waiting for your input", "inbox"),
            ("Cancel run", "Cancel the selected run", "cancel_run"),
            ("Fork", "Fork a new job from the selected checkpoint", "fork"),
            ("Retry", "Retry the selected failed or interrupted run", "retry"),
            ("Export job", "Write the job as Markdown into the workspace", "export"),
            ("Filter by state", "Cycle the browser's state filter", "cycle_filter"),
            ("Search messages", "Full-text search over every message", "search"),
            ("Browser", "Focus the job browser", "focus_browser"),
        ]
        for title, help_text, action in commands:
            yield SystemCommand(title, help_text, lambda a=action: self._main_action(a))
        yield SystemCommand(
            "Permissions", "Every allow / ask / deny rule, revocable", self.action_permissions
        )
        yield SystemCommand("Help", "List every key", self.action_help)

    def action_permissions(self) -> None:
        from tui.screens.permissions import PermissionsScreen

        if not isinstance(self.screen, PermissionsScreen):
            self.push_screen(PermissionsScreen(self.settings.workspace))


GC_GEN0_THRESHOLD = 5000


def _tune_gc() -> None:
    """Keep garbage collection out of the way of streaming (DESIGN §13: stalls ≤ 50 ms).

    Everything alive by now (modules, the runtime, the app's first screen) lives as long as the
    app, so it is frozen out of full collections, which would otherwise scan it all. And the
    young generation is collected every 5,000 allocations instead of 700: Textual's per-frame
    objects (strips, layout maps) then die before they are promoted, instead of piling into the
    old generation and triggering a full collection (50-150 ms here) a few times per big stream.
    """
    gc.freeze()
    threshold0, threshold1, threshold2 = gc.get_threshold()
    if 0 < threshold0 < GC_GEN0_THRESHOLD:
        gc.set_threshold(GC_GEN0_THRESHOLD, threshold1, threshold2)


def create_app(runtime: Any, settings: Settings) -> AgentTuiApp:
    """The one factory: the program and every test build the app here."""
    return AgentTuiApp(runtime, settings)


def _configured_theme(runtime: Any) -> str | None:
    config = getattr(runtime, "config", None)
    defaults = getattr(config, "defaults", None)
    theme = getattr(defaults, "theme", None)
    return theme if isinstance(theme, str) else None


async def _run(db_path: Path, workspace: Path) -> int:
    from runtime.api import Runtime
    from runtime.rewind import with_file_history
    from runtime.store.sqlite import SqliteStore
    from runtime.tools.builtin import builtin_tools

    # write_file / edit_file record the content they replace, for rewinding files.
    store = SqliteStore(db_path)
    try:
        runtime = await Runtime.open(
            db_path=db_path,
            workspace=workspace,
            store=store,
            tools=with_file_history(builtin_tools(), store),
        )
    except AgentTuiError as error:
        print(f"agent-tui: {error}", file=sys.stderr)
        return 2
    try:
        app = create_app(runtime, Settings(workspace=workspace, theme=_configured_theme(runtime)))
        await app.run_async()
        return app.return_code or 0
    finally:
        await runtime.close()


def run_app(*, db_path: Path, workspace: Path) -> int:
    """Open the runtime on ``db_path`` with ``workspace`` and run the app; the exit status."""
    return asyncio.run(_run(Path(db_path), Path(workspace).resolve()))
