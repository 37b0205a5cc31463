"""Restart: close the app mid-run and reopen the same database; waiting prompts come back."""

from __future__ import annotations

import asyncio
import socket
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from textual.widgets import Static

from runtime.api import Runtime
from runtime.clock import ManualClock
from runtime.interrupted import needs_resume
from runtime.models import InputRequestState, Job, Run, RunState
from runtime.store.base import NewRun
from runtime.store.sqlite import SqliteStore
from tests.store.helpers import answer_text, composer_text, queued_messages
from tests.tui.helpers import (
    SIZE,
    finish_run,
    main_screen,
    make_app,
    notifications,
    open_runtime,
    screen_text,
    wait_for_browser,
    wait_until,
)
from tui.screens.main import MainScreen
from tui.widgets.approval_prompt import ApprovalPrompt
from tui.widgets.confirm_bar import ConfirmBar
from tui.widgets.job_tree import RunEntry
from tui.widgets.message_view import MessageView
from tui.widgets.question_prompt import AnswerInput, QuestionPrompt

if TYPE_CHECKING:
    from textual.pilot import Pilot

    from runtime.models import InputRequest
    from tui.app import AgentTuiApp


async def _waiting_question(runtime: Runtime) -> InputRequest:
    """A new job of the demo model, its run waiting on its question: the request."""
    run = await runtime.start("summarise")
    boundary = await runtime.wait(run.id, timeout=10)
    assert boundary.request is not None
    return boundary.request


async def _open_the_question(pilot: Pilot[object], app: AgentTuiApp) -> MainScreen:
    """From a fresh app: Enter on the first job in the browser, until its question shows."""
    screen = app.screen
    assert isinstance(screen, MainScreen)
    await wait_for_browser(pilot, app)
    await pilot.press("enter")
    await wait_until(pilot, lambda: screen.query(QuestionPrompt))
    return screen


async def _typing_reaches_the_answer(pilot: Pilot[object], app: AgentTuiApp) -> None:
    """The answer field has the focus, and what is typed next goes into it (added at its end)."""
    field = app.screen.query_one(AnswerInput)
    await wait_until(pilot, lambda: app.focused is field)
    before = field.value
    await pilot.press(*" tests")
    assert field.value == before + " tests"


