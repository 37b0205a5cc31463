"""Helpers for the TUI tests: a real Runtime on a temp SQLite file with the instant demo model,
and the app built by the one factory with a fixed theme and ages hidden."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.app import App
from textual.pilot import Pilot
from textual.screen import Screen
from textual.widget import Widget

from runtime.api import Runtime
from runtime.config import Config
from runtime.kinds import RunState
from runtime.models import InputRequest, Run
from tui.app import AgentTuiApp, Settings, create_app
from tui.screens.main import MainScreen

SIZE = (140, 44)


async def open_runtime(
    db_path: Path | str,
    workspace: Path,
    *,
    model: str = "demo:instant",
    chunk_delay: float | None = None,
) -> Runtime:
    """``chunk_delay``: the demo model streaming a piece every so many seconds (``model`` is
    then ``demo``)."""
    if chunk_delay is None:
        return await Runtime.open(
            db_path=db_path, workspace=workspace, config=Config(), model=model
        )
    from runtime.providers.demo import DemoProvider

    return await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=Config(),
        model="demo",
        providers=lambda reference: DemoProvider(chunk_delay=chunk_delay),
    )


def make_app(runtime: Runtime, workspace: Path, **overrides: object) -> AgentTuiApp:
    settings = Settings(
        workspace=workspace,
        theme=str(overrides.pop("theme", "agent-dusk")),
        hide_ages=bool(overrides.pop("hide_ages", True)),
        remember_theme=bool(overrides.pop("remember_theme", False)),
        # Prompts answer at once: a Pilot presses a prompt's key the moment it docks, as no
        # person does (tests/tui/test_prompt_settles.py keeps the real wait).
        prompt_settle_seconds=float(overrides.pop("prompt_settle_seconds", 0.0)),  # type: ignore[arg-type]
        **overrides,  # type: ignore[arg-type]
    )
    return create_app(runtime, settings)


async def wait_until(
    pilot: Pilot[object], condition: Callable[[], object], *, timeout: float = 45.0
) -> None:
    """Let the app run until ``condition()`` holds; fail after ``timeout`` seconds (generous:
    with both cores busy a new job took more than 15 s to reach the browser)."""
    async with asyncio.timeout(timeout):
        while not condition():
            await pilot.pause(0.02)


def screen_text(app: AgentTuiApp) -> str:
    """Everything on screen as plain text (what a person reads)."""
    from textual.widgets import Static

    parts = []
    for widget in app.screen.query("*"):
        if isinstance(widget, Static) and widget.display:
            parts.append(str(widget.render()))
    return "\n".join(parts)


def notifications(app: AgentTuiApp) -> list[str]:
    return [f"{n.title}: {n.message}" for n in app._notifications]


async def finish_run(runtime: Runtime, run_id: str) -> None:
    """Answer every prompt the demo model asks (first option, allow once) until the run ends."""
    from runtime.models import InputKind

    while True:
        boundary = await runtime.wait(run_id, timeout=10)
        request = boundary.request
        if request is None:
            return
        if request.kind is InputKind.QUESTION:
            await runtime.respond(boundary.run.id, request.id, request.options[0])
        else:
            await runtime.respond(
                boundary.run.id, request.id, {"decision": "allow_once", "reason": None}
            )


async def finished_earlier(db_path: Path, workspace: Path, task: str) -> str:
    """A run of ``task`` finished by an earlier process on ``db_path`` (a relaunch finds it in
    the browser); its run id."""
    return (await finished_earlier_run(db_path, workspace, task)).id


async def finished_earlier_run(db_path: Path, workspace: Path, task: str) -> Run:
    """``finished_earlier``'s run, as it was started (its id, its job's)."""
    earlier = await open_runtime(db_path, workspace)
    try:
        run = await earlier.start(task)
        await finish_run(earlier, run.id)
        return run
    finally:
        await earlier.close()


async def wait_for_browser(pilot: Pilot[object], app: AgentTuiApp) -> None:
    """Until the browser shows its first page with the cursor on the first job; then, from an
    empty composer (where the app starts), to the browser as a person goes there: Tab."""
    from tui.screens.main import MainScreen

    screen = app.screen
    assert isinstance(screen, MainScreen)
    await wait_until(
        pilot, lambda: screen.job_tree.job_ids and screen.job_tree.cursor_node is not None
    )
    composer_input = screen.composer.input
    if app.focused in (None, composer_input) and not composer_input.text:
        await pilot.press("tab")
        await wait_until(pilot, lambda: app.focused is screen.job_tree)


def layout_requests(monkeypatch: pytest.MonkeyPatch, widget: Widget) -> list[bool]:
    """From now on, for each refresh ``widget`` asks for: whether it asked for a layout too."""
    asked: list[bool] = []
    refresh = widget.refresh

    def watched(*regions: object, **options: object) -> object:
        asked.append(bool(options.get("layout")))
        return refresh(*regions, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(widget, "refresh", watched)
    return asked


class LayoutCount:
    """How many layouts of ``screen`` there have been since this was made."""

    def __init__(self, screen: Screen[object]) -> None:
        self.count = 0
        screen.screen_layout_refresh_signal.subscribe(screen, self._laid_out)

    def _laid_out(self, _screen: object) -> None:
        self.count += 1


class FrameCount:
    """How many frames ``screen`` has drawn since this was made: updates of the screen that
    had something to draw (headless, nothing is written; the frame is rendered all the same)."""

    def __init__(self, screen: Screen[object]) -> None:
        self.count = 0
        compositor = screen._compositor
        render_update = compositor.render_update

        def counted(*args: Any, **kwargs: Any) -> Any:
            update = render_update(*args, **kwargs)
            if update is not None:
                self.count += 1
            return update

        compositor.render_update = counted  # type: ignore[method-assign]


def main_screen(app: App[Any]) -> MainScreen:
    """The app's screen, which the test expects to be the main one."""
    screen = app.screen
    assert isinstance(screen, MainScreen)
    return screen


def send_burst(app: AgentTuiApp, text_and_keys: list[str]) -> None:
    """Keys arriving all at once, as from a terminal while the app is busy (or tmux): each
    queued before any is handled (``Pilot.press`` waits for each to be handled). Single
    characters are typed; longer names are keys (``enter``, ``backspace``, ``left``)."""
    from textual import events

    names = {" ": "space", "@": "at", "/": "slash", "?": "question_mark", ".": "full_stop"}
    controls = {"enter": "\r", "backspace": "\x7f", "tab": "\t", "escape": "\x1b"}
    for item in text_and_keys:
        if len(item) == 1:
            app.post_message(events.Key(names.get(item, item), item))
        else:
            app.post_message(events.Key(item, controls.get(item)))


async def asked_in_the_tui(
    pilot: Pilot[object], app: AgentTuiApp, task: str = "summarise"
) -> tuple[MainScreen, InputRequest]:
    """``task`` typed and sent in the app, until the demo model's question is docked: the
    screen and the request."""
    from tui.widgets.question_prompt import QuestionPrompt

    await pilot.press(*task, "enter")
    screen = main_screen(app)
    await wait_until(pilot, lambda: screen.query(QuestionPrompt))
    return screen, screen.query_one(QuestionPrompt).request


async def first_task_running(pilot: Pilot[Any], screen: MainScreen) -> Run:
    """Send a first task from the box and wait until its run works (its model held by a
    gate)."""
    await pilot.press(*"first task", "enter")
    await wait_until(
        pilot,
        lambda: screen.selected_run is not None and screen.selected_run.state is RunState.RUNNING,
    )
    assert screen.selected_run is not None
    return screen.selected_run
