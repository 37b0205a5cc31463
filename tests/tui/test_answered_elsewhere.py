"""A question on screen answered from another process (`agent-tui respond` in another shell):
the run goes on there and asks again. Found by a trial: for up to two seconds the screen read
"input required" with no prompt docked, and the keys typed then went into the message box. The
state shown and the prompt now arrive together."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.message import Message

from runtime.models import InputKind, RunState
from tests.tui.helpers import (
    SIZE,
    main_screen,
    make_app,
    open_runtime,
    wait_for_browser,
    wait_until,
)
from tui.widgets.approval_prompt import ApprovalPrompt
from tui.widgets.question_prompt import QuestionPrompt


@pytest.mark.parametrize("chunk_delay", [None, 0.002], ids=["instant", "streaming"])
async def test_a_run_asking_again_after_an_answer_from_elsewhere_never_shows_waiting_over_the_box(
    db_path: Path, workspace: Path, chunk_delay: float | None
) -> None:
    """``streaming``: the other process streams its answer before it asks (the screen hears
    of its progress on the way); ``instant``: it asks again before the screen heard of the
    answer."""
    elsewhere = await open_runtime(db_path, workspace, chunk_delay=chunk_delay)
    runtime = await open_runtime(db_path, workspace)
    try:
        run = await elsewhere.start("summarise")
        question = (await elsewhere.wait(run.id, timeout=10)).request
        assert question is not None and question.kind is InputKind.QUESTION
        app = make_app(runtime, workspace)
        watching = False
        waiting_over_the_box: list[str] = []

        def check(message: Message) -> None:
            """At every message any part of the app handles (a key among them): a run shown
            as waiting for input has its prompt where the keys go, not the message box."""
            if not watching:
                return
            screen = main_screen(app)
            shown = screen.status.run
            if (
                shown is not None
                and shown.id == run.id
                and shown.state is RunState.INPUT_REQUIRED
                and screen.composer.display
            ):
                waiting_over_the_box.append(type(message).__name__)

        async with app.run_test(size=SIZE, message_hook=check) as pilot:
            screen = main_screen(app)
            await wait_for_browser(pilot, app)
            await pilot.press("enter")
            await wait_until(pilot, lambda: screen.query(QuestionPrompt))
            watching = True
            await elsewhere.respond(run.id, question.id, question.options[0])
            approval = (await elsewhere.wait(run.id, timeout=10)).request
            assert approval is not None and approval.kind is InputKind.APPROVAL
            await wait_until(
                pilot,
                lambda: (
                    screen.query(ApprovalPrompt)
                    and screen.status.run is not None
                    and screen.status.run.state is RunState.INPUT_REQUIRED
                ),
            )
            watching = False
            assert waiting_over_the_box == []
            await wait_until(pilot, lambda: isinstance(app.focused, ApprovalPrompt))
            assert screen.query_one(ApprovalPrompt).request.id == approval.id
    finally:
        await runtime.close()
        await elsewhere.close()
