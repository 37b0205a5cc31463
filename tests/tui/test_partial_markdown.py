"""A partial answer (the run stopped mid-stream) reads as Markdown: what the cut left open is
closed, so no raw ``**`` or unterminated code block shows."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

from runtime.models import Role
from runtime.providers.base import ModelEvent, ModelRequest, TextDelta
from runtime.providers.demo import _filler
from tests.fakes.scripted import ScriptedProvider, Turn, open_scripted
from tests.store.helpers import running_run
from tests.tui.helpers import SIZE, main_screen, make_app, open_runtime, wait_until
from tui.widgets.frozen_markdown import FrozenMarkdown
from tui.widgets.message_view import (
    SETTLED_MARKDOWN_CHARS,
    MessageView,
    closed_markdown,
    markdown_cut,
)
from tui.widgets.stream_text import StreamText


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

            def drawn() -> bool:
                # The view shows the draft as it streamed, then settles it as the stopped answer
                # it is (closed): the settled text is what stays (a run once looked in between).
                view = partial()
                return view is not None and any(
                    m.source == "It keeps **nothing committed is**"
                    for m in view.query(FrozenMarkdown)
                )

            await wait_until(pilot, drawn)
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


class _PacedProvider(ScriptedProvider):
    """Streams ``text`` 2 KiB at a time, a few milliseconds apart, then waits to be cancelled.
    Paced as a model is: all at once, it would run more than the bus's 64 KiB per subscriber
    ahead of the app, which would see a gap in the answer."""

    def __init__(self, text: str) -> None:
        super().__init__([])
        self._text = text

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        for start in range(0, len(self._text), 2048):
            yield TextDelta(text=self._text[start : start + 2048])
            await asyncio.sleep(0.005)
        await asyncio.Event().wait()


def _rendered_rows(markdown: FrozenMarkdown) -> str:
    """What the Markdown part draws, as plain text (every block rendered at its width)."""
    return "\n".join(markdown.render_line(y).text for y in range(markdown.virtual_size.height))


async def test_a_partial_answer_past_the_streaming_head_cut_by_escape_is_markdown_up_to_64_kib(
    db_path: Path, workspace: Path, tmp_path: Path
) -> None:
    """Found by a new-user trial: Esc on a ``//stream 300`` answer left it Markdown for its
    first 8,000 characters (the streaming head) and raw ``**bold**`` and ``## Section`` after,
    while a complete answer is Markdown up to 64 KiB."""
    text = _filler(100 * 1024)
    runtime = await open_scripted(_PacedProvider(text), db_path, workspace)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            await pilot.press(*"review", "enter")

            def answer() -> MessageView | None:
                views = [v for v in screen.query(MessageView) if v.role is Role.ASSISTANT]
                return views[0] if views else None

            await wait_until(pilot, lambda: (view := answer()) is not None and view.text == text)
            view = answer()
            assert view is not None
            assert len(view.query_one(FrozenMarkdown).source) < 10_000  # the streaming head
            await pilot.press("escape")
            await wait_until(pilot, lambda: bool(screen.conversation.query(".partial-label")))
            markdown = view.query_one(FrozenMarkdown)
            await wait_until(pilot, lambda: markdown.settled)
            cut = markdown_cut(text, SETTLED_MARKDOWN_CHARS)
            assert cut is not None
            assert markdown.source == text[:cut]
            assert view.query_one(".plain", StreamText).text == text[cut:]
            rows = _rendered_rows(markdown)
            assert "Section 55" in rows  # the last heading before the 64 KiB cut, drawn as one
            assert "**" not in rows and "## Section" not in rows
    finally:
        await runtime.close()


async def test_a_long_partial_answer_read_from_the_database_is_markdown_up_to_64_kib(
    db_path: Path, workspace: Path
) -> None:
    """The same answer as its run is opened again after a crash or a cancel: Markdown up to
    the 64 KiB cut, plain after, with nothing closed in the plain tail (a closing ``**``
    added there showed as typed)."""
    text = _filler(100 * 1024) + "\n\nIt keeps **nothing committed is"
    runtime = await open_runtime(db_path, workspace)
    try:
        store = runtime.store
        await store.register_owner("elsewhere", lease_seconds=30)
        run, token = await running_run(
            store, owner_id="elsewhere", input="review", workspace=str(workspace)
        )
        await store.save_draft(run.id, token=token, message_id="m", text=text)
        await store.cancel_run(run.id, reason="stopped")
        app = make_app(runtime, workspace, open_job=run.job_id)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)

            def partial() -> MessageView | None:
                views = [v for v in screen.query(MessageView) if v.role is Role.ASSISTANT]
                return views[0] if views else None

            def mounted() -> bool:
                # Whole: under load the view was found before its parts were mounted.
                view = partial()
                return (
                    view is not None
                    and bool(view.query(FrozenMarkdown))
                    and bool(view.query(".plain"))
                )

            await wait_until(pilot, mounted)
            view = partial()
            assert view is not None
            cut = markdown_cut(text, SETTLED_MARKDOWN_CHARS)
            assert cut is not None
            assert view.query_one(FrozenMarkdown).source == text[:cut]
            assert view.query_one(".plain", StreamText).text == text[cut:]
    finally:
        await runtime.close()
