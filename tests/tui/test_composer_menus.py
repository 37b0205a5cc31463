"""The composer's / and @ menus on small terminals, by Pilot on a real Runtime and SQLite file.

Found by a new-user trial at 80x24: typing ``/`` or ``see @`` opened a 12-row menu that pushed
the composer past the status line, and the line being typed went off the screen. The menu takes
the rows that are left and scrolls; the line being typed, the box's border, the status line and
the footer stay."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import OptionList

from runtime.api import Runtime
from runtime.models import RunState
from tests.fakes.scripted import ScriptedProvider, Turn, open_scripted
from tests.tui.helpers import (
    finish_run,
    main_screen,
    make_app,
    screen_text,
    wait_for_browser,
    wait_until,
)
from tui.app import AgentTuiApp
from tui.screens.main import MainScreen
from tui.widgets.approval_prompt import ApprovalPrompt
from tui.widgets.composer import MAX_LINES, MENU_MIN_ROWS, MENU_ROWS
from tui.widgets.key_footer import KeyFooter

SMALL = (80, 24)
LARGE = (120, 40)


@pytest.fixture
def files(workspace: Path) -> list[str]:
    """Twenty more files in the workspace: the @ menu has more entries than rows."""
    names = [f"src/module_{index:02}.py" for index in range(20)]
    for name in names:
        (workspace / name).write_text("VALUE = 1\n")
    return names


def _menu(screen: MainScreen) -> OptionList:
    return screen.composer.query_one("#completions", OptionList)


def _entries(screen: MainScreen) -> list[str]:
    """What the open menu offers, in order, as on screen (``/help``, ``@src/main.py``)."""
    menu = _menu(screen)
    prefix = "/" if screen.composer.completing == "slash" else "@"
    options = [menu.get_option_at_index(index) for index in range(menu.option_count)]
    return [f"{prefix}{option.id}" for option in options if option.id is not None]


def _rows(app: AgentTuiApp, top: int, bottom: int, left: int, right: int) -> list[str]:
    """The screen's text in rows ``top`` to ``bottom`` (excluded), columns ``left`` to
    ``right``: what a person reads there, whatever covers it."""
    strips = app.screen._compositor.render_strips()
    return [strips[y].crop(left, right).text for y in range(top, bottom)]


def _assert_typing_on_screen(app: AgentTuiApp, typed: str) -> None:
    """The box with its border lies on screen over the status line and the footer, the line
    being typed reads ``typed`` on screen, and the cursor is on it."""
    screen = main_screen(app)
    composer = screen.composer
    box = composer.input
    status = screen.status
    footer = screen.query_one(KeyFooter)
    assert screen.region.contains_region(box.region), (box.region, screen.region)
    assert box.region.bottom <= status.region.y, (box.region, status.region)
    assert composer.region.bottom <= status.region.y, "the box's bottom border is covered"
    assert status.region.bottom <= footer.region.y <= screen.region.bottom - 1
    cursor = box.cursor_screen_offset
    assert box.region.contains(*cursor), (cursor, box.region)
    assert screen.get_widget_at(*cursor)[0] is box
    [line] = _rows(app, cursor.y, cursor.y + 1, box.region.x, box.region.right)
    assert line.rstrip() == typed.splitlines()[-1]


def _assert_entries_on_screen(app: AgentTuiApp, count: int) -> None:
    """The menu's first ``count`` entries are on screen, between the box's top and the line
    being typed."""
    screen = main_screen(app)
    menu = _menu(screen)
    box = screen.composer.input
    shown = "\n".join(
        _rows(app, screen.composer.region.y, box.region.y, menu.region.x, menu.region.right)
    )
    for entry in _entries(screen)[:count]:
        assert entry in shown, (entry, shown)


async def _follow_up_in_a_finished_job(pilot: Pilot[object], app: AgentTuiApp, job_id: str) -> None:
    """The job opened from the browser: the composer addresses it, and its mode line (the
    job's title and how to start a new one) takes two lines at 80 columns."""
    screen = main_screen(app)
    await wait_for_browser(pilot, app)
    await pilot.press("enter")
    await wait_until(pilot, lambda: screen.composer.follow_up_job_id == job_id)
    for _pane in ("browser", "conversation", "bottom"):
        if app.focused is screen.composer.input:
            break
        await pilot.press("tab")
    assert app.focused is screen.composer.input


async def _menu_open(pilot: Pilot[object], app: AgentTuiApp, typed: str) -> OptionList:
    """``typed`` into the box, until its menu offers as many entries as it has rows at most
    (the @ menu offers the best twelve), laid out."""
    screen = main_screen(app)
    await pilot.press(*typed)
    await wait_until(pilot, lambda: len(_entries(screen)) >= MENU_ROWS)
    box = screen.composer.input
    # The box gives up rows to the menu, then scrolls to the cursor, a frame or more later
    # under load (a CI run saw the cursor a row under the box).
    await wait_until(pilot, lambda: box.region.contains(*box.cursor_screen_offset))
    await pilot.pause()
    return _menu(screen)


@pytest.mark.parametrize("follow_up", [True, False], ids=["follow-up", "new-job"])
@pytest.mark.parametrize("typed", ["/", "see @"], ids=["slash", "mention"])
@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "120x40"])
async def test_an_open_menu_leaves_the_line_being_typed_and_the_whole_box_on_screen(
    runtime: Runtime,
    workspace: Path,
    files: list[str],
    size: tuple[int, int],
    typed: str,
    follow_up: bool,
) -> None:
    if follow_up:
        run = await runtime.start("summarise")
        await finish_run(runtime, run.id)
    app = make_app(runtime, workspace)
    async with app.run_test(size=size) as pilot:
        if follow_up:
            await _follow_up_in_a_finished_job(pilot, app, run.job_id)
        menu = await _menu_open(pilot, app, typed)
        _assert_typing_on_screen(app, typed)
        _assert_entries_on_screen(app, 3)
        if size == LARGE:
            # Room enough: the menu keeps all its rows, as before.
            assert menu.region.height == MENU_ROWS
        else:
            assert MENU_MIN_ROWS <= menu.region.height < MENU_ROWS
        # Typing goes on into the box, still in view.
        await pilot.press(*"mo")
        await pilot.pause()
        _assert_typing_on_screen(app, typed + "mo")