async def test_a_run_cut_off_by_quitting_is_offered_for_retry_and_retries(
    db_path: Path, workspace: Path
) -> None:
    # The demo model at a crawl: the run is still streaming its plan when the app quits and
    # the runtime closes, however fast the machine (at reading speed it sometimes reached its
    # question during the teardown). The second runtime retries it at the usual speed.
    first = await open_runtime(db_path, workspace, chunk_delay=0.5)
    try:
        app = make_app(first, workspace)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press(*"summarise this project", "enter")
            screen = app.screen
            assert isinstance(screen, MainScreen)
            await wait_until(
                pilot, lambda: any(len(view.text) > 20 for view in screen.query(MessageView))
            )
            run_id = screen.selected_run.id if screen.selected_run else None
            assert run_id is not None
            await pilot.press("ctrl+q")
    finally:
        await first.close()

    second = await open_runtime(db_path, workspace)
    try:
        interrupted = await second.get_run(run_id)
        assert interrupted.interrupted or interrupted.state is RunState.FAILED
        app = make_app(second, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            assert isinstance(screen, MainScreen)
            await wait_for_browser(pilot, app)
            tree = screen.job_tree

            def job_row() -> str:
                node = tree.job_node(interrupted.job_id)
                return tree.row_text(node).lstrip("▶▼ ") if node is not None else ""

            # The job row is marked before anyone opens it.
            await wait_until(pilot, lambda: job_row().startswith("⚠"))
            await pilot.press("enter")
            await wait_until(pilot, lambda: screen.job_tree.run_node(run_id) is not None)
            node = screen.job_tree.run_node(run_id)
            assert node is not None and screen.job_tree.row_text(node).startswith("⚠")
            assert "Interrupted" in screen_text(app) or "Failed" in screen_text(app)
            pressed = time.time()
            await pilot.press("R")
            await wait_until(pilot, lambda: screen.query(QuestionPrompt), timeout=30)
            retried = screen.selected_run
            assert retried is not None
            # Its elapsed time counts from the retry, not from the run's creation.
            assert screen.status.working_since(retried) >= pressed > retried.created_at
        stored = await second.get_run(retried.id)
        assert stored.state is RunState.INPUT_REQUIRED
        assert retried.id == run_id or stored.retry_of_run_id == run_id
    finally:
        await second.close()


async def test_a_run_stopped_in_its_first_step_offers_a_retry_from_its_start_not_a_fork(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: a task quit while its first answer streamed came back under
    "R retry · f fork from the last checkpoint" (and "(R retry · f fork)" in the status
    line), f said "This run has no checkpoint to fork from yet", and R said it retried "from
    its last checkpoint". Before its first checkpoint only R is offered, from the start."""
    run = await _interrupted_by_a_quit(db_path, workspace)
    second = await open_runtime(db_path, workspace)
    try:
        stopped = await second.get_run(run.id)
        assert needs_resume(stopped) and stopped.step == 0
        assert not await second.checkpoints(run.id)
        app = make_app(second, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            await wait_for_browser(pilot, app)
            await pilot.press("enter")
            await wait_until(
                pilot, lambda: screen.selected_run is not None and screen.selected_run.id == run.id
            )
            banner = screen.query_one("#banner", Static)
            await wait_until(pilot, lambda: banner.display)
            assert "R retry from its start" in str(banner.render())
            assert "fork" not in str(banner.render())
            assert "(R retry)" in screen.status.text and "fork" not in screen.status.text
            await pilot.press("R")
            await wait_until(pilot, lambda: screen.query(QuestionPrompt), timeout=30)
            assert any("from its start" in text for text in notifications(app))
            assert not any("last checkpoint" in text for text in notifications(app))
    finally:
        await second.close()


async def test_a_waiting_prompt_survives_a_restart_and_answering_continues_the_run(
    db_path: Path, workspace: Path
) -> None:
    first = await open_runtime(db_path, workspace)
    try:
        request = await _waiting_question(first)
    finally:
        await first.close()

    second = await open_runtime(db_path, workspace)
    try:
        app = make_app(second, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = await _open_the_question(pilot, app)
            assert screen.query_one(QuestionPrompt).request.id == request.id
            await pilot.press("1", "enter")  # an option's number, then Enter
            await wait_until(pilot, lambda: screen.query(ApprovalPrompt))
        answered = await second.store.get_input_request(request.id)
        assert answered.state is InputRequestState.ANSWERED
        assert (await second.get_run(request.run_id)).state is RunState.INPUT_REQUIRED
        assert (await second.inbox())[0].kind.value == "approval"
    finally:
        await second.close()


async def test_an_answer_half_typed_comes_back_after_a_crash_or_a_quit(
    db_path: Path, workspace: Path
) -> None:
    first = await open_runtime(db_path, workspace)
    try:
        request_id = (await _waiting_question(first)).id
        app = make_app(first, workspace)
        async with app.run_test(size=SIZE) as pilot:
            await _open_the_question(pilot, app)
            await pilot.press(*"only the TODOs")
            # Kept while typing (a crash now loses at most the last half second of it) ...
            async with asyncio.timeout(10):
                while await answer_text(first.store, request_id) != "only the TODOs":
                    await pilot.pause(0.05)
            # ... and what was typed just before quitting too.
            await pilot.press(*", and the tests")
            await pilot.press("ctrl+q")
        assert await answer_text(first.store, request_id) == "only the TODOs, and the tests"
    finally:
        await first.close()

    second = await open_runtime(db_path, workspace)
    try:
        app = make_app(second, workspace)
        async with app.run_test(size=SIZE, notifications=True) as pilot:
            screen = await _open_the_question(pilot, app)
            field = screen.query_one(AnswerInput)
            assert field.value == "only the TODOs, and the tests"
            assert any("back in the field" in n.message for n in app._notifications)
            # Typing goes on after it (a trial: the restored text was selected, so the first
            # key replaced all of it).
            await pilot.press(*" first")
            await pilot.press("enter")
            await wait_until(pilot, lambda: screen.query(ApprovalPrompt))
        answered = await second.store.get_input_request(request_id)
        assert answered.answer == "only the TODOs, and the tests first"
        assert await answer_text(second.store, request_id) == ""  # answered: gone
    finally:
        await second.close()


async def test_escape_leaves_a_question_for_the_browser_and_escape_there_comes_back_to_it(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: Esc from the browser did not go back to the open question,
    so the answer typed next fired the browser's single-letter keys instead."""
    runtime = await open_runtime(db_path, workspace)
    try:
        await _waiting_question(runtime)
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = await _open_the_question(pilot, app)
            await _typing_reaches_the_answer(pilot, app)
            await pilot.press("escape")
            await wait_until(pilot, lambda: screen.job_tree.has_focus)
            await pilot.press("escape")
            await _typing_reaches_the_answer(pilot, app)
    finally:
        await runtime.close()


async def test_opening_a_job_from_the_browser_leaves_the_focus_there_whatever_was_shown_before(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: Enter on a finished job put the focus in the composer when
    the run shown before had a question open, and left it in the browser otherwise, so the
    next letter was text for one job and a key for another."""
    runtime = await open_runtime(db_path, workspace)
    try:
        finished = await runtime.start("/stream 2")
        await finish_run(runtime, finished.id)
        await _waiting_question(runtime)  # the newest job: first in the browser
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = await _open_the_question(pilot, app)
            await pilot.press("escape")  # from the question to the browser
            await wait_until(pilot, lambda: screen.job_tree.has_focus)
            await pilot.press("down", "enter")
            await wait_until(
                pilot,
                lambda: (
                    screen.selected_run is not None
                    and screen.selected_run.id == finished.id
                    and not screen.query(QuestionPrompt)
                ),
            )
            await pilot.pause()
            assert screen.job_tree.has_focus
    finally:
        await runtime.close()


async def test_ctrl_t_on_a_job_waiting_for_an_answer_goes_to_its_prompt(
    db_path: Path, workspace: Path
) -> None:
    """ctrl+t ("follow up") on a job whose run waits for an answer says to answer first, and
    puts the keys there: left in the browser, the message typed next fired its letter keys."""
    runtime = await open_runtime(db_path, workspace)
    try:
        await _waiting_question(runtime)
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = await _open_the_question(pilot, app)
            await pilot.press("escape")
            await wait_until(pilot, lambda: screen.job_tree.has_focus)
            await pilot.press("ctrl+t")
            await _typing_reaches_the_answer(pilot, app)
    finally:
        await runtime.close()


async def test_a_cancel_question_left_unanswered_goes_when_another_run_is_shown(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: "Cancel the run …?" stayed docked over other jobs (and a
    new one), out of Tab's reach, until its run was opened again and it was answered."""
    runtime = await open_runtime(db_path, workspace)
    try:
        finished = await runtime.start("/stream 2")
        await finish_run(runtime, finished.id)
        request = await _waiting_question(runtime)
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = await _open_the_question(pilot, app)
            screen.action_cancel_run()
            await wait_until(pilot, lambda: screen.query(ConfirmBar))
            screen.open_run(finished.id)
            await wait_until(
                pilot,
                lambda: screen.selected_run is not None and screen.selected_run.id == finished.id,
            )
            await pilot.pause()
            assert not screen.query(ConfirmBar)
            screen.open_run(request.run_id)
            await wait_until(pilot, lambda: screen.query(QuestionPrompt))
            screen.action_cancel_run()
            await wait_until(pilot, lambda: screen.query(ConfirmBar))
            screen.action_new_job()
            await wait_until(pilot, lambda: screen.selected_run is None)
            await pilot.pause()
            assert not screen.query(ConfirmBar)
        # Nothing was cancelled.
        assert (await runtime.get_run(request.run_id)).state is RunState.INPUT_REQUIRED
    finally:
        await runtime.close()


async def test_the_inbox_notice_at_launch_leaves_out_the_job_opened_with_its_prompt(
    db_path: Path, workspace: Path
) -> None:
    runtime = await open_runtime(db_path, workspace)
    try:
        await _waiting_question(runtime)
        run = await runtime.start("summarise again")
        assert (await runtime.wait(run.id, timeout=10)).request is not None
        app = make_app(runtime, workspace, continue_last=True)
        async with app.run_test(size=SIZE, notifications=True) as pilot:
            screen = app.screen
            assert isinstance(screen, MainScreen)
            await wait_until(pilot, lambda: screen.query(QuestionPrompt))
            assert screen.query_one(QuestionPrompt).request.run_id == run.id
            # The other job's question is counted; the one on screen is not.
            await wait_until(
                pilot, lambda: any("for your input" in n.message for n in app._notifications)
            )
            [notice] = [n.message for n in app._notifications if "for your input" in n.message]
            assert notice.startswith("1 run waits for your input")
    finally:
        await runtime.close()


async def test_the_inbox_notice_is_said_once_not_again_at_each_filter_of_the_browser(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: each ``s`` that showed a page with jobs said "1 run waits
    for your input" again, a pile of the same notice at the top right."""
    runtime = await open_runtime(db_path, workspace)
    try:
        request = await _waiting_question(runtime)
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE, notifications=True) as pilot:
            screen = app.screen
            assert isinstance(screen, MainScreen)

            def notices() -> list[str]:
                return [n.message for n in app._notifications if "for your input" in n.message]

            await wait_until(pilot, lambda: len(notices()) == 1)
            await wait_for_browser(pilot, app)
            await pilot.press("s", "s")  # running: no job; input required: the waiting one
            await wait_until(
                pilot,
                lambda: (
                    screen.state_filter is RunState.INPUT_REQUIRED
                    and screen.job_tree.job_ids == [request.job_id]
                ),
            )
            # Any count the page started has finished by now.
            await wait_until(
                pilot,
                lambda: not [w for w in app.workers if w.group == "inbox-count" and w.is_running],
            )
            assert len(notices()) == 1
    finally:
        await runtime.close()


async def test_an_answer_being_typed_when_the_question_is_answered_elsewhere_is_shown_not_lost(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: `agent-tui respond RUN … --detach` from another shell while
    an answer was half typed here: the prompt went, and the words with it, without a word."""
    runtime = await open_runtime(db_path, workspace)
    try:
        request = await _waiting_question(runtime)
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = await _open_the_question(pilot, app)
            await _typing_reaches_the_answer(pilot, app)
            await pilot.press(*" and the docs")
            typed = app.screen.query_one(AnswerInput).value
            assert typed.endswith("tests and the docs")
            await runtime.store.answer_input_request(request.id, answer=request.options[0])
            await wait_until(pilot, lambda: not screen.query(QuestionPrompt))
            await wait_until(pilot, lambda: any("not sent" in t for t in notifications(app)))
            notice = next(t for t in notifications(app) if "not sent" in t)
            assert "answered elsewhere" in notice and typed.strip() in notice
    finally:
        await runtime.close()


async def _interrupted_by_a_quit(
    db_path: Path, workspace: Path, task: str = "summarise this project"
) -> Run:
    """A run of ``task`` a first agent-tui left while it streamed (closed as ctrl+q closes it:
    the run is left resumable, marked interrupted)."""
    first = await open_runtime(db_path, workspace, chunk_delay=0.5)
    try:
        run = await first.start(task)
        async with asyncio.timeout(10):
            async for event in first.observe(run.id):
                if event.kind == "message_delta":
                    break
    finally:
        await first.close()
    return run


async def _asked_to_cancel(pilot: Pilot[Any], app: AgentTuiApp, run: Run, text: str) -> MainScreen:
    """With ``run``'s job open, ``text`` typed and Enter: the screen asks whether to cancel
    the interrupted run and send it (the question docked)."""
    screen = app.screen
    assert isinstance(screen, MainScreen)
    await wait_until(pilot, lambda: screen.composer.follow_up_job_id == run.job_id)
    screen.composer.focus_input()
    await pilot.press(*text, "enter")
    await wait_until(pilot, lambda: screen.query(ConfirmBar))
    return screen


async def test_a_message_to_a_job_whose_run_a_quit_interrupted_is_not_queued_forever(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: after a quit, a message sent in the job said "queued … sent
    when the run finishes", but the interrupted run waits for the person: it never finished,
    and nothing said to press R."""
    run = await _interrupted_by_a_quit(db_path, workspace)

    second = await open_runtime(db_path, workspace)
    try:
        assert (await second.get_run(run.id)).interrupted
        app = make_app(second, workspace, open_job=run.job_id)
        async with app.run_test(size=SIZE) as pilot:
            # It asks whether to cancel the interrupted run and send this instead; no keeps it.
            screen = await _asked_to_cancel(pilot, app, run, "my queued line")
            assert "was interrupted" in str(screen.query_one(ConfirmBar).render())
            await pilot.press("n")
            await wait_until(pilot, lambda: any("Esc, then R" in t for t in notifications(app)))
            await wait_until(pilot, lambda: screen.composer.input.text == "my queued line")
            assert app.focused is screen.composer.input
            assert not screen.composer.queued(run.job_id)
        assert [r.id for r in await second.job_runs(run.job_id)] == [run.id]
        assert await queued_messages(second.store, run.job_id) == []
        assert (await second.get_run(run.id)).interrupted
    finally:
        await second.close()


async def test_a_message_to_a_job_whose_run_was_interrupted_can_go_on_as_the_next_turn(
    db_path: Path, workspace: Path
) -> None:
    """As in other agents' terminals, one types on after an interrupted turn: asked, y cancels
    the interrupted run and sends the message as the job's next run."""
    run = await _interrupted_by_a_quit(db_path, workspace)

    second = await open_runtime(db_path, workspace)
    try:
        app = make_app(second, workspace, open_job=run.job_id)
        async with app.run_test(size=SIZE) as pilot:
            screen = await _asked_to_cancel(pilot, app, run, "never mind, list the files")
            await pilot.press("y")
            await wait_until(
                pilot, lambda: screen.selected_run is not None and screen.selected_run.id != run.id
            )
            assert screen.composer.input.text == ""
        stopped = await second.get_run(run.id)
        assert stopped.state is RunState.CANCELLED
        assert stopped.cancel_reason == "superseded by a new message"
        roots = [r for r in await second.job_runs(run.job_id) if r.parent_run_id is None]
        assert [r.input for r in roots] == ["summarise this project", "never mind, list the files"]
    finally:
        await second.close()


async def test_keys_typed_on_as_the_interrupted_run_question_docks_are_text_not_an_answer(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: "next step", Enter, and typing on "yes and more": the "y"
    cancelled the interrupted run (R could no longer resume it), the "e" was lost. Asked as
    a message is sent, the question takes no answer from keys typed on at once: they go to the
    box, and the run stays as it was."""
    run = await _interrupted_by_a_quit(db_path, workspace)

    second = await open_runtime(db_path, workspace)
    try:
        # Settling takes longer than the test: every key typed on is too soon to answer.
        app = make_app(second, workspace, open_job=run.job_id, prompt_settle_seconds=600)
        async with app.run_test(size=SIZE) as pilot:
            screen = await _asked_to_cancel(pilot, app, run, "next step")
            await pilot.press(*"yes and more")
            await wait_until(pilot, lambda: not screen.query(ConfirmBar))
            await wait_until(pilot, lambda: screen.composer.input.text == "next stepyes and more")
            assert app.focused is screen.composer.input
        assert (await second.get_run(run.id)).interrupted
        assert [r.id for r in await second.job_runs(run.job_id)] == [run.id]
    finally:
        await second.close()


async def test_an_answer_refused_because_another_came_first_is_quoted_not_lost(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: two agent-tuis answered at once; the slower one said the
    request was already answered, and the words typed there went without a trace."""
    from tui.widgets._prompt_base import PromptAnswered

    runtime = await open_runtime(db_path, workspace)
    try:
        request = await _waiting_question(runtime)
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = await _open_the_question(pilot, app)
            prompt = screen.query_one(QuestionPrompt)
            await runtime.store.answer_input_request(request.id, answer=request.options[0])
            prompt.post_message(PromptAnswered(request, "the tests, then the docs"))
            await wait_until(pilot, lambda: any("Answer refused" in t for t in notifications(app)))
            [notice] = [t for t in notifications(app) if "Answer refused" in t]
            assert "yours was not sent: the tests, then the docs" in notice
            assert "answered first elsewhere" in notice and request.id not in notice
    finally:
        await runtime.close()


async def test_a_run_a_quit_interrupted_is_named_when_agent_tui_opens_again(
    db_path: Path, workspace: Path
) -> None:
    """A trial quit with a run working (ctrl+q said it was resumable), came back, and nothing
    but the row's ⚠ said so; after a crash a notice did."""
    await _interrupted_by_a_quit(db_path, workspace)

    second = await open_runtime(db_path, workspace)
    try:
        report = second.recovery
        assert not (report.requeued or report.failed or report.interrupted_queued)
        app = make_app(second, workspace)
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(
                pilot, lambda: any("1 run waits to be resumed" in t for t in notifications(app))
            )
    finally:
        await second.close()


async def _crashed_running_run(db_path: Path, workspace: Path, *, steps_done: int) -> str:
    """A running run whose agent-tui died an hour ago (a pid that has exited, its lease run
    out) after ``steps_done`` steps, each ending with its checkpoint: the next runtime to open
    recovers it."""
    child = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
    async with asyncio.timeout(30):
        await child.wait()
    owner = f"{socket.gethostname()}:{child.pid}:x-0wner000"
    store = SqliteStore(db_path, clock=ManualClock(time.time() - 3600))
    await store.open()
    try:
        await store.register_owner(owner, lease_seconds=10)
        run = await store.create_run(
            NewRun(
                agent="default",
                model="demo",
                input="summarise",
                workspace=str(workspace),
                owner_id=owner,
            )
        )
        claimed = await store.claim_run(run.id, owner_id=owner)
        for step in range(1, steps_done + 1):
            token = claimed.execution_token or ""
            await store.set_run_step(run.id, token=token, step=step)
            await store.create_checkpoint(run.id, token=token, step=step)
        return run.id
    finally:
        await store.close()


@pytest.mark.parametrize(("steps_done", "offers_fork"), [(0, False), (1, True)])
async def test_the_notice_of_runs_a_crash_stopped_offers_fork_only_when_there_is_a_checkpoint(
    db_path: Path, workspace: Path, steps_done: int, offers_fork: bool
) -> None:
    """Found by a user trial: the notice said "press R to retry or f to fork" of a run a crash
    stopped in its first step, which has no checkpoint: f there only says so."""
    run_id = await _crashed_running_run(db_path, workspace, steps_done=steps_done)
    runtime = await open_runtime(db_path, workspace)
    try:
        assert runtime.recovery.requeued == [run_id]
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:

            def notice() -> str:
                found = [t for t in notifications(app) if "stopped before finishing" in t]
                return found[0] if found else ""

            await wait_until(pilot, notice)
            assert "press R to retry" in notice()
            assert ("f to fork" in notice()) is offers_fork
    finally:
        await runtime.close()


async def test_the_question_to_cancel_an_interrupted_run_goes_once_it_is_resumed_elsewhere(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: asked "cancel it and send your message?", the person let it
    be while another agent-tui resumed the run; the question stayed, and its y then cancelled
    the resumed run. It goes when the run moves on; a y that comes late cancels nothing."""
    run = await _interrupted_by_a_quit(db_path, workspace)

    second = await open_runtime(db_path, workspace)
    try:
        app = make_app(second, workspace, open_job=run.job_id)
        async with app.run_test(size=SIZE) as pilot:
            screen = await _asked_to_cancel(pilot, app, run, "next turn")
            retried = await second.retry(run.id)  # as another agent-tui's R does
            await wait_until(pilot, lambda: not screen.query(ConfirmBar))
            await wait_until(pilot, lambda: any("withdrawn" in t for t in notifications(app)))
            assert screen.composer.input.text == "next turn"
            # A y that reached the screen before the question went: nothing is cancelled.
            screen._supersede(run.job_id, run.id, "late yes")
            await wait_until(pilot, lambda: any("Not cancelled" in t for t in notifications(app)))
            resumed = await second.get_run(retried.id)
            assert resumed.state is not RunState.CANCELLED
    finally:
        await second.close()


async def test_the_interrupted_runs_notice_goes_once_r_resumed_the_run_it_named(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: the notice that a run waits to be resumed stayed its full
    ten seconds over the run that R had just resumed."""
    run = await _interrupted_by_a_quit(db_path, workspace)

    second = await open_runtime(db_path, workspace)
    try:
        app = make_app(second, workspace)
        async with app.run_test(size=SIZE, notifications=True) as pilot:

            def notice_up() -> bool:
                return any("1 run waits to be resumed" in t for t in notifications(app))

            await wait_until(pilot, notice_up)
            screen = main_screen(app)
            await wait_for_browser(pilot, app)
            await pilot.press("enter")
            await wait_until(
                pilot, lambda: screen.selected_run is not None and screen.selected_run.id == run.id
            )
            assert notice_up()

            def toast_shown() -> bool:
                return any(
                    "waits to be resumed" in str(toast.render())
                    for toast in app.screen.query("Toast")
                )

            await wait_until(pilot, toast_shown)
            await pilot.press("R")
            await wait_until(pilot, lambda: screen.query(QuestionPrompt) or not toast_shown())
            assert not toast_shown()  # on the screen, not only in the app's list
            assert not notice_up()
            assert not any("Interrupted runs" in t for t in notifications(app))
            await wait_until(pilot, lambda: screen.query(QuestionPrompt))  # it did resume
    finally:
        await second.close()


async def test_esc_on_a_run_resumed_from_the_browser_leaves_r_to_the_browser(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: R in the browser resumed an interrupted run, a message was
    queued for it, then Esc in the browser stopped it. The notice said "press R to retry",
    but the focus went to the composer with the queued message back in it, and R typed
    "what about divisionR". The keys stay in the browser now (another trial's next browser
    key went into the box), where R does what the notice says; the message is back in the
    box."""
    run = await _interrupted_by_a_quit(db_path, workspace, task="/stream 400")

    second = await open_runtime(db_path, workspace, model="demo")  # at reading speed
    try:
        app = make_app(second, workspace)
        async with app.run_test(size=(120, 40)) as pilot:
            screen = main_screen(app)
            composer = screen.composer
            await wait_for_browser(pilot, app)
            await pilot.press("enter")
            await wait_until(
                pilot, lambda: screen.selected_run is not None and screen.selected_run.id == run.id
            )
            await pilot.press("R")
            await wait_until(pilot, lambda: screen._working_run() is not None)
            await pilot.press("ctrl+t")
            await wait_until(pilot, lambda: app.focused is composer.input)
            await pilot.press(*"what about division", "enter")
            await wait_until(pilot, lambda: composer.queued(run.job_id))
            await pilot.press("tab")  # back to the browser
            await wait_until(pilot, lambda: app.focused is screen.job_tree)
            stopped = screen._working_run()
            assert stopped is not None
            await pilot.press("escape")
            await wait_until(pilot, lambda: any("Interrupted." in t for t in notifications(app)))
            await pilot.pause()
            assert app.focused is screen.job_tree
            assert composer.input.text == "what about division"
            [notice] = [t for t in notifications(app) if "Interrupted." in t]
            assert "Press R to retry" in notice
            # As it says: R retries (it is not typed into the message).
            await wait_until(
                pilot,
                lambda: screen.selected_run is not None and screen.selected_run.state.is_terminal,
            )
            await pilot.press("R")
            await wait_until(
                pilot,
                lambda: screen.selected_run is not None and screen.selected_run.id != stopped.id,
            )
            retried = screen.selected_run
            assert retried is not None and retried.retry_of_run_id == stopped.id
            assert composer.input.text == "what about division"
    finally:
        await second.close()


async def test_resume_with_a_sub_runs_id_opens_that_sub_run_not_its_jobs_root_run(
    db_path: Path, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`agent-tui --resume <id of a sub-agent's run>` opened the job's root run: the
    conversation asked for was one Enter and a search of the browser away."""
    from tests.tui.test_keys_and_delegation import delegation_config
    from tui.app import Launch, program_app

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    earlier = await Runtime.open(
        db_path=db_path, workspace=workspace, config=delegation_config(), model="demo:instant"
    )
    try:
        root = await earlier.start("summarise this project")
        await finish_run(earlier, root.id)
        [child, *_] = [r for r in await earlier.job_runs(root.job_id) if r.parent_run_id]
    finally:
        await earlier.close()

    app = program_app(db_path, workspace, Launch(model="demo:instant", resume=child.id[:8]))
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, MainScreen))
        screen = main_screen(app)
        await wait_until(
            pilot, lambda: screen.selected_run is not None and screen.status.run is not None
        )
        assert screen.selected_run is not None and screen.selected_run.id == child.id
        assert screen.conversation.run_id == child.id

        def under_the_cursor() -> str | None:
            node = screen.job_tree.cursor_node
            return node.data.run.id if node and isinstance(node.data, RunEntry) else None

        # Its row in the browser is the one under the cursor (under its parent's, unfolded).
        await wait_until(pilot, lambda: under_the_cursor() == child.id, timeout=15)


async def test_r_on_a_run_later_runs_went_past_names_commands_for_this_database(
    db_path: Path, workspace: Path
) -> None:
    """The runtime's refusal says what to type instead ("agent-tui fork …", "agent-tui
    follow-up …"); shown as it was, without --db, those commands opened the default
    database, not this one, and found no such job."""
    runtime = await open_runtime(db_path, workspace)
    try:
        first = await runtime.start("summarise")
        await runtime.wait(first.id, timeout=10)  # the demo model asks a question
        await runtime.cancel(first.id, reason="not now")
        later = await runtime.follow_up(first.job_id, "and the tests")
        await finish_run(runtime, later.id)
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            await wait_for_browser(pilot, app)
            screen.open_run(first.id)
            await wait_until(
                pilot,
                lambda: screen.selected_run is not None and screen.selected_run.id == first.id,
            )
            screen.job_tree.focus()
            await pilot.press("R")
            await wait_until(
                pilot, lambda: any("cannot be retried" in t for t in notifications(app))
            )
            [told] = [t for t in notifications(app) if "cannot be retried" in t]
        command = f"agent-tui --db {db_path.resolve()}"  # not the default database
        assert f"or continue the job: {command} follow-up {first.job_id} PROMPT" in told
        assert "agent-tui fork" not in told and "agent-tui follow-up" not in told
        assert len(await runtime.job_runs(first.job_id)) == 2  # nothing was retried
    finally:
        await runtime.close()


@pytest.mark.parametrize("launch", ["--continue", "--resume JOB_ID"])
async def test_text_typed_before_the_job_opened_at_launch_goes_to_that_job_whole(
    runtime: Runtime, workspace: Path, monkeypatch: pytest.MonkeyPatch, launch: str
) -> None:
    """A new-user trial launched with --continue and typed "yes please" at once: the job's
    box got "se", and "yes plea" was left as the new job's draft."""
    run = await runtime.start("summarise")
    await finish_run(runtime, run.id)
    # The job opens once the test has typed (its run is read, its job's read waits).
    typed = asyncio.Event()
    get_job = runtime.get_job

    async def get_job_once_typed(job_id: str) -> Job:
        await typed.wait()
        return await get_job(job_id)

    monkeypatch.setattr(runtime, "get_job", get_job_once_typed)
    opening = {"continue_last": True} if launch == "--continue" else {"open_job": run.job_id}
    app = make_app(runtime, workspace, **opening)
    async with app.run_test(size=SIZE) as pilot:
        screen = main_screen(app)
        box = screen.composer.input
        await wait_until(pilot, lambda: app.focused is box and app._held_input is None)
        await pilot.press(*"yes please")
        assert screen.composer.follow_up_job_id is None  # typed before the job opened
        typed.set()
        await wait_until(pilot, lambda: screen.composer.follow_up_job_id == run.job_id)
        await pilot.pause()
        assert box.text == "yes please"
        # Moved, not copied: the job's draft, and the new job keeps none of it.
        async with asyncio.timeout(10):
            while await composer_text(runtime.store, run.job_id) != "yes please":
                await pilot.pause(0.05)
        assert await composer_text(runtime.store, None) == ""

        await pilot.press("enter")

        async def follow_ups() -> list[str | None]:
            runs = await runtime.job_runs(run.job_id)
            return [r.input for r in runs if r.parent_run_id is None and r.id != run.id]

        async with asyncio.timeout(20):
            while not await follow_ups():
                await pilot.pause(0.05)
        assert await follow_ups() == ["yes please"]
    assert await composer_text(runtime.store, None) == ""
