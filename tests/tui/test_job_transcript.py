"""The conversation pane shows the job around the selected run: a fork's inherited history
(dimmed, "forked from job …"), earlier root runs under their headers, and a stopped run's
streamed text marked as partial."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.syntax import Syntax
from textual.widgets import Collapsible, Static

from runtime.api import Runtime
from runtime.models import DraftKind, RunState, ToolCallState
from runtime.store.base import NewRun
from tests.fakes.scripted import ScriptedProvider, Turn, open_scripted
from tests.tui.helpers import SIZE, finish_run, main_screen, make_app, wait_until
from tui.screens.main import MainScreen
from tui.widgets.message_view import MessageView
from tui.widgets.tool_call_view import ToolCallView


def _texts(screen: MainScreen) -> list[str]:
    from textual.widgets import Static

    return [
        str(child.render()) if isinstance(child, Static) else f"<{type(child).__name__}>"
        for child in screen.conversation.children
    ]


async def test_a_follow_up_shows_the_earlier_run_under_its_header_before_its_own(
    runtime: Runtime, workspace: Path
) -> None:
    first = await runtime.start("summarise the project")
    await finish_run(runtime, first.id)
    second = await runtime.follow_up(first.job_id, "and now the tests")
    await finish_run(runtime, second.id)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        screen.open_run(second.id)
        await wait_until(
            pilot, lambda: screen.selected_run is not None and screen.selected_run.id == second.id
        )
        await wait_until(pilot, lambda: any("follow-up 2" in t for t in _texts(screen)))
        texts = _texts(screen)
        run1 = next(i for i, t in enumerate(texts) if t.startswith("── run 1"))
        run2 = next(i for i, t in enumerate(texts) if t.startswith("── follow-up 2"))
        assert run1 < run2
        views = list(screen.conversation.query(MessageView))
        prompts = [v.text for v in views if v.role.value == "user"]
        assert prompts[0] == "summarise the project" and "and now the tests" in prompts


async def test_a_fork_shows_its_inherited_history_dimmed_and_labelled(
    runtime: Runtime, workspace: Path
) -> None:
    first = await runtime.start("summarise the project")
    await finish_run(runtime, first.id)
    checkpoint = (await runtime.checkpoints(first.id))[0]
    fork = await runtime.fork(checkpoint.id, "only the README")
    await runtime.wait(fork.id, timeout=20)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        screen.open_run(fork.id)
        await wait_until(pilot, lambda: any("forked from" in t for t in _texts(screen)))
        texts = _texts(screen)
        origin = next(t for t in texts if "forked from" in t)
        assert "“summarise the project”" in origin and f"at step {checkpoint.step}" in origin
        inherited = list(screen.conversation.query("MessageView.inherited"))
        assert inherited and isinstance(inherited[0], MessageView)
        assert inherited[0].text == "summarise the project"
        own = [v for v in screen.conversation.query(MessageView) if not v.has_class("inherited")]
        assert own[0].text == "only the README"


async def test_a_cancelled_runs_streamed_text_shows_after_relaunch_marked_partial(
    runtime: Runtime, workspace: Path
) -> None:
    store = runtime.store
    run = await store.create_run(
        NewRun(agent="default", model="demo", input="explain", workspace=str(workspace))
    )
    await store.register_owner("other-owner", lease_seconds=30)
    claimed = await store.claim_run(run.id, owner_id="other-owner")
    token = claimed.execution_token or ""
    await store.save_draft(
        run.id, token=token, message_id="m", text="Which notes?", kind=DraftKind.THINKING
    )
    await store.save_draft(run.id, token=token, message_id="m", text="The notes say the")
    await store.cancel_run(run.id, reason="test")
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        screen.open_run(run.id)
        await wait_until(pilot, lambda: any("partial answer" in t for t in _texts(screen)))
        texts = _texts(screen)
        assert any("cancelled before it finished" in t for t in texts)
        views = list(screen.conversation.query(MessageView))
        assert views[-1].text == "The notes say the"
        # What it was thinking is there too, folded as a committed message's thinking is.
        assert views[-1].thinking_text == "Which notes?"
        # Once mounted whole: under load its fold was queried before it was mounted.
        await wait_until(pilot, lambda: bool(views[-1].query(Collapsible)))
        assert views[-1].query_one(Collapsible).collapsed


async def test_a_retried_runs_answer_cut_short_by_a_crash_stays_shown_where_it_was_cut(
    db_path: Path, workspace: Path
) -> None:
    """`kill -9` mid-answer, relaunch, `R`: the run goes on and answers; its first attempt's
    partial answer is still shown with the run (a new-user trial saw it replaced, then gone),
    before the answer of the retry, marked as cut short, and counted."""
    model = ScriptedProvider([Turn(text="2. The whole answer, from the start.")])
    runtime = await open_scripted(model, db_path, workspace)
    try:
        store = runtime.store
        run = await store.create_run(
            NewRun(
                agent="default", model="scripted:test", input="explain", workspace=str(workspace)
            )
        )
        await store.register_owner("killed", lease_seconds=30)
        claimed = await store.claim_run(run.id, owner_id="killed")
        cut = "1. The notes say the"
        await store.save_draft(
            run.id, token=claimed.execution_token or "", message_id="m", text=cut
        )
        await store.recover_owners(["killed"])  # what the next launch does for a dead process
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            assert isinstance(screen, MainScreen)
            screen.open_run(run.id)
            await wait_until(pilot, lambda: any("interrupted before" in t for t in _texts(screen)))
            screen.job_tree.focus()
            await pilot.press("R")
            assert (await runtime.wait(run.id, timeout=20)).run.state is RunState.COMPLETED
            await wait_until(pilot, lambda: any("from the start" in t for t in _views(screen)))
            assert _views(screen) == ["explain", cut, "2. The whole answer, from the start."]

            async def shown_after_reopening() -> list[str]:
                screen.open_run(run.id)
                await wait_until(pilot, lambda: any("from the start" in t for t in _views(screen)))
                return _views(screen)

            views = await shown_after_reopening()
            assert views == ["explain", cut, "2. The whole answer, from the start."]
            texts = _texts(screen)
            assert any("cut short when its process stopped" in t for t in texts)
            assert any("the answer cut short when its process stopped" in t for t in texts)  # Σ
    finally:
        await runtime.close()


def _views(screen: MainScreen) -> list[str]:
    return [view.text for view in screen.conversation.query(MessageView) if view.display]


async def _job_of_a_run_with_tools_and_a_follow_up(
    db_path: Path, workspace: Path, calls: list[tuple[str, dict[str, Any]]], decision: str
) -> tuple[Runtime, str]:
    """A job whose first run made ``calls`` (its write's approval answered with ``decision``)
    and then a follow-up that made none, through the real runtime: the runtime and the
    follow-up's id."""
    model = ScriptedProvider(
        [
            Turn(text="Reading.", tool_calls=calls),
            Turn(text="Done with that."),
            Turn(text="Nothing more to do."),  # the follow-up
        ]
    )
    runtime = await open_scripted(model, db_path, workspace)
    first = await runtime.start("read the readme")
    boundary = await runtime.wait(first.id, timeout=20)
    assert boundary.request is not None  # the write asks first
    await runtime.respond(
        first.id, boundary.request.id, {"decision": decision, "reason": "not now"}
    )
    assert (await runtime.wait(first.id, timeout=20)).run.state is RunState.COMPLETED
    second = await runtime.follow_up(first.job_id, "anything else?")
    assert (await runtime.wait(second.id, timeout=20)).run.state is RunState.COMPLETED
    return runtime, second.id


def _header(block: ToolCallView) -> str:
    return str(block.query_one(".tool-header", Static).render())


async def test_an_earlier_runs_tool_calls_show_arguments_state_and_result_and_brackets_reach_them(
    db_path: Path, workspace: Path
) -> None:
    calls: list[tuple[str, dict[str, Any]]] = [
        ("read_file", {"path": "README.md"}),
        ("read_file", {"path": "missing.txt"}),
        ("write_file", {"path": "notes.md", "content": "notes"}),
    ]
    runtime, follow_up = await _job_of_a_run_with_tools_and_a_follow_up(
        db_path, workspace, calls, "deny"
    )
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            screen.open_run(follow_up)
            await wait_until(
                pilot,
                lambda: (
                    screen.conversation.run_id == follow_up
                    and len(screen.conversation.query(ToolCallView)) == 3
                ),
            )
            blocks = list(screen.conversation.query(ToolCallView))
            headers = [_header(block) for block in blocks]
            assert headers[0].startswith("✓ read_file(path=README.md)")
            assert headers[1].startswith("✗ read_file(path=missing.txt)")
            assert headers[2].startswith("✗ write_file(path=notes.md")
            assert [block.state for block in blocks] == [
                ToolCallState.COMPLETED,
                ToolCallState.FAILED,
                ToolCallState.FAILED,
            ]
            assert all(block.has_class("-context") for block in blocks)  # dimmed: read-only
            assert not any(block.result_expanded for block in blocks)
            # They sit in the first run, above the follow-up's header.
            texts = _texts(screen)
            header = next(i for i, t in enumerate(texts) if t.startswith("── follow-up 2"))
            shown = [i for i, t in enumerate(texts) if t == "<ToolCallView>"]
            assert len(shown) == 3 and max(shown) < header

            # [ from the conversation reaches them, last first; Enter unfolds the result.
            screen.conversation.focus()
            await pilot.press("left_square_bracket")
            assert app.focused is blocks[2]
            await pilot.press("enter")
            denied = str(blocks[2].query_one("#result-text", Static).render())
            assert "denied" in denied and "not now" in denied
            await pilot.press("left_square_bracket", "left_square_bracket")
            assert app.focused is blocks[0]
            await pilot.press("enter")
            assert blocks[0].result_expanded
            assert "Sample project" in str(blocks[0].query_one("#result-text", Static).render())
            await pilot.press("right_square_bracket")
            assert app.focused is blocks[1]
            await pilot.press("enter")
            assert blocks[1].error is not None and blocks[1].result_expanded
    finally:
        await runtime.close()


async def test_an_earlier_runs_write_shows_the_diff_it_applied_once_its_result_is_unfolded(
    db_path: Path, workspace: Path
) -> None:
    calls: list[tuple[str, dict[str, Any]]] = [
        ("write_file", {"path": "notes.md", "content": "the first line of notes\n"})
    ]
    runtime, follow_up = await _job_of_a_run_with_tools_and_a_follow_up(
        db_path, workspace, calls, "allow_once"
    )
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            screen.open_run(follow_up)
            await wait_until(
                pilot,
                lambda: (
                    screen.conversation.run_id == follow_up
                    and len(screen.conversation.query(ToolCallView)) == 1
                    # and mounted whole: its header is a child (under load the block was
                    # found before its children were mounted)
                    and bool(screen.conversation.query(".tool-header"))
                ),
            )
            block = screen.conversation.query_one(ToolCallView)
            assert _header(block).startswith("✓ write_file(path=notes.md")
            diff = block.query_one("#applied-diff", Static)
            await pilot.pause()
            assert not diff.display  # folded: context stays compact

            screen.conversation.focus()
            await pilot.press("left_square_bracket", "enter")
            await wait_until(pilot, lambda: diff.display)
            assert isinstance(diff.content, Syntax)
            assert "+the first line of notes" in diff.content.code
            await pilot.press("enter")
            assert not diff.display
    finally:
        await runtime.close()
