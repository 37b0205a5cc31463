"""Snapshots of the main screens: fixed size, theme, workspace path; ages hidden.

These tests are synchronous: ``snap_compare`` runs the app in its own event loop, so the app
opens its Runtime inside that loop (``create_app`` accepts an async opener)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input

from runtime.api import Runtime
from runtime.config import Config
from tests.tui.helpers import wait_until
from tui.app import Settings, create_app
from tui.screens.main import MainScreen
from tui.widgets.approval_prompt import ApprovalPrompt
from tui.widgets.question_prompt import QuestionPrompt

SIZE = (120, 36)
ROOT = Path("/tmp/agent-tui-snapshots")


@pytest.fixture
def snapshot_app(request: pytest.FixtureRequest) -> Callable[[], Any]:
    """The app on a fresh database in a workspace at a fixed path (the path is on screen)."""
    base = ROOT / request.node.name
    shutil.rmtree(base, ignore_errors=True)
    workspace = base / "project"
    workspace.mkdir(parents=True)
    (workspace / "README.md").write_text("# Sample project\n\nA tiny project.\n")
    (workspace / "notes.txt").write_text("TODO: write the tests\n")

    async def opener() -> Runtime:
        return await Runtime.open(
            db_path=base / "agent-tui.db",
            workspace=workspace,
            config=Config(),
            model="demo:instant",
        )

    def build() -> Any:
        settings = Settings(
            workspace=workspace,
            theme="agent-dusk",
            hide_ages=True,
            remember_theme=False,
            prompt_settle_seconds=0,  # a prompt is shown settled, with its keys
        )
        return create_app(opener, settings)

    return build


async def _start_task(pilot: Pilot[Any], until: type) -> None:
    await pilot.press(*"summarise this project", "enter")
    screen = pilot.app.screen
    assert isinstance(screen, MainScreen)
    await _settled(pilot, until)


async def _settled(pilot: Pilot[Any], until: type) -> None:
    """The prompt is up and the status line, browser and transcript have caught up."""
    screen = pilot.app.screen
    assert isinstance(screen, MainScreen)

    def caught_up() -> bool:
        run = screen.selected_run
        node = screen.job_tree.run_node(run.id) if run else None
        return bool(
            screen.query(until)
            and run is not None
            and run.state.value == "input_required"
            and node is not None
            and screen.job_tree.row_text(node).startswith("?")
        )

    await wait_until(pilot, caught_up)
    await pilot.pause(0.3)
    await pilot.wait_for_scheduled_animations()
    # The transcript follows its tail: wait until it has scrolled to the end and focus settled.
    await wait_until(
        pilot,
        lambda: screen.conversation.is_vertical_scroll_end and _focus_in(pilot, until),
    )
    # A focused answer field blinks its cursor: hold it still so the picture is stable.
    for field in screen.query(Input):
        field.cursor_blink = False
    # The scrollbar's thumb is drawn from its own repaint, which the last scroll of a layout
    # change can leave unpainted: repaint the settled state so the picture is always the same.
    screen.conversation.vertical_scrollbar.refresh()
    screen.conversation.refresh()
    await pilot.pause(0.1)


def _focus_in(pilot: Pilot[Any], kind: type) -> bool:
    """The focus is on a ``kind`` widget or inside one (a question's answer field)."""
    focused = pilot.app.focused
    return focused is not None and (
        isinstance(focused, kind) or any(isinstance(a, kind) for a in focused.ancestors)
    )


@pytest.mark.sandbox
def test_the_main_screen_on_an_empty_database(snap_compare: Any, snapshot_app: Any) -> None:
    assert snap_compare(snapshot_app(), terminal_size=SIZE)


@pytest.mark.sandbox
def test_a_question_from_the_agent_inline(snap_compare: Any, snapshot_app: Any) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await _start_task(pilot, QuestionPrompt)

    assert snap_compare(snapshot_app(), terminal_size=SIZE, run_before=run_before)


@pytest.mark.sandbox
def test_an_approval_with_its_diff_inline(snap_compare: Any, snapshot_app: Any) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await _start_task(pilot, QuestionPrompt)
        await pilot.press("1", "enter")  # an option's number, then Enter
        await _settled(pilot, ApprovalPrompt)

    assert snap_compare(snapshot_app(), terminal_size=SIZE, run_before=run_before)


@pytest.mark.sandbox
def test_the_help_screen_lists_the_keys(snap_compare: Any, snapshot_app: Any) -> None:
    assert snap_compare(snapshot_app(), terminal_size=SIZE, press=["f1"])


@pytest.mark.sandbox
def test_the_command_menu_at_80x24_leaves_the_box_on_screen(
    snap_compare: Any, snapshot_app: Any
) -> None:
    """The menu takes the rows left over the box and scrolls: the box, its border, the status
    line and the footer stay (a trial found the box under the status line)."""

    async def run_before(pilot: Pilot[Any]) -> None:
        await pilot.press("/")
        screen = pilot.app.screen
        assert isinstance(screen, MainScreen)
        await wait_until(
            pilot,
            lambda: (
                screen.composer.completing == "slash"
                and screen.composer.query_one("#completions").region.height > 0
            ),
        )
        await pilot.pause()

    assert snap_compare(snapshot_app(), terminal_size=(80, 24), run_before=run_before)