async def test_the_highlight_walks_to_the_last_entry_within_the_shorter_menu(
    runtime: Runtime, workspace: Path, files: list[str]
) -> None:
    app = make_app(runtime, workspace)
    async with app.run_test(size=SMALL) as pilot:
        screen = main_screen(app)
        menu = await _menu_open(pilot, app, "see @")
        last = _entries(screen)[-1]
        await pilot.press("up")  # from the first entry round to the last
        await pilot.pause()
        assert menu.highlighted == menu.option_count - 1
        shown = _rows(app, menu.region.y, menu.region.bottom, menu.region.x, menu.region.right)
        assert shown[-1].strip() == last
        _assert_typing_on_screen(app, "see @")
        await pilot.press("tab")
        assert screen.composer.input.text == f"see {last} "


async def test_a_menu_over_a_tall_message_keeps_some_entries_and_the_line_with_the_cursor(
    runtime: Runtime, workspace: Path, files: list[str]
) -> None:
    """The box gives up rows to the menu and scrolls to the cursor; closing the menu gives
    them back."""
    app = make_app(runtime, workspace)
    async with app.run_test(size=SMALL) as pilot:
        screen = main_screen(app)
        for index in range(MAX_LINES + 2):
            await pilot.press(*f"line {index}", "shift+enter")
        menu = await _menu_open(pilot, app, "see @")
        assert menu.region.height >= MENU_MIN_ROWS
        _assert_entries_on_screen(app, MENU_MIN_ROWS)
        _assert_typing_on_screen(app, "see @")
        await pilot.press("escape")
        await wait_until(pilot, lambda: screen.composer.input.region.height == MAX_LINES)
        _assert_typing_on_screen(app, "see @")


async def test_shrinking_the_terminal_under_an_open_menu_keeps_the_line_being_typed(
    runtime: Runtime, workspace: Path, files: list[str]
) -> None:
    app = make_app(runtime, workspace)
    async with app.run_test(size=LARGE) as pilot:
        menu = await _menu_open(pilot, app, "/")
        assert menu.region.height == MENU_ROWS
        await pilot.resize_terminal(*SMALL)
        await wait_until(pilot, lambda: main_screen(app).size == SMALL)
        await pilot.pause()
        _assert_typing_on_screen(app, "/")
        _assert_entries_on_screen(app, 3)
        await pilot.resize_terminal(*LARGE)
        await wait_until(pilot, lambda: menu.region.height == MENU_ROWS)
        _assert_typing_on_screen(app, "/")


async def test_a_prompt_that_waits_while_the_menu_is_open_leaves_its_line_and_the_box_on_screen(
    db_path: Path, workspace: Path, files: list[str]
) -> None:
    """The line saying what the agent asks comes over the box: the menu gives up its rows.
    Sent, the message lets the approval dock in the box's place, whole on screen."""
    gate = asyncio.Event()
    script = [
        Turn(
            "I will write it.",
            tool_calls=[("write_file", {"path": "n.md", "content": "x"})],
            gate=gate,
        ),
        Turn("written"),
        Turn("and noted"),
    ]
    runtime = await open_scripted(ScriptedProvider(script), db_path, workspace)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SMALL) as pilot:
            screen = main_screen(app)
            await pilot.press(*"first task", "enter")
            await wait_until(
                pilot,
                lambda: (
                    screen.selected_run is not None
                    and screen.selected_run.state is RunState.RUNNING
                ),
            )
            await _menu_open(pilot, app, "see @")
            gate.set()
            await wait_until(pilot, lambda: screen.prompt_waits)
            await pilot.pause()
            assert "? The agent asks: " in screen_text(app)
            waits = screen.query_one("#prompt-waits")
            assert waits.region.bottom <= screen.composer.region.y
            _assert_typing_on_screen(app, "see @")
            _assert_entries_on_screen(app, 3)

            await pilot.press("escape", "enter")  # the menu closes; the message is queued
            await wait_until(pilot, lambda: isinstance(app.focused, ApprovalPrompt))
            await pilot.pause()
            prompt = screen.query_one(ApprovalPrompt)
            assert prompt.region.bottom <= screen.status.region.y
            assert screen.composer.queued(screen.composer.follow_up_job_id) == ["see @"]
    finally:
        await runtime.close()
