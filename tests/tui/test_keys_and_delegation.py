"""Keyboard access to every pane, the status line's context fill, browser rows that keep their
figures, delegation (the run tree, jumping between parent and sub-run, a sub-run's question
answered inline) and the tool-call block (progress while it runs, the folded result)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from textual.app import App, ComposeResult
from textual.widgets import Input, ProgressBar, Static

from runtime.api import Runtime
from runtime.config import AgentConfig, Config, Defaults, Permissions
from runtime.models import RunState, ToolCallState
from tests.fakes.scripted import ScriptedProvider, Turn
from tests.tui.helpers import (
    finish_run,
    finished_earlier,
    main_screen,
    make_app,
    open_runtime,
    wait_for_browser,
    wait_until,
)
from tui.screens.main import MainScreen
from tui.widgets.approval_prompt import ApprovalPrompt
from tui.widgets.composer import Composer
from tui.widgets.job_tree import JobTree
from tui.widgets.question_prompt import AnswerInput, QuestionPrompt
from tui.widgets.status_line import StatusLine
from tui.widgets.tool_call_view import ToolCallView

WIDE = (120, 40)


def drawn(widget: Any) -> str:
    """The first line of a widget as drawn on screen (clipped to its width)."""
    return str(widget.render_line(0).text)


def tree_rows(tree: JobTree) -> list[str]:
    """Every visible row of the browser as drawn, guides included."""
    return [str(tree.render_line(y).text).rstrip() for y in range(tree.last_line + 1)]


async def answer_by_keys_until_completed(pilot: Any, screen: MainScreen) -> None:
    """Answer whatever the demo model asks by keys (first option, allow once) until the run on
    screen completes."""

    def settled() -> bool:
        run = screen.selected_run
        done = run is not None and run.state is RunState.COMPLETED
        return done or bool(screen.query(QuestionPrompt) or screen.query(ApprovalPrompt))

    while True:
        await wait_until(pilot, settled)
        if screen.query(QuestionPrompt):
            screen.query_one(QuestionPrompt).focus()
            await pilot.press("1", "enter")  # an option's number, then Enter
        elif screen.query(ApprovalPrompt):
            screen.query_one(ApprovalPrompt).focus()
            await pilot.press("y")
        else:
            return
        await pilot.pause()


# --- the status line -----------------------------------------------------------------------------
@pytest.mark.sandbox
async def test_the_status_line_shows_the_context_fill_as_a_percentage_at_120_columns(
    runtime: Runtime, workspace: Path
) -> None:
    app = make_app(runtime, workspace)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press(*"summarise this project", "enter")
        screen = main_screen(app)
        await wait_until(pilot, lambda: screen.query(QuestionPrompt))
        await wait_until(pilot, lambda: screen.status.run is not None)
        line = drawn(screen.status)
        assert re.search(r"ctx (\d+|<1)%", line), line
        assert "input required" in line
        assert "set ANTHROPIC_API_KEY for Claude" in line
        # The window is the model's own: the demo model's 200,000 tokens.
        assert screen.status.context_window == runtime.context_window("demo:instant") == 200_000


async def test_the_status_line_measures_against_the_folders_configured_window(
    db_path: Path, workspace: Path
) -> None:
    """``[defaults] context_window`` is the window compaction and ``/context`` use; the status
    line showed the fill of the model's own 200,000 instead (found by a trial)."""
    from runtime.config import load_config

    (workspace / "agent-tui.toml").write_text("[defaults]\ncontext_window = 4000\n")
    runtime = await Runtime.open(
        db_path=db_path, workspace=workspace, config=load_config(workspace), model="demo:instant"
    )
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=WIDE) as pilot:
            await pilot.press(*"summarise this project", "enter")
            screen = main_screen(app)
            await wait_until(pilot, lambda: screen.query(QuestionPrompt))
            await wait_until(pilot, lambda: screen.status.run is not None)
            assert screen.status.context_window == 4000
            run = screen.status.run
            assert run is not None and run.context_tokens > 40  # over 1% of 4,000
            assert f"ctx {round(100 * run.context_tokens / 4000)}%" in drawn(screen.status)
    finally:
        await runtime.close()


