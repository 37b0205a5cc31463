"""The TUI on PostgreSQL (``agent-tui --db postgresql://…``): the flows a person meets first,
on a real Runtime over a throwaway cluster. The TUI reads the store through the same pages and
sentinels as on SQLite, whose integers PostgreSQL checks against each column's type."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.api import Runtime
from runtime.config import Config
from runtime.models import RunState
from tests.tui.helpers import (
    SIZE,
    finish_run,
    main_screen,
    make_app,
    screen_text,
    wait_for_browser,
    wait_until,
)
from tui.widgets.approval_prompt import ApprovalPrompt
from tui.widgets.message_view import MessageView
from tui.widgets.question_prompt import QuestionPrompt

pytestmark = pytest.mark.slow


@pytest.fixture
async def pg_runtime(pg_database: str, tmp_path: Path) -> Runtime:
    workspace = tmp_path / "project"
    workspace.mkdir()
    (workspace / "README.md").write_text("# A project\n\nIt parses things.\n")
    return await Runtime.open(
        db_path=pg_database, workspace=workspace, config=Config(), model="demo:instant"
    )


async def test_a_new_job_on_postgresql_streams_asks_inline_and_completes_by_keys(
    pg_runtime: Runtime,
) -> None:
    runtime = pg_runtime
    app = make_app(runtime, runtime.workspace)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            await pilot.press(*"summarise this project", "enter")
            screen = main_screen(app)
            await wait_until(pilot, lambda: screen.query(QuestionPrompt))
            assert any("Plan" in view.text for view in screen.query(MessageView))
            assert "database error" not in screen_text(app)

            await pilot.press("1", "enter")
            await wait_until(pilot, lambda: screen.query(ApprovalPrompt))
            await pilot.press("y")
            await wait_until(
                pilot,
                lambda: (
                    screen.selected_run is not None
                    and screen.selected_run.state is RunState.COMPLETED
                ),
            )
            assert "database error" not in screen_text(app)
    finally:
        await runtime.close()


async def test_a_past_run_on_postgresql_opens_with_its_messages_and_takes_a_follow_up(
    pg_runtime: Runtime,
) -> None:
    runtime = pg_runtime
    first = await runtime.start("summarise")
    await finish_run(runtime, first.id)
    app = make_app(runtime, runtime.workspace)
    try:
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            await wait_for_browser(pilot, app)
            await pilot.press("enter")  # open the job's latest run
            await wait_until(
                pilot, lambda: any("Plan" in v.text for v in screen.query(MessageView))
            )
            await pilot.press("ctrl+t")
            await pilot.press(*"and now the tests", "enter")
            await wait_until(
                pilot,
                lambda: screen.selected_run is not None and screen.selected_run.id != first.id,
            )
            follow_up = screen.selected_run
            assert follow_up is not None and follow_up.job_id == first.job_id
            boundary = await runtime.wait(follow_up.id, timeout=30)
            assert boundary.run.state in (RunState.INPUT_REQUIRED, RunState.COMPLETED)
            await wait_until(
                pilot,
                lambda: any("Follow-up" in view.text for view in screen.query(MessageView)),
            )
            assert "database error" not in screen_text(app)
    finally:
        await runtime.close()
