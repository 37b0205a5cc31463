"""What arrives for a widget after it went, or before its parts came: a worker's result for a
tool block the conversation took away (another run opened, a new job), ``t`` for a thinking
block mounted a moment ago. A removed widget stays ``is_mounted``; its parts go first, each in
its own task, and a widget's parts come only when its own task composes it: a ``query_one`` for
one of them failed with ``NoMatches`` (an error toast from a worker, a crash from a key)."""

from __future__ import annotations

from pathlib import Path

from textual.message import Message
from textual.widgets import Collapsible
from textual.widgets._collapsible import CollapsibleTitle
from textual.worker import Worker, WorkerState

from runtime.api import Runtime
from tests.tui.helpers import finish_run, main_screen, make_app, wait_until
from tests.tui.test_keys_and_delegation import WIDE, delegation_config
from tui.screens.main import MainScreen
from tui.widgets.tool_call_view import ToolCallView

ENDED = (WorkerState.SUCCESS, WorkerState.ERROR, WorkerState.CANCELLED)


class WorkerEnds:
    """A ``run_test`` message hook: how each worker ended, by group, in order."""

    def __init__(self) -> None:
        self.ended: list[tuple[str, WorkerState, BaseException | None]] = []

    def __call__(self, message: Message) -> None:
        if isinstance(message, Worker.StateChanged) and message.state in ENDED:
            self.ended.append((message.worker.group, message.state, message.worker.error))

    def of(self, group: str) -> list[tuple[WorkerState, BaseException | None]]:
        return [(state, error) for name, state, error in self.ended if name == group]


def _block_with_diff(screen: MainScreen) -> ToolCallView | None:
    for view in screen.conversation.query(ToolCallView):
        if any(diff.display for diff in view.query("#applied-diff")):
            return view
    return None


async def test_a_diff_that_comes_for_a_block_gone_meanwhile_is_dropped_without_an_error(
    runtime: Runtime, workspace: Path
) -> None:
    """A block asks for its write's diff as it is mounted; a worker reads it from the store.
    A new job (or another run) opened meanwhile took the block away: the diff goes nowhere."""
    run = await runtime.start("summarise this project")
    await finish_run(runtime, run.id)
    ends = WorkerEnds()
    app = make_app(runtime, workspace)
    async with app.run_test(size=WIDE, message_hook=ends) as pilot:
        screen = main_screen(app)
        screen.open_run(run.id)
        await wait_until(pilot, lambda: _block_with_diff(screen) is not None)
        block = _block_with_diff(screen)
        assert block is not None
        screen.action_new_job()
        await wait_until(pilot, lambda: not block.is_attached)
        before = len(ends.of("applied-diff"))

        # The block's ask, handled only now: its worker finds the block gone.
        screen.post_message(ToolCallView.DiffWanted(block))
        await wait_until(pilot, lambda: len(ends.of("applied-diff")) > before)
        assert ends.of("applied-diff")[before:] == [(WorkerState.SUCCESS, None)]


async def test_a_sub_run_read_for_a_block_gone_meanwhile_is_dropped_without_an_error(
    db_path: Path, workspace: Path
) -> None:
    """Enter on a delegation block unfolds its sub-run, read by a worker; the block went (a
    new job opened) before the sub-run's messages were read: they go nowhere."""
    runtime = await Runtime.open(
        db_path=db_path, workspace=workspace, config=delegation_config(), model="demo:instant"
    )
    try:
        parent = await runtime.start("summarise this project")
        await finish_run(runtime, parent.id)
        for child in await runtime.job_runs(parent.job_id):
            if child.parent_run_id:
                await finish_run(runtime, child.id)
        await finish_run(runtime, parent.id)
        ends = WorkerEnds()
        app = make_app(runtime, workspace)
        async with app.run_test(size=WIDE, message_hook=ends) as pilot:
            screen = main_screen(app)
            screen.open_run(parent.id)

            def delegation() -> ToolCallView | None:
                views = screen.conversation.query(ToolCallView)
                return next((view for view in views if view.child_run_id), None)

            await wait_until(pilot, lambda: delegation() is not None)
            block = delegation()
            assert block is not None
            screen.action_new_job()
            await wait_until(pilot, lambda: not block.is_attached)

            screen.post_message(ToolCallView.SubRunWanted(block, block.child_run_id))
            await wait_until(pilot, lambda: bool(ends.of("sub-run")))
            assert ends.of("sub-run") == [(WorkerState.SUCCESS, None)]
    finally:
        await runtime.close()


async def test_t_as_a_message_s_first_thinking_arrives_opens_its_block_without_an_error(
    runtime: Runtime, workspace: Path
) -> None:
    """The first thinking of a streaming message mounts its block; ``t`` handled before the
    block's own task has composed it (its title) opens it all the same."""
    app = make_app(runtime, workspace)
    async with app.run_test(size=WIDE) as pilot:
        screen = main_screen(app)
        conversation = screen.conversation
        await wait_until(pilot, lambda: conversation.query(".empty"))
        await conversation.delta("m1", 0, "Let me think.", thinking=True)
        screen.action_thinking()  # what t runs, before the block's task has run

        block = conversation.query_one("#thinking", Collapsible)
        assert not block.collapsed
        await wait_until(pilot, lambda: bool(block.query_children(CollapsibleTitle)))
        assert not block.collapsed