async def test_the_context_fill_shows_a_dash_when_the_window_is_unknown() -> None:
    from runtime.models import Run

    class Host(App[None]):
        def compose(self) -> ComposeResult:
            yield StatusLine(id="status")

    run = Run(
        id="r1",
        job_id="j1",
        agent="default",
        model="someone:unknown",
        state=RunState.RUNNING,
        revision=1,
        input="x",
        created_at=0.0,
        updated_at=0.0,
        context_tokens=6_000,
    )
    async with Host().run_test(size=(120, 3)) as pilot:
        status = pilot.app.query_one(StatusLine)
        status.show(model="demo", notice="demo", run=run, context_window=None)
        await pilot.pause()
        assert "ctx —" in drawn(status)
        status.show(run=run, context_window=200_000)
        await pilot.pause()
        assert "ctx 3%" in drawn(status)
        assert "running" in drawn(status)


# --- keyboard: from the composer to an older job and a follow-up ---------------------------------
async def test_from_the_composer_a_person_reaches_an_old_job_by_keys_and_follows_it_up(
    db_path: Path, workspace: Path
) -> None:
    old_id = await finished_earlier(db_path, workspace, "summarise")
    runtime = await open_runtime(db_path, workspace)
    try:
        old = await runtime.get_run(old_id)
        app = make_app(runtime, workspace)
        async with app.run_test(size=WIDE) as pilot:
            screen = main_screen(app)
            await wait_for_browser(pilot, app)
            await pilot.press("n")
            assert app.focused is screen.composer.input
            footer_keys = {
                key for key, active in screen.active_bindings.items() if active.binding.show
            }
            assert {"escape", "tab"} <= footer_keys  # the way out is in the footer

            await pilot.press("escape")  # leave the composer: the browser
            assert app.focused is screen.job_tree
            await pilot.press("tab")  # browser → conversation → bottom → browser
            assert app.focused is screen.conversation
            await pilot.press("tab")
            assert app.focused is screen.composer.input
            await pilot.press("tab")
            assert app.focused is screen.job_tree
            await pilot.press("shift+tab")
            assert app.focused is screen.composer.input
            await pilot.press("escape")
            assert app.focused is screen.job_tree

            await pilot.press("enter")  # open the job's latest run
            await wait_until(pilot, lambda: screen.selected_run is not None)
            assert screen.selected_run is not None and screen.selected_run.id == old.id
            await pilot.press("ctrl+t")  # follow up the selected job
            assert app.focused is screen.composer.input
            assert screen.composer.follow_up_job_id == old.job_id
            await pilot.press(*"and the tests", "enter")

            def follow_up_shown() -> bool:
                run = screen.selected_run
                return run is not None and run.id != old.id

            await wait_until(pilot, follow_up_shown)
            follow_up = screen.selected_run
            assert follow_up is not None
            await answer_by_keys_until_completed(pilot, screen)
            assert screen.job_tree.run_node(follow_up.id) is not None
            assert screen.job_tree.run_node(follow_up.id).parent is screen.job_tree.job_node(
                old.job_id
            )
        runs = await runtime.job_runs(old.job_id)
        assert {run.id for run in runs} == {old.id, follow_up.id}
        assert all(run.state is RunState.COMPLETED for run in runs)
        assert (await runtime.get_run(follow_up.id)).input == "and the tests"
    finally:
        await runtime.close()


