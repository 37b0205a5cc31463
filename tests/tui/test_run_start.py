"""A task sent from the composer: the new job's rows, the run on screen and the composer's
mode line change in one frame (each change on its own was a layout of the whole screen, a
frame apart, while the answer was already streaming)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runtime.api import Runtime
from runtime.errors import DatabaseError
from runtime.models import RunState
from tests.tui.helpers import SIZE, LayoutCount, main_screen, make_app, notifications, wait_until
from tui.widgets.composer import Composer


async def test_a_new_jobs_row_is_first_drawn_with_its_run_on_screen(
    runtime: Runtime, workspace: Path
) -> None:
    from tui.messages import RunLoaded

    app = make_app(runtime, workspace)
    rows_when_loaded: list[list[str]] = []

    def arrived(message: object) -> None:
        if isinstance(message, RunLoaded):  # before the screen handles it
            rows_when_loaded.append(main_screen(app).job_tree.job_ids)

    async with app.run_test(size=SIZE, message_hook=arrived) as pilot:
        screen = main_screen(app)
        await pilot.pause()
        tree, conversation = screen.job_tree, screen.conversation
        assert not tree.job_ids and conversation.run_id is None
        row_before_run: list[bool] = []

        def laid_out(_screen: object) -> None:
            row_before_run.append(bool(tree.job_ids) and conversation.run_id is None)

        screen.screen_layout_refresh_signal.subscribe(screen, laid_out)
        await pilot.press(*"hello there", "enter")
        await wait_until(pilot, lambda: conversation.run_id is not None and tree.job_ids)
        run = await runtime.get_run(conversation.run_id or "")
        await wait_until(pilot, lambda: screen.selected_run is not None)
        assert rows_when_loaded[0] == []  # the run on screen brings its job's row
        assert row_before_run and not any(row_before_run)  # no layout drew the row alone
        assert tree.job_node(run.job_id) is not None


async def test_a_started_run_that_cannot_be_read_still_gets_its_rows_on_its_next_change(
    runtime: Runtime, workspace: Path
) -> None:
    """Its rows wait for the run to be on screen; when reading it fails, the error is shown
    and the run's next state change puts its rows in the browser."""
    app = make_app(runtime, workspace)

    async def unreadable(run_id: str) -> Any:
        raise DatabaseError("the disk is unreadable")

    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await pilot.pause()
        runtime.tool_calls = unreadable  # type: ignore[method-assign]
        await pilot.press(*"hello there", "enter")
        await wait_until(pilot, lambda: screen.job_tree.job_ids)
        (job_id,) = screen.job_tree.job_ids
        assert screen.conversation.run_id is None  # never shown
        assert any("unreadable" in text for text in notifications(app))
        runs = await runtime.job_runs(job_id)
        assert runs and any(run.state is not RunState.QUEUED for run in runs)


async def test_the_mode_line_asked_for_the_same_words_lays_nothing_out(
    runtime: Runtime, workspace: Path
) -> None:
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        composer = screen.query_one(Composer)
        for _ in range(3):
            await pilot.pause()
        layouts = LayoutCount(screen)
        for _ in range(3):
            composer.take_next_run(None)  # no choice was made: the same words
        for _ in range(3):
            await pilot.pause()
        assert layouts.count == 0
        composer.choose_next("model", "demo:slow")  # new words: shown
        await wait_until(pilot, lambda: "next run: model demo:slow" in str(_mode(composer)))


def _mode(composer: Composer) -> object:
    from textual.widgets import Static

    return composer.query_one("#mode", Static).render()


async def test_a_refresh_read_before_the_runs_last_change_does_not_bring_back_its_old_state(
    runtime: Runtime, workspace: Path
) -> None:
    """A run's rows are read again by a worker at each checkpoint; one that read them before
    the run's next change and arrived after it used to put the old state back on screen (a
    finished run shown running, with nothing to correct it)."""
    from tui.messages import RunRefreshed

    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        await pilot.pause()
        await pilot.press(*"hello there", "enter")
        await wait_until(
            pilot,
            lambda: (
                screen.selected_run is not None
                and screen.selected_run.state is RunState.INPUT_REQUIRED
            ),
        )
        assert screen.selected_run is not None
        now = await runtime.get_run(screen.selected_run.id)
        job = await runtime.get_job(now.job_id)
        stale = now.model_copy(update={"state": RunState.RUNNING, "revision": now.revision - 1})
        screen.post_message(RunRefreshed(stale, job))
        await pilot.pause()
        await pilot.pause()
        assert screen.selected_run.state is RunState.INPUT_REQUIRED
        assert screen.job_tree.shown_rows(now)[0] == now
