"""``/rewind [start]`` in the composer: the files the job's agent wrote put back, to the
checkpoint under the browser's cursor or to the job's start, after a yes/no question."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot

from runtime.api import Runtime
from tests.fakes.scripted import ScriptedProvider, Turn, open_scripted
from tests.tui.helpers import (
    SIZE,
    finish_run,
    main_screen,
    make_app,
    notifications,
    screen_text,
    wait_for_browser,
    wait_until,
)
from tui.app import AgentTuiApp
from tui.screens.main import MainScreen


async def _first_step_wrote(db_path: Path, workspace: Path) -> tuple[Runtime, str]:
    provider = ScriptedProvider(
        [Turn("", [("write_file", {"path": "first.txt", "content": "one\n"})]), Turn("Written.")]
    )
    runtime = await open_scripted(provider, db_path, workspace)
    run = await runtime.start("write a file")
    await finish_run(runtime, run.id)  # the write allowed once
    assert (workspace / "first.txt").read_text() == "one\n"
    return runtime, run.job_id


async def _typing_in(pilot: Pilot[object], app: AgentTuiApp, job_id: str) -> MainScreen:
    """The job opened from the browser (Enter), and the keys in its message box."""
    screen = main_screen(app)
    await wait_for_browser(pilot, app)
    await pilot.press("enter")
    await wait_until(pilot, lambda: screen.composer.follow_up_job_id == job_id)
    screen.composer.focus_input()
    return screen


async def test_rewind_right_after_the_first_answer_puts_back_what_the_first_step_wrote(
    db_path: Path, workspace: Path
) -> None:
    """Found by a trial: /rewind right after the first answer was not a command, and no
    checkpoint comes before a job's first step (one ends each step), so its write could not be
    undone anywhere. /rewind goes to the job's start when no checkpoint is under the cursor."""
    runtime, job_id = await _first_step_wrote(db_path, workspace)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE, notifications=True) as pilot:
            screen = await _typing_in(pilot, app, job_id)
            await pilot.press(*"/rewind", "enter")
            asked = (
                "Rewind the files to the job's start (before its first step)? first.txt (remove)."
            )
            await wait_until(pilot, lambda: asked in screen_text(app))
            assert (workspace / "first.txt").exists()  # nothing before the yes
            await pilot.press("y")
            await wait_until(pilot, lambda: not (workspace / "first.txt").exists())
            await wait_until(pilot, lambda: "/rewind: removed first.txt" in notifications(app))
            # Again: nothing left to put back, and it says so.
            screen.composer.focus_input()
            await pilot.press(*"/rewind start", "enter")
            await wait_until(
                pilot, lambda: any("Nothing to rewind" in n for n in notifications(app))
            )
    finally:
        await runtime.close()


async def test_rewind_refuses_an_argument_it_does_not_know_and_changes_nothing(
    db_path: Path, workspace: Path
) -> None:
    runtime, job_id = await _first_step_wrote(db_path, workspace)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE, notifications=True) as pilot:
            screen = await _typing_in(pilot, app, job_id)
            await pilot.press(*"/rewind 1", "enter")
            await wait_until(pilot, lambda: screen.composer.error.startswith("/rewind takes"))
            assert screen.composer.input.text == "/rewind 1"
    finally:
        await runtime.close()
    assert (workspace / "first.txt").exists()