async def test_escape_in_the_search_field_closes_it_and_returns_to_the_browser(
    runtime: Runtime, workspace: Path
) -> None:
    run = await runtime.start("summarise")
    await finish_run(runtime, run.id)
    app = make_app(runtime, workspace)
    async with app.run_test(size=WIDE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        await pilot.press("slash")
        assert isinstance(app.focused, Input) and app.focused.id == "search"
        await pilot.press("escape")
        assert app.focused is screen.job_tree


# --- delegation ----------------------------------------------------------------------------------
def delegation_config() -> Config:
    return Config(
        defaults=Defaults(agent="coordinator"),
        agents={
            "coordinator": AgentConfig(delegates=["researcher", "reviewer"]),
            "researcher": AgentConfig(description="reads the workspace"),
            "reviewer": AgentConfig(description="reviews the findings"),
        },
    )


async def test_delegation_shows_the_run_tree_jumps_both_ways_and_a_sub_run_question_is_answered(
    db_path: Path, workspace: Path
) -> None:
    runtime = await Runtime.open(
        db_path=db_path, workspace=workspace, config=delegation_config(), model="demo:instant"
    )
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=WIDE) as pilot:
            screen = main_screen(app)
            await pilot.press(*"summarise this project", "enter")

            # A sub-run asks; its question is docked under the parent's conversation.
            await wait_until(pilot, lambda: screen.query(QuestionPrompt), timeout=30)
            parent = screen.selected_run
            assert parent is not None and parent.parent_run_id is None
            question = screen.query_one(QuestionPrompt).request
            assert question.run_id != parent.id
            assert "sub-run" in str(screen.query_one("#prompt-origin", Static).render())
            assert isinstance(app.focused, AnswerInput)

            # The browser shows the tree: job → parent run → its two sub-runs.
            tree = screen.job_tree
            await wait_until(pilot, lambda: len(screen.conversation.query(ToolCallView)) == 2)
            children = [run for run in await runtime.job_runs(parent.job_id) if run.parent_run_id]
            assert len(children) == 2
            await wait_until(pilot, lambda: all(tree.run_node(c.id) for c in children))
            parent_node = tree.run_node(parent.id)
            assert parent_node is not None
            assert parent_node.parent is tree.job_node(parent.job_id)
            for child in children:
                node = tree.run_node(child.id)
                assert node is not None and node.parent is parent_node
            rows = tree_rows(tree)
            assert any("Part 1 of: summarise" in row for row in rows)
            assert any("Part 2 of: summarise" in row for row in rows)
            # Each sub-run's agent: under the tree for the row under the cursor (every job's
            # agent being the coordinator, the browser has no agent column).
            tree.move_cursor(tree.run_node(children[0].id))
            await wait_until(pilot, lambda: children[0].agent in tree.detail_text())

            # Jump from the delegation block to the sub-run that asks, and back.
            await pilot.press("g")  # typed into the answer field: text, not a key
            assert screen.query_one(AnswerInput).value == "g"
            await pilot.press("backspace")
            await pilot.press("escape")  # out of the field: the run is not interrupted
            assert (await runtime.get_run(parent.id)).state is not RunState.CANCELLED
            await pilot.press("g")  # now g is a key: the conversation pane
            await pilot.press("right_square_bracket")
            block = app.focused
            assert isinstance(block, ToolCallView)
            while isinstance(block, ToolCallView) and block.tool_name != (
                "delegate_to_" + (await runtime.get_run(question.run_id)).agent
            ):
                await pilot.press("right_square_bracket")
                block = app.focused
            assert isinstance(block, ToolCallView)
            await pilot.press("o")
            await wait_until(
                pilot,
                lambda: (
                    screen.selected_run is not None
                    and screen.selected_run.id == question.run_id
                    and screen.conversation.run_id == question.run_id
                ),
            )
            assert screen.selected_run is not None
            assert screen.selected_run.parent_run_id == parent.id
            # On the sub-run itself the prompt is its own (no "asked by" line).
            await wait_until(pilot, lambda: screen.query(QuestionPrompt))
            assert not screen.query_one("#prompt-origin", Static).display
            assert screen.active_bindings["p"].enabled

            await pilot.press("escape")  # to the browser: single keys act on the screen
            await pilot.press("p")
            await wait_until(pilot, lambda: screen.conversation.run_id == parent.id)
            await wait_until(pilot, lambda: isinstance(app.focused, ToolCallView))
            assert isinstance(app.focused, ToolCallView)
            assert (
                app.focused.tool_call_id
                == screen.conversation.tool_view(app.focused.tool_call_id).tool_call_id
            )  # type: ignore[union-attr]

            # The sub-run's question is back under the parent; answer it by digit.
            await wait_until(pilot, lambda: screen.query(QuestionPrompt))
            screen.query_one(QuestionPrompt).focus()
            await pilot.press("1", "enter")  # an option's number, then Enter
            await wait_until(
                pilot,
                lambda: (
                    screen.selected_run is not None
                    and screen.selected_run.id == parent.id
                    and screen.selected_run.state is RunState.COMPLETED
                ),
                timeout=30,
            )
            assert not screen.query(QuestionPrompt)
            for row in tree_rows(tree):
                if "$" in row:
                    assert row.endswith("$0.00"), row  # the cost is never cut

        runs = await runtime.job_runs(parent.job_id)
        assert len(runs) == 3
        assert all(run.state is RunState.COMPLETED for run in runs)
        children = [run for run in runs if run.parent_run_id is not None]
        assert {run.parent_run_id for run in children} == {parent.id}
        assert {run.agent for run in children} == {"researcher", "reviewer"}
        calls = await runtime.tool_calls(parent.id)
        assert {call.child_run_id for call in calls if call.child_run_id} == {
            run.id for run in children
        }
        answered = await runtime.store.get_input_request(question.id)
        assert answered.answer == question.options[0]
    finally:
        await runtime.close()


