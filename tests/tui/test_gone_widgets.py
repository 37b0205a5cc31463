"""What arrives for a widget after it went, or before its parts came: a worker's result for a
tool block the conversation took away (another run opened, a new job), a call's state for a
block taken out as it was mounted, a refusal or a callback for a prompt caught as it goes, ``t``
for a thinking block mounted a moment ago. A removed widget stays ``is_mounted``; its parts go
first, each in its own task, and a widget's parts come only when its own task composes it: a
``query_one`` for one of them failed with ``NoMatches`` (an error toast from a worker, a crash
from a key, a handler or a callback)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

from textual.app import App, ComposeResult
from textual.message import Message as TextualMessage
from textual.widget import Widget
from textual.widgets import Collapsible
from textual.widgets._collapsible import CollapsibleTitle
from textual.worker import Worker, WorkerState

from runtime.api import Runtime
from runtime.errors import AlreadyAnswered
from runtime.kinds import Role, ToolCallState
from runtime.mcp import InMemoryServer, McpManager
from runtime.models import ContentBlock, Message, TextBlock, ToolUseBlock
from tests.fakes.mcp_servers import build_server
from tests.fakes.scripted import ScriptedProvider, Turn, open_scripted
from tests.tui.helpers import finish_run, main_screen, make_app, notifications, wait_until
from tests.tui.test_keys_and_delegation import WIDE, delegation_config
from tui.messages import AnswerFailed
from tui.screens.main import MainScreen
from tui.widgets.approval_prompt import ApprovalPrompt
from tui.widgets.conversation import Conversation
from tui.widgets.elicitation_form import ElicitationForm
from tui.widgets.tool_call_view import ToolCallView

ENDED = (WorkerState.SUCCESS, WorkerState.ERROR, WorkerState.CANCELLED)


class WorkerEnds:
    """A ``run_test`` message hook: how each worker ended, by group, in order."""

    def __init__(self) -> None:
        self.ended: list[tuple[str, WorkerState, BaseException | None]] = []

    def __call__(self, message: TextualMessage) -> None:
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
    runtime = await open_scripted(model, db_path, workspace, mcp=manager)
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


LONG = "Some words that wrap across the width of the view, again and again.\n\n" * 4000
"""An answer long enough that the view redraws its plain tail over several turns."""


class _Host(App[None]):
    def compose(self) -> ComposeResult:
        yield Conversation(id="conversation")


def _answer(text: str, *, tool_use: bool) -> Message:
    content: list[ContentBlock] = [TextBlock(text=text)]
    if tool_use:
        content.append(
            ToolUseBlock(id="toolu_1", tool_call_id="call-1", name="read_file", input={})
        )
    return Message(
        id="m1",
        run_id="run",
        job_id="job",
        position=1,
        role=Role.ASSISTANT,
        content=content,
        created_at=time.time(),
    )


async def test_an_answer_committed_as_the_conversation_empties_goes_without_its_tool_blocks() -> (
    None
):
    """Committing a streamed answer commits its view, then mounts the blocks of the calls it
    asks for after it. A new job opened meanwhile (the screen's worker empties the
    conversation) took the view away during the first step: the old run's tool blocks were
    mounted into the new job's empty conversation all the same."""
    async with _Host().run_test(size=(80, 24)) as pilot:
        conversation = pilot.app.query_one(Conversation)
        conversation.run_id = "run"
        await conversation.delta("m1", 0, LONG[:20_000], thinking=False)
        await pilot.pause()
        [view] = conversation.message_views
        # The final text differs from what streamed: the view redraws its plain tail a slice
        # per turn of the event loop (a long answer), and the new job comes in between.
        committing = asyncio.create_task(conversation.committed(_answer(LONG, tool_use=True)))
        await asyncio.sleep(0)
        await conversation.show_empty("New job: type the task below and press Enter.")
        await committing
        assert not view.is_attached
        assert not conversation.query(ToolCallView) and conversation.query(".empty")


async def test_a_run_stopped_as_the_conversation_empties_marks_nothing() -> None:
    """A run that stopped with an answer half streamed settles the answer, then marks it
    partial below it. The view taken away meanwhile (a new job): the old run's mark was
    mounted into the new job's empty conversation all the same."""
    async with _Host().run_test(size=(80, 24)) as pilot:
        conversation = pilot.app.query_one(Conversation)
        conversation.run_id = "run"
        await conversation.delta("m1", 0, LONG, thinking=False)
        await pilot.pause()
        [view] = conversation.message_views
        # Settling widens the Markdown part and redraws the plain tail a slice per turn of the
        # event loop (a long answer); the new job comes in between.
        stopping = asyncio.create_task(conversation.run_stopped("cancelled"))
        await asyncio.sleep(0)
        await conversation.show_empty("New job: type the task below and press Enter.")
        await stopping
        assert not view.is_attached
        assert not conversation.query(".partial-label") and conversation.query(".empty")


async def test_a_tool_call_s_state_for_a_block_going_is_dropped_without_an_error(
    runtime: Runtime, workspace: Path
) -> None:
    """A call's later state (running → completed) came for a block whose parts had gone as
    the conversation took it away: ``update_state`` looked for its header and raised
    ``NoMatches`` (seen about one run in ten by a helper's test closing the app mid-run)."""
    app = make_app(runtime, workspace)
    async with app.run_test(size=WIDE) as pilot:
        conversation = main_screen(app).conversation
        await wait_until(pilot, lambda: conversation.query(".empty"))
        await conversation.tool_state(
            "call-1",
            "read_file",
            ToolCallState.RUNNING,
            arguments={"path": "README.md"},
            result=None,
            error=None,
        )
        [block] = conversation.query(ToolCallView)
        await wait_until(pilot, lambda: bool(block.query(".tool-header")))
        await caught_going(block, block.remove)
        block.update_state(ToolCallState.COMPLETED, result="the file's text")
        assert block.state is ToolCallState.COMPLETED
        # The result's own message, and a sub-run's, come the same way (the CI rehearsal).
        block.set_result("the file's text", is_error=False)
        block.set_child("child-run")
        assert block.result == "the file's text" and block.child_run_id == "child-run"
        # And a progress report (a helper's full tests/tui run, test_new_job_keys: a new job
        # emptied the conversation as a demo run's tool reported progress: NoMatches).
        block.progress(1, 3, "reading README.md")
