"""A partial answer (the run stopped mid-stream) reads as Markdown: what the cut left open is
closed, so no raw ``**`` or unterminated code block shows."""

from __future__ import annotations

from pathlib import Path

from runtime.models import Role
from tests.fakes.scripted import ScriptedProvider, Turn, open_scripted
from tests.store.helpers import running_run
from tests.tui.helpers import SIZE, main_screen, make_app, open_runtime, wait_until
from tui.widgets.frozen_markdown import FrozenMarkdown
from tui.widgets.message_view import MessageView, closed_markdown


def test_bold_open_at_the_cut_is_closed() -> None:
    assert closed_markdown("Nothing is lost: **nothing committed is") == (
        "Nothing is lost: **nothing committed is**"
    )


def test_a_code_span_open_at_the_cut_is_closed() -> None:
    assert closed_markdown("Run `agent-tui ret") == "Run `agent-tui ret`"


def test_a_code_block_open_at_the_cut_is_closed() -> None:
    text = "Here:\n\n```python\nprint('hi')\n"
    assert closed_markdown(text) == text + "```"
    assert closed_markdown("```sh\nls") == "```sh\nls\n```"


def test_markers_closed_in_earlier_paragraphs_and_closed_ones_are_left_alone() -> None:
    for text in (
        "**bold** and `code`",
        "an **open\n\nparagraph then a plain one",
        "```\ncode\n```\n\nafter",
        "",
    ):
        assert closed_markdown(text) == text


async def test_a_partial_answer_cut_inside_bold_shows_no_raw_stars(
    db_path: Path, workspace: Path
) -> None:
    runtime = await open_runtime(db_path, workspace)
    try:
        store = runtime.store
        await store.register_owner("elsewhere", lease_seconds=30)
        run, token = await running_run(
            store, owner_id="elsewhere", input="why?", workspace=str(workspace)
        )
        await store.save_draft(
            run.id, token=token, message_id="m", text="It keeps **nothing committed is"
        )
        await store.cancel_run(run.id, reason="stopped")
        app = make_app(runtime, workspace, open_job=run.job_id)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)

            def partial() -> MessageView | None:
                views = [v for v in screen.query(MessageView) if v.role is Role.ASSISTANT]
                return views[0] if views else None

            await wait_until(pilot, lambda: partial() is not None)
            view = partial()
            assert view is not None
            markdown = view.query_one(FrozenMarkdown)
            assert markdown.source == "It keeps **nothing committed is**"
            assert view.text == "It keeps **nothing committed is**"
    finally:
        await runtime.close()


async def test_an_answer_cut_inside_bold_while_on_screen_shows_no_raw_stars(
    db_path: Path, workspace: Path, tmp_path: Path
) -> None:
    """Found by a new-user trial: Esc on a short answer streaming on screen left a raw
    ``**nothing`` (opening the run again closed it); a short answer is all Markdown, and that
    part was left as it streamed."""
    provider = ScriptedProvider(
        [Turn("It keeps **nothing committed is", pause_until=tmp_path / "never")]
    )
    runtime = await open_scripted(provider, db_path, workspace)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            await pilot.press(*"why?", "enter")  # a new job, its answer on screen as it streams

            def partial() -> MessageView | None:
                views = [v for v in screen.query(MessageView) if v.role is Role.ASSISTANT]
                return views[0] if views else None

            await wait_until(
                pilot, lambda: (view := partial()) is not None and view.text.endswith("is")
            )
            run = screen.selected_run
            assert run is not None
            await runtime.cancel(run.id, reason="interrupted")
            await wait_until(pilot, lambda: bool(screen.query(".partial-label")))
            view = partial()
            assert view is not None
            assert view.query_one(FrozenMarkdown).source == "It keeps **nothing committed is**"
    finally:
        await runtime.close()