async def test_job_rows_keep_age_tokens_and_the_whole_cost_at_120_columns(
    runtime: Runtime, workspace: Path
) -> None:
    for task in ("summarise this project and then some more words", "list the TODOs"):
        run = await runtime.start(task)
        await finish_run(runtime, run.id)
    app = make_app(runtime, workspace, hide_ages=False)
    async with app.run_test(size=WIDE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        # A paid model's job among them: the cost column shows (none while nothing cost).
        paid = (await runtime.list_jobs()).items[-1]
        screen.job_tree.upsert_job(paid.model_copy(update={"cost_usd": 0.42}))
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen.job_tree.loaded_runs)
        await pilot.pause()
        rows = [row for row in tree_rows(screen.job_tree) if row.strip()]
        assert len(rows) >= 3
        assert any(row.endswith("$0.42") for row in rows), rows
        for row in rows:
            # One agent: no column repeating it (the title has the room).
            assert re.search(r"[^ ] +\d+s +[\d.]+k? +\$0\.(00|42)$", row), row
            assert "default" not in row
        assert any("…" in row for row in rows)  # a long title is ellipsised, not the figures


async def test_a_retry_s_row_names_the_run_it_goes_on_with(
    runtime: Runtime, workspace: Path
) -> None:
    """A retry's row read "retry", which said nothing of which of the job's runs it retried."""
    first = await runtime.start("parse it")
    await runtime.wait(first.id, timeout=30)  # at its question
    await runtime.cancel(first.id)
    retried = await runtime.retry(first.id)
    again = await runtime.retry((await runtime.cancel(retried.id)).id)
    assert again.retry_of_run_id == retried.id
    app = make_app(runtime, workspace)
    async with app.run_test(size=WIDE) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen.job_tree.loaded_runs)
        await pilot.pause()
        rows = tree_rows(screen.job_tree)
        assert sum("retry of: parse it" in row for row in rows) == 2, rows
        assert not any("retry of: retry" in row for row in rows)


