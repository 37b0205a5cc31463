"""The browser's archive key: the job disappears from the browser and stays in the database."""

from __future__ import annotations

from pathlib import Path

from runtime.api import Runtime
from tests.tui.helpers import (
    SIZE,
    finish_run,
    make_app,
    notifications,
    wait_for_browser,
    wait_until,
)
from tui.screens.main import MainScreen


async def test_x_archives_the_job_under_the_cursor_and_hides_it_from_the_browser(
    runtime: Runtime, workspace: Path
) -> None:
    kept = await runtime.start("keep this one")
    await finish_run(runtime, kept.id)
    gone = await runtime.start("archive this one")
    await finish_run(runtime, gone.id)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        await wait_for_browser(pilot, app)
        assert set(screen.job_tree.job_ids) >= {kept.job_id, gone.job_id}
        screen.job_tree.focus()
        screen.job_tree.move_cursor(screen.job_tree.root.children[0])
        first = screen.job_tree.root.children[0].data.job.id  # type: ignore[union-attr]
        await pilot.press("x")
        await wait_until(pilot, lambda: first not in screen.job_tree.job_ids)
        assert any("Archived" in text for text in notifications(app))
    job = await runtime.get_job(first)
    assert job.archived
    page = await runtime.list_jobs()
    assert first not in [j.id for j in page.items]


async def test_x_on_a_job_waiting_for_input_says_why_it_is_not_archived(
    runtime: Runtime, workspace: Path
) -> None:
    waiting = await runtime.start("summarise")
    await runtime.wait(waiting.id, timeout=10)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        await wait_for_browser(pilot, app)
        screen.job_tree.focus()
        await pilot.press("x")
        await wait_until(pilot, lambda: any("Not archived" in t for t in notifications(app)))
        assert waiting.job_id in screen.job_tree.job_ids
    assert not (await runtime.get_job(waiting.job_id)).archived
