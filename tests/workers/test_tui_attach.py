"""The TUI in attach mode (``agent-tui --attach``): a new job is queued for the workers, a
worker process executes it, and the TUI watches it live and answers its prompts by keyboard
without ever executing it or holding a lease."""

from __future__ import annotations

import signal

from runtime.api import Runtime
from runtime.config import Config
from runtime.models import RunState
from tests.cli.harness import Cli
from tests.tui.helpers import make_app, wait_until
from tests.workers.procs import query, worker
from tui.screens.main import MainScreen
from tui.widgets.approval_prompt import ApprovalPrompt
from tui.widgets.question_prompt import AnswerInput, QuestionPrompt

TIMEOUT = 60.0


async def test_the_attached_tui_queues_a_job_for_a_worker_and_answers_it_while_it_runs(
    cli: Cli,
) -> None:
    cli.db.parent.mkdir(parents=True, exist_ok=True)
    executor = worker(cli, "worker")
    try:
        runtime = await Runtime.open(
            db_path=cli.db, workspace=cli.workspace, config=Config(), model="demo:instant"
        )
        try:
            app = make_app(runtime, cli.workspace, attach=True)
            async with app.run_test(size=(120, 40)) as pilot:
                screen = app.screen
                assert isinstance(screen, MainScreen)
                await wait_until(pilot, lambda: "attached" in screen.status.text)
                await pilot.press(*"summarise this folder", "enter")
                await wait_until(pilot, lambda: screen.selected_run is not None, timeout=TIMEOUT)
                assert screen.selected_run is not None
                run_id = screen.selected_run.id
                [(detached,)] = query(cli.db, "SELECT detached FROM runs WHERE id = ?", run_id)
                assert detached == 1
                # The worker runs it to its question; the question reaches this screen.
                await wait_until(
                    pilot,
                    lambda: (
                        screen.selected_run is not None
                        and screen.selected_run.state is RunState.INPUT_REQUIRED
                    ),
                    timeout=TIMEOUT,
                )
                # The state can reach this screen before the question is mounted and focused:
                # "1" picks its first choice only once the answer field has the keys.
                await wait_until(
                    pilot,
                    lambda: screen.query(QuestionPrompt) and isinstance(app.focused, AnswerInput),
                    timeout=TIMEOUT,
                )
                await pilot.press("1", "enter")  # an option's number, then Enter
                await wait_until(pilot, lambda: screen.query(ApprovalPrompt), timeout=TIMEOUT)
                await wait_until(
                    pilot, lambda: isinstance(app.focused, ApprovalPrompt), timeout=TIMEOUT
                )
                await pilot.press("y")
                await wait_until(
                    pilot,
                    lambda: (
                        query(cli.db, "SELECT state FROM runs WHERE id = ?", run_id)
                        == [("completed",)]
                    ),
                    timeout=TIMEOUT,
                )
        finally:
            await runtime.close()
        claims = [i["run_id"] for i in executor.items if i["kind"] == "worker_claimed"]
        assert claims and set(claims) == {run_id}  # only the worker executed it
        owners = {row[0] for row in query(cli.db, "SELECT owner_id FROM owners")}
        [started] = [i for i in executor.items if i["kind"] == "worker_started"]
        assert owners == {started["owner_id"]}  # the TUI never held a lease
        executor.signal(signal.SIGTERM)
        assert executor.finish(timeout=TIMEOUT) == 0
    finally:
        executor.kill()