# --- the tool-call block -------------------------------------------------------------------------
@pytest.mark.sandbox
async def test_a_running_shell_command_shows_progress_then_its_result_unfolds_by_enter(
    db_path: Path, workspace: Path
) -> None:
    go = workspace / "go"
    command = (
        "echo preparing the build; "
        "while [ ! -f go ]; do sleep 0.02; done; "
        "echo the build has finished"
    )
    model = ScriptedProvider(
        [Turn(tool_calls=[("shell", {"command": command})]), Turn(text="All done.")]
    )
    runtime = await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=Config(permissions=Permissions(allow=["shell"])),
        model="scripted:test",
        providers=lambda reference: model,
    )
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=WIDE) as pilot:
            screen = main_screen(app)
            await pilot.press(*"build it", "enter")
            await wait_until(pilot, lambda: screen.conversation.query(ToolCallView))
            block = screen.conversation.query_one(ToolCallView)
            bar = block.query_one("#progress", ProgressBar)
            line = block.query_one("#progress-line", Static)
            await wait_until(pilot, lambda: bar.display and line.display)
            assert block.state is ToolCallState.RUNNING
            assert "preparing the build" in str(line.render())
            assert not block.query_one("#result").display

            go.write_text("")
            await wait_until(pilot, lambda: block.state is ToolCallState.COMPLETED)
            await wait_until(pilot, lambda: block.query_one("#result").display)
            assert not bar.display and not line.display
            assert not block.result_expanded

            assert app.focused is screen.composer.input
            await pilot.press("shift+tab")  # composer → conversation
            assert app.focused is screen.conversation
            await pilot.press("right_square_bracket")
            assert app.focused is block
            await pilot.press("enter")
            assert block.result_expanded
            result_text = str(block.query_one("#result-text", Static).render())
            assert "the build has finished" in result_text
            await pilot.press("space")
            assert not block.result_expanded
            await wait_until(
                pilot,
                lambda: (
                    screen.selected_run is not None
                    and screen.selected_run.state is RunState.COMPLETED
                ),
            )
    finally:
        await runtime.close()


async def test_a_tool_with_a_known_total_shows_a_filling_bar_and_hides_it_when_done() -> None:
    class Host(App[None]):
        def compose(self) -> ComposeResult:
            yield ToolCallView(
                tool_call_id="t1",
                name="search",
                arguments={"pattern": "TODO"},
                state=ToolCallState.RUNNING,
            )

    async with Host().run_test(size=(100, 12)) as pilot:
        block = pilot.app.query_one(ToolCallView)
        bar = block.query_one("#progress", ProgressBar)
        assert not bar.display
        block.progress(2, 5, "src/main.py")
        await pilot.pause()
        assert bar.display and bar.total == 5 and bar.progress == 2
        assert "src/main.py" in str(block.query_one("#progress-line", Static).render())
        block.update_state(ToolCallState.COMPLETED, result="2 matches")
        await pilot.pause()
        assert not bar.display
        assert block.query_one("#result").display and not block.result_expanded
        block.focus()
        await pilot.press("enter")
        assert block.result_expanded
        assert "2 matches" in str(block.query_one("#result-text", Static).render())


def test_the_composer_input_has_no_border_of_its_own() -> None:
    # A bordered input inside the composer's rounded border drew two frames, one in another.
    assert "Composer ComposerInput:focus" in Composer.DEFAULT_CSS
    assert "border: none" in Composer.DEFAULT_CSS


@pytest.mark.parametrize("theme", ["agent-dusk", "agent-moss", "agent-paper"])
async def test_a_tool_block_the_keys_reach_is_drawn_highlighted(
    runtime: Runtime, workspace: Path, theme: str
) -> None:
    """Found by a new-user trial: ``]``/``[`` focused a tool block with nothing on screen to
    show which one (``$boost`` is transparent in a theme that sets its ``panel``): only the
    footer changed, and Enter unfolded a result out of sight."""
    run = await runtime.start("summarise")
    await finish_run(runtime, run.id)
    app = make_app(runtime, workspace, theme=theme)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = main_screen(app)
        await wait_for_browser(pilot, app)
        await pilot.press("enter")
        await wait_until(pilot, lambda: len(screen.conversation.query(ToolCallView)) >= 2)
        await pilot.press("g")
        await pilot.press("left_square_bracket")
        block = app.focused
        assert isinstance(block, ToolCallView)
        await pilot.pause()
        x, y = block.region.x + 4, block.region.y  # on its header line, past the state mark

        def background() -> object:
            return app.screen.get_style_at(x, y).bgcolor

        focused = background()
        screen.conversation.focus()
        await wait_until(pilot, lambda: app.focused is screen.conversation)
        await pilot.pause()
        # Unfocused, it is drawn as the conversation around it; focused, it was not.
        assert background() == app.screen.get_style_at(x, block.region.bottom).bgcolor
        assert focused != background()
