"""The command palette (ctrl+p) offers every action, as the README says: each command of the
composer's / menu has an entry, chosen by keys as a person does, on a real Runtime and SQLite
file with the demo model."""

from __future__ import annotations

from pathlib import Path

from textual.command import CommandList, CommandPalette
from textual.pilot import Pilot

from runtime.api import Runtime
from tests.tui.helpers import (
    SIZE,
    main_screen,
    make_app,
    notifications,
    screen_text,
    wait_until,
)
from tui.app import AgentTuiApp
from tui.screens.report import ReportScreen
from tui.widgets.composer import SLASH_COMMANDS

PALETTE_TITLES = {
    "help": "Help",
    "new": "New job",
    "model": "Model",
    "agent": "Agent",
    "retry": "Retry",
    "fork": "Fork",
    "export": "Export job",
    "theme": "Theme",
    "permissions": "Permissions",
    "compact": "Compact",
    "rewind": "Rewind files",
    "context": "Context",
    "inbox": "Inbox",
    "quit": "Quit",
}
"""The palette's entry for each command of the / menu."""


async def _cancelled_job_open(runtime: Runtime, workspace: Path) -> tuple[AgentTuiApp, str]:
    """An app showing a job whose run was cancelled: every run action makes sense there."""
    run = await runtime.start("summarise this project")
    await runtime.wait(run.id, timeout=10)  # the demo model asks a question
    await runtime.cancel(run.id)
    return make_app(runtime, workspace, open_job=run.job_id), run.job_id


async def _choose(pilot: Pilot[object], app: AgentTuiApp, words: str, title: str) -> None:
    """ctrl+p, ``words``, and Enter once ``title`` is the highlighted entry."""
    await pilot.press("ctrl+p")
    await wait_until(pilot, lambda: isinstance(app.screen, CommandPalette))
    await pilot.press(*words)
    hits = app.screen.query_one(CommandList)

    def highlighted() -> str:
        index = hits.highlighted
        if index is None or index >= hits.option_count:
            return ""
        return str(hits.get_option_at_index(index).prompt).split("\n")[0]

    await wait_until(pilot, lambda: highlighted() == title)
    await pilot.press("enter")
    await wait_until(pilot, lambda: not isinstance(app.screen, CommandPalette))


async def test_every_command_of_the_slash_menu_has_an_entry_in_the_palette(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: the palette had no /context nor /compact (nor /new, /model
    and /agent), though the README says it offers every action."""
    assert set(PALETTE_TITLES) == {command.name for command in SLASH_COMMANDS}
    app, job_id = await _cancelled_job_open(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_until(pilot, lambda: screen.composer.follow_up_job_id == job_id)
        await wait_until(pilot, lambda: screen.selected_run is not None)
        titles = {command.title for command in app.get_system_commands(app.screen)}
        missing = set(PALETTE_TITLES.values()) - titles
        assert not missing, missing


async def test_context_and_compact_are_chosen_in_the_palette(
    runtime: Runtime, workspace: Path
) -> None:
    app, job_id = await _cancelled_job_open(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await wait_until(pilot, lambda: screen.composer.follow_up_job_id == job_id)
        await _choose(pilot, app, "context", "Context")
        await wait_until(pilot, lambda: isinstance(app.screen, ReportScreen))
        assert "MCP servers:" in screen_text(app) and "Agents:" in screen_text(app)
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is screen)
        await _choose(pilot, app, "compact", "Compact")
        await wait_until(pilot, lambda: any(n.startswith("/compact:") for n in notifications(app)))
        assert any("Compacting" in n for n in notifications(app))


async def test_model_in_the_palette_types_the_command_into_an_empty_box_only(
    runtime: Runtime, workspace: Path
) -> None:
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        composer = screen.composer
        await wait_until(pilot, lambda: app.focused is composer.input)
        await _choose(pilot, app, "model", "Model")
        await wait_until(pilot, lambda: app.focused is composer.input)
        assert composer.input.text == "/model "
        await pilot.press(*"demo", "enter")
        await wait_until(pilot, lambda: screen.status.next_run == {"model": "demo"})
        # A message being typed is not lost to it: the way is said instead.
        await pilot.press(*"half a message")
        await _choose(pilot, app, "agent", "Agent")
        await wait_until(pilot, lambda: any("/agent NAME" in n for n in notifications(app)))
        assert composer.input.text == "half a message"
