"""What arrives for a widget after it went, or before its parts came: a worker's result for a
tool block the conversation took away (another run opened, a new job), a call's state for a
block taken out as it was mounted, a refusal or a callback for a prompt caught as it goes, ``t``
for a thinking block mounted a moment ago. A removed widget stays ``is_mounted``; its parts go
first, each in its own task, and a widget's parts come only when its own task composes it: a
``query_one`` for one of them failed with ``NoMatches`` (an error toast from a worker, a crash
from a key, a handler or a callback)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from textual.message import Message
from textual.widget import Widget
from textual.widgets import Collapsible
from textual.widgets._collapsible import CollapsibleTitle
from textual.worker import Worker, WorkerState

from runtime.api import Runtime
from runtime.config import Config
from runtime.errors import AlreadyAnswered
from runtime.kinds import ToolCallState
from runtime.mcp import InMemoryServer, McpManager
from tests.fakes.mcp_servers import build_server
from tests.fakes.scripted import ScriptedProvider, Turn
from tests.tui.helpers import finish_run, main_screen, make_app, notifications, wait_until
from tests.tui.test_keys_and_delegation import WIDE, delegation_config
from tui.messages import AnswerFailed
from tui.screens.main import MainScreen
from tui.widgets.approval_prompt import ApprovalPrompt
from tui.widgets.elicitation_form import ElicitationForm
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


async def caught_going(widget: Widget, remove: Callable[[], object]) -> None:
    """Call ``remove`` (which takes ``widget`` away, as the screen does) and come back at the
    moment all of ``widget``'s parts have gone but it has not: they go first, each in its own
    task, and it leaves its parent a turn of the event loop after the last. A handler or a
    callback that runs then finds it attached, with nothing in it."""
    parts = list(widget.children)
    assert parts
    remove()
    async with asyncio.timeout(20):
        while any(part in widget.children for part in parts):
            await asyncio.sleep(0)  # one turn of the event loop: the state lasts at least one
    assert widget.is_attached


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


async def test_a_prompt_s_scroll_keys_asked_for_as_it_goes_are_not_looked_for(
    runtime: Runtime, workspace: Path
) -> None:
    """An approval asks, as it is mounted or resized, to say its scroll keys after the next
    frame; when that comes while the prompt goes (a new job opened, from a worker), its parts
    are gone already."""
    run = await runtime.start("summarise this project")
    question = (await runtime.wait(run.id, timeout=10)).request
    assert question is not None
    await runtime.respond(run.id, question.id, question.options[0])
    await runtime.wait(run.id, timeout=10)  # now it asks to write its notes
    app = make_app(runtime, workspace, open_job=run.job_id)
    async with app.run_test(size=WIDE) as pilot:
        screen = main_screen(app)
        await wait_until(pilot, lambda: screen.query(ApprovalPrompt))
        prompt = screen.query_one(ApprovalPrompt)
        await wait_until(pilot, lambda: prompt.query("#details"))

        await caught_going(prompt, screen.action_new_job)
        prompt._show_scroll_keys()  # what the screen runs after its next frame
        await wait_until(pilot, lambda: not prompt.is_attached)


async def test_an_answer_refused_as_its_form_goes_is_said_without_an_error(
    db_path: Path, workspace: Path
) -> None:
    """A form's answer came back refused (answered first elsewhere) as the form went, a new
    job opened: the refusal is said; the form, its fields gone, shows nothing of it."""
    model = ScriptedProvider([Turn(tool_calls=[("basic__favourites", {})]), Turn(text="Noted.")])
    manager = McpManager(
        {"basic": InMemoryServer(build_server("basic"), timeout=30)}, workspace=workspace
    )
    runtime = await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=Config(),
        model="scripted:test",
        providers=lambda reference: model,
        mcp=manager,
    )
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=WIDE) as pilot:
            screen = main_screen(app)
            await pilot.press(*"pick", "enter")
            await wait_until(pilot, lambda: screen.query(ElicitationForm))
            form = screen.query_one(ElicitationForm)
            await wait_until(pilot, lambda: form.query("#error-form"))

            await caught_going(form, screen.action_new_job)
            refused = AlreadyAnswered("answered first elsewhere")
            await screen.on_answer_failed(AnswerFailed(form.request, refused))
            await wait_until(
                pilot, lambda: any(t.startswith("Answer refused:") for t in notifications(app))
            )
            await wait_until(pilot, lambda: not form.is_attached)
    finally:
        await runtime.close()


async def test_a_tool_call_s_first_state_as_the_conversation_empties_goes_with_its_block(
    runtime: Runtime, workspace: Path
) -> None:
    """A call's first state change mounts its block, then shows the state in it. A new job
    opened meanwhile (a worker of the screen empties the conversation) took the block out
    before its own task had composed it: the state goes with it."""
    app = make_app(runtime, workspace)
    async with app.run_test(size=WIDE) as pilot:
        conversation = main_screen(app).conversation
        await wait_until(pilot, lambda: conversation.query(".empty"))
        showing = asyncio.create_task(
            conversation.tool_state(
                "call-1",
                "read_file",
                ToolCallState.RUNNING,
                arguments={"path": "README.md"},
                result=None,
                error=None,
            )
        )
        await asyncio.sleep(0)  # the block is mounted; the state waits for it
        [block] = conversation.query(ToolCallView)
        await conversation.show_empty("New job: type the task below and press Enter.")
        await showing
        assert not block.is_attached
        assert not conversation.query(ToolCallView) and conversation.query(".empty")
