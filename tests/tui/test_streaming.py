"""A long streamed answer: what ends up on screen is exactly the committed message, the view
follows the tail, and a commit that differs from what streamed wins."""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any

import pytest
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Markdown

from runtime.api import Runtime
from runtime.models import Message, Role, RunState, TextBlock
from tests.tui.helpers import SIZE, FrameCount, LayoutCount, make_app, wait_until
from tui.screens.main import MainScreen
from tui.widgets.conversation import Conversation
from tui.widgets.frozen_markdown import FrozenMarkdown
from tui.widgets.message_view import MessageView
from tui.widgets.stream_text import StreamText, wrap_line


def _shown_text(view: MessageView) -> str:
    """The text held by the widgets that draw the message body, in order."""
    parts: list[str] = []
    for child in view.children:
        if isinstance(child, FrozenMarkdown):
            parts.append(child.source)
        elif isinstance(child, StreamText) and child.has_class("plain"):
            parts.append(child.text)
        elif child.has_class("segment"):
            parts.append(child.source)  # type: ignore[attr-defined]
    return "".join(parts)


async def test_a_256_kib_streamed_answer_ends_as_the_committed_text_with_the_tail_in_view(
    runtime: Runtime, workspace: Path
) -> None:
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, MainScreen)
        await pilot.press(*"//stream 256", "enter")  # //: a message, not a command

        def committed_view() -> MessageView | None:
            run = screen.selected_run
            if run is None or run.state is not RunState.COMPLETED:
                return None
            views = [
                v for v in screen.query(MessageView) if v.committed and v.role is Role.ASSISTANT
            ]
            return views[-1] if views and len(views[-1].text) >= 256 * 1024 else None

        await wait_until(pilot, committed_view, timeout=60)
        await pilot.pause()
        view = committed_view()
        assert view is not None
        run = screen.selected_run
        assert run is not None
        stored = [m for m in await runtime.messages(run.id) if m.role is Role.ASSISTANT]
        committed = stored[-1].text
        assert len(committed) == 256 * 1024
        assert view.text == committed
        assert _shown_text(view) == committed
        assert "## Section" in committed  # Markdown: its first part is rendered as Markdown
        assert view.query(FrozenMarkdown)

        conversation = screen.query_one(Conversation)
        assert conversation.max_scroll_y > 0
        assert conversation.scroll_y == conversation.max_scroll_y
        tail = view.query_one(".plain", StreamText)
        last_row = tail.rows[-1].strip() or tail.rows[-2].strip()
        assert last_row and committed.rstrip().endswith(last_row)
        region = tail.region
        assert region.bottom <= conversation.region.bottom + 1  # the tail's last row is on screen


class _Host(App[None]):
    def compose(self) -> ComposeResult:
        yield Conversation(id="conversation")


def _message(message_id: str, text: str, role: Role = Role.ASSISTANT) -> Message:
    return Message(
        id=message_id,
        run_id="run",
        job_id="job",
        position=1,
        role=role,
        content=[TextBlock(text=text)],
        created_at=time.time(),
    )


async def test_a_commit_that_differs_from_the_stream_replaces_what_streamed() -> None:
    paragraph = "Some words that wrap across the width of the view, again and again.\n\n"
    final = "# Title\n\n" + paragraph * 1000  # far beyond the Markdown part, even settled
    streamed = final[:20_000] + "GARBLED" + final[30_000:50_000]  # a gap and a wrong piece
    async with _Host().run_test(size=(80, 24)) as pilot:
        conversation = pilot.app.query_one(Conversation)
        conversation.run_id = "run"
        await conversation.delta("m1", 0, streamed[:20_007], thinking=False)
        await conversation.delta("m1", 30_000, streamed[20_007:], thinking=False)
        await pilot.pause()
        view = conversation.message_views[0]
        assert view.text == streamed

        await conversation.committed(_message("m1", final))
        await pilot.pause()
        assert view.text == final
        assert _shown_text(view) == final
        assert "GARBLED" not in "".join(view.query_one(".plain", StreamText).rows)


async def test_a_long_answer_streams_with_a_plain_tail_and_reads_as_markdown_once_committed() -> (
    None
):
    """Found by a new-user trial: past 8,000 characters a finished answer showed its
    Markdown raw (``**bold**``, ``## Section``): the plain tail that keeps streaming cheap
    stayed after the commit. A committed answer up to 64 KiB is Markdown whole."""
    section = "## Section {n}\n\nSome **bold** words that wrap across the view, again.\n\n"
    final = "".join(section.format(n=n) for n in range(300))  # ~22 KB
    assert 8_000 < len(final) < 64 * 1024
    async with _Host().run_test(size=(80, 24)) as pilot:
        conversation = pilot.app.query_one(Conversation)
        conversation.run_id = "run"
        await conversation.delta("m1", 0, final, thinking=False)
        await pilot.pause()
        view = conversation.message_views[0]
        assert view.query(".plain")  # while it streams: a plain tail after 8,000 characters
        await conversation.committed(_message("m1", final))
        await pilot.pause()
        assert not view.query(".plain")
        assert view.query_one(FrozenMarkdown).source == final
        assert _shown_text(view) == final
    async with _Host().run_test(size=(80, 24)) as pilot:  # read back from the store
        conversation = pilot.app.query_one(Conversation)
        view = MessageView.from_message(_message("m2", final))
        await conversation.mount(view)
        await pilot.pause()
        assert not view.query(".plain") and view.query_one(FrozenMarkdown).source == final


async def test_a_short_answer_stays_markdown_and_a_changed_commit_is_shown() -> None:
    async with _Host().run_test(size=(80, 24)) as pilot:
        conversation = pilot.app.query_one(Conversation)
        conversation.run_id = "run"
        await conversation.delta("m1", 0, "# Plan\n\n- one\n- tw", thinking=False)
        await conversation.committed(_message("m1", "# Plan\n\n- one\n- two\n\n```\ncode\n```\n"))
        await pilot.pause()
        view = conversation.message_views[0]
        assert view.text.endswith("```\ncode\n```\n")
        assert not view.query(StreamText).filter(".plain")
        assert _shown_text(view) == view.text


async def test_a_pasted_prompt_is_shown_as_typed_with_its_line_breaks() -> None:
    prompt = "Traceback (most recent call last):\n  File *main.py*, line 3\n# not a heading"
    async with _Host().run_test(size=(80, 24)) as pilot:
        conversation = pilot.app.query_one(Conversation)
        conversation.run_id = "run"
        await conversation.committed(_message("u1", prompt, Role.USER))
        await pilot.pause()
        view = conversation.message_views[0]
        body = view.query_one(".plain", StreamText)
        assert body.rows[:3] == prompt.splitlines()
        assert not any(isinstance(w, Markdown) for w in view.walk_children())
        assert _shown_text(view) == prompt


async def test_a_streamed_piece_is_laid_out_once() -> None:
    """Each piece grows the text, its message and the conversation's scrollable height: one
    layout places them all. The sizes that layout sets ask for no second one (before, every
    piece cost two layouts and two full frames)."""
    paragraph = "Some words that wrap across the width of the view, again and again.\n\n"
    text = "# Title\n\n" + paragraph * 300  # most of it beyond the Markdown part
    start, piece = 12_000, 700
    async with _Host().run_test(size=(80, 24)) as pilot:
        conversation = pilot.app.query_one(Conversation)
        conversation.run_id = "run"
        await conversation.delta("m1", 0, text[:start], thinking=False)
        view = conversation.message_views[0]
        # The Markdown part is written on a clock and rendered a time budget at a time (more
        # passes on a busy machine): all of it on screen and laid out before counting.
        markdown = view.query_one(FrozenMarkdown)
        await wait_until(pilot, lambda: _shown_text(view) == text[:start] and markdown.settled)
        await pilot.pause()
        await pilot.pause()
        tail = view.query_one(".plain", StreamText)
        layouts = LayoutCount(pilot.app.screen)
        rows = [len(tail.rows)]
        for offset in range(start, start + 5 * piece, piece):
            await conversation.delta("m1", offset, text[offset : offset + piece], thinking=False)
            # Each pause draws what is due: a second layout, if one was asked for, is drawn
            # by the second.
            await pilot.pause()
            await pilot.pause()
            rows.append(len(tail.rows))
        assert all(after > before for before, after in itertools.pairwise(rows))
        assert layouts.count == 5


async def test_a_streamed_piece_is_drawn_in_one_frame_scroll_bar_and_all() -> None:
    """The layout that places a piece draws the conversation's region whole, its scroll bar
    included; the bar is not drawn again, the same, in a frame of its own (before, each
    piece cost a second frame, and a finished answer's last frame came ~35 ms late)."""
    text = "Some words that wrap across the width of the view, again and again.\n" * 400
    start, piece = 3_000, 700
    async with _Host().run_test(size=(80, 24)) as pilot:
        conversation = pilot.app.query_one(Conversation)
        conversation.run_id = "run"
        await conversation.delta("m1", 0, "plain\n\n" + "x" * 9000 + "\n\n", thinking=False)
        view = conversation.message_views[0]
        await wait_until(
            pilot, lambda: view.query(".plain") and view.query_one(FrozenMarkdown).settled
        )
        await pilot.pause()
        await pilot.pause()
        conversation.anchor()  # following the tail, as a run's conversation does
        await pilot.pause()
        assert conversation.max_scroll_y > 0 and conversation.vertical_scrollbar.display
        frames, layouts = FrameCount(pilot.app.screen), LayoutCount(pilot.app.screen)
        offset = len("plain\n\n" + "x" * 9000 + "\n\n")
        before = conversation.max_scroll_y
        for start in range(0, 5 * piece, piece):
            await conversation.delta(
                "m1", offset + start, text[start : start + piece], thinking=False
            )
            for _ in range(4):  # more than a frame's worth of turns: a late frame would come
                await pilot.pause()
        assert conversation.max_scroll_y > before
        assert conversation.scroll_y == conversation.max_scroll_y  # it followed the tail
        assert layouts.count == 5
        assert frames.count == 5
        # What was drawn is what the bar draws afresh: its thumb at the bottom, not stale.
        compositor = pilot.app.screen._compositor
        drawn = [list(strip) for strip in compositor.render_strips()]
        conversation.vertical_scrollbar.refresh()
        await pilot.pause()
        assert [list(strip) for strip in compositor.render_strips()] == drawn


def _sections(count: int) -> str:
    """Markdown in many blocks (headings and numbered lists), as a long answer is."""
    item = "The runtime commits every message as it happens, so **nothing is lost**."
    return "".join(
        f"## Section {n}\n\n" + "".join(f"{k}. {item}\n" for k in range(1, 8)) + "\n"
        for n in range(count)
    )


async def _after_a_long_answer(pilot: Any, conversation: Conversation) -> None:
    """A run with a long answer, then another run opened: the conversation's scroll bar exists
    and has its size (when a new bar first gets one, Textual lays the screen out once more)."""
    conversation.run_id = "run"
    await conversation.delta("m0", 0, "a line\n\n" * 100, thinking=False)
    await pilot.pause()
    await pilot.pause()
    await wait_until(pilot, lambda: conversation.vertical_scrollbar.display)
    await conversation.load("run-2", [], [], has_older=False)
    await wait_until(pilot, lambda: not conversation.vertical_scrollbar.display)
    await pilot.pause()


async def test_a_long_answer_opens_in_one_layout_its_markdown_drawn_and_its_scroll_bar_shown(
    runtime: Runtime, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fast model's first piece goes past the Markdown part of the answer: the answer is laid
    out and drawn in one frame, its Markdown part rendered before that layout, and its scroll
    bar placed by it. Before, the layout rendered the Markdown a time budget at a time, and
    each later frame laid out and drew the screen again only to show more of it (two more
    for a 1 MB answer, ~10 ms each); and the bar, found needed by that layout, was placed by
    a second one, in a frame of its own."""
    from tui.widgets import frozen_markdown

    monkeypatch.setattr(frozen_markdown, "RENDER_BUDGET", 0.0)  # a block a layout pass
    monkeypatch.setattr(frozen_markdown, "RESUME_BUDGET", 0.0)
    monkeypatch.setattr(frozen_markdown, "AHEAD_BUDGET", 10.0, raising=False)
    text = _sections(20) + "A plain tail line.\n" * 200
    async with make_app(runtime, workspace).run_test(size=SIZE) as pilot:
        conversation = pilot.app.query_one(Conversation)
        await _after_a_long_answer(pilot, conversation)
        frames, layouts = FrameCount(pilot.app.screen), LayoutCount(pilot.app.screen)
        await conversation.delta("m1", 0, text, thinking=False)
        for _ in range(10):  # time for any frame after the first (a pass comes 20 ms after)
            await pilot.pause(0.02)
        view = conversation.message_views[-1]
        markdown = view.query_one(FrozenMarkdown)
        assert view.query(".plain") and markdown.settled
        assert _shown_text(view) == text
        assert conversation.vertical_scrollbar.display
        assert conversation.scroll_y == conversation.max_scroll_y > 0  # at the tail
        assert (layouts.count, frames.count) == (1, 1)


async def test_the_piece_that_completes_the_markdown_part_renders_it_before_its_layout(
    runtime: Runtime, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first piece is short (all of it Markdown); the next goes past the Markdown part:
    what it completes is rendered as the piece comes, not a budget per layout, each followed
    by a frame of its own only to show more of it."""
    from tui.widgets import frozen_markdown

    monkeypatch.setattr(frozen_markdown, "RENDER_BUDGET", 0.0)
    monkeypatch.setattr(frozen_markdown, "RESUME_BUDGET", 0.0)
    monkeypatch.setattr(frozen_markdown, "AHEAD_BUDGET", 10.0, raising=False)
    text = _sections(20) + "A plain tail line.\n" * 200
    async with make_app(runtime, workspace).run_test(size=SIZE) as pilot:
        conversation = pilot.app.query_one(Conversation)
        await _after_a_long_answer(pilot, conversation)
        await conversation.delta("m1", 0, text[:300], thinking=False)
        view = conversation.message_views[-1]
        markdown = view.query_one(FrozenMarkdown)
        await wait_until(pilot, lambda: markdown.settled and markdown.source == text[:300])
        for _ in range(5):
            await pilot.pause(0.02)
        layouts = LayoutCount(pilot.app.screen)
        await conversation.delta("m1", 300, text[300:], thinking=False)
        for _ in range(10):
            await pilot.pause(0.02)
        assert view.query(".plain") and markdown.settled
        assert _shown_text(view) == text
        assert layouts.count == 1


async def test_a_growing_answer_does_not_draw_its_message_box_again() -> None:
    """What shows of a message's own box (its side padding, its border) is the same row from
    top to bottom: drawn once, not again each time a streamed piece makes the message taller
    (Textual drew the rows on screen again at every size change)."""
    text = "Some words that wrap across the width of the view, again and again.\n" * 400
    head = "plain\n\n" + "x" * 9000 + "\n\n"
    async with _Host().run_test(size=(80, 24)) as pilot:
        conversation = pilot.app.query_one(Conversation)
        conversation.run_id = "run"
        await conversation.delta("m1", 0, head, thinking=False)
        view = conversation.message_views[0]
        await wait_until(pilot, lambda: view.query_one(FrozenMarkdown).settled)
        conversation.anchor()
        await pilot.pause()
        drawn_rows: list[int] = []
        draw_row = view.render_line

        def counted(y: int) -> Strip:
            drawn_rows.append(y)
            return draw_row(y)

        view.render_line = counted  # type: ignore[method-assign]
        heights = [view.size.height]
        for start in range(0, 5 * 700, 700):
            await conversation.delta(
                "m1", len(head) + start, text[start : start + 700], thinking=False
            )
            for _ in range(4):
                await pilot.pause()
            heights.append(view.size.height)
        assert all(after > before for before, after in itertools.pairwise(heights))
        assert drawn_rows == []


async def test_a_growing_answer_does_not_mark_each_of_its_rows_to_draw_again() -> None:
    """Each time a streamed piece makes the answer taller, Textual empties the lines its tail
    and its message have drawn, then marked each row of their height to draw again: 20,000
    numbers each for a 1 MB answer, two or three times a flush. Now no row is marked while
    nothing drawn is kept (every row is drawn afresh anyway), and what is drawn is what a
    Textual widget draws (this reaches into Textual's private styles cache: a change there
    shows here)."""
    text = "Some words that wrap across the width of the view, again and again.\n" * 3000
    head = "plain\n\n" + "x" * 9000 + "\n\n"
    async with _Host().run_test(size=(80, 24)) as pilot:
        conversation = pilot.app.query_one(Conversation)
        conversation.run_id = "run"
        await conversation.delta("m1", 0, head + text[:100_000], thinking=False)
        view = conversation.message_views[0]
        await wait_until(pilot, lambda: view.query_one(FrozenMarkdown).settled)
        conversation.anchor()
        await pilot.pause()
        tail = view.query_one(".plain", StreamText)
        offset = len(head) + 100_000
        for start in range(offset - len(head), offset - len(head) + 5 * 700, 700):
            await conversation.delta(
                "m1", len(head) + start, text[start : start + 700], thinking=False
            )
            for _ in range(4):
                await pilot.pause()
            assert tail.size.height > 1000
            for widget in (tail, view):
                assert len(widget._styles_cache._dirty_lines) < 100
        compositor = pilot.app.screen._compositor
        drawn = [list(strip) for strip in compositor.render_strips()]
        textual_cache = type(conversation._styles_cache)
        for widget in (tail, view):
            widget._styles_cache = textual_cache()  # Textual's own
            widget.refresh()
        await pilot.pause()
        assert [list(strip) for strip in compositor.render_strips()] == drawn


async def test_a_message_box_is_drawn_as_textual_draws_it_row_for_row() -> None:
    """The box's row, drawn once and repeated, is the row Textual draws for each line: a
    person's message (border and background), an answer, and either marked as a search hit."""
    async with _Host().run_test(size=(80, 24)) as pilot:
        conversation = pilot.app.query_one(Conversation)
        conversation.run_id = "run"
        await conversation.committed(_message("u1", "a question\nover two lines", Role.USER))
        await conversation.delta("m1", 0, "An answer.\n\n" + "word " * 400, thinking=False)
        await pilot.pause()
        for view in conversation.message_views:
            for found in (False, True, False):
                view.set_class(found, "-found")
                await pilot.pause()
                width, height = view.size
                assert height > 1
                for crop in (Region(0, 0, width, height), Region(1, height - 1, width - 2, 1)):
                    view.refresh()
                    textual = [list(strip) for strip in Widget.render_lines(view, crop)]
                    assert [list(strip) for strip in view.render_lines(crop)] == textual


def test_appending_piece_by_piece_wraps_like_wrapping_the_whole_text() -> None:
    text = (
        "word " * 37 + "averyveryverylongwordthatmustbefolded" * 3 + "\n\tindented ünïcödé 日本語\n"
    ) * 20
    for width, size in ((9, 13), (40, 13), (100, 13), (40, 700), (100, 5000)):
        whole = StreamText(text)
        whole.get_content_height(None, None, width)  # type: ignore[arg-type]
        pieces = StreamText()
        pieces.get_content_height(None, None, width)  # type: ignore[arg-type]
        for start in range(0, len(text), size):  # big pieces bring many whole lines each
            pieces._add(text[start : start + size])
        assert pieces.rows == whole.rows
        assert pieces.text == text
        cut = len(text) // 2 + 7  # where the lines start is kept in the text's own offsets
        pieces.truncate(cut)
        shorter = StreamText(text[:cut])
        shorter.get_content_height(None, None, width)  # type: ignore[arg-type]
        assert pieces.rows == shorter.rows
        expected = [
            row
            for line in text.split("\n")
            for row in wrap_line(line.replace("\t", "    "), width)[0]
        ]
        assert whole.rows == expected
        assert all(len(row) <= width for row in whole.rows)


def test_wide_characters_wrap_by_the_cells_they_take_and_every_word_is_kept() -> None:
    from rich.cells import cell_len

    line = "日本語のテキストです とても 長い 行 😀😀 abc 😀😀😀 défgh " * 5
    for width in (1, 2, 3, 8, 13, 40):
        rows, last = wrap_line(line, width)
        assert all(cell_len(row) <= max(width, 2) for row in rows)  # a 2-cell glyph alone
        assert "".join(rows).replace(" ", "") == line.replace(" ", "")
        assert rows[-1] == line[last:]
        # Appending re-wraps from the last row's start: wrapping from there gives the same.
        assert wrap_line(line[last:], width)[0] == [rows[-1]]
    rows = wrap_line("日本語のテキストです とても", 8)[0]
    assert rows == ["日本語の", "テキスト", "です", "とても"]


async def test_deltas_reach_the_live_markdown_in_timed_batches_not_one_write_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each write renders the Markdown part's open block again (a list: all of its items): the
    deltas of a list must not render it once per delta. With the next write
    not due (the interval set to a minute), fifty-odd deltas, each given a turn of the event loop,
    write nothing; the commit writes them at once."""
    from tui.widgets import message_view

    monkeypatch.setattr(message_view, "MARKDOWN_EVERY", 60.0, raising=False)
    text = "# Plan\n\n" + "".join(f"{n}. Step number {n} of the plan.\n" for n in range(1, 6))
    pieces = [text[i : i + 3] for i in range(0, len(text), 3)]
    async with _Host().run_test(size=(80, 24)) as pilot:
        conversation = pilot.app.query_one(Conversation)
        conversation.run_id = "run"
        offset = 0
        for piece in pieces:
            await conversation.delta("m1", offset, piece, thinking=False)
            offset += len(piece)
            await pilot.pause()
        view = conversation.message_views[0]
        markdown = view.query_one(".segment", FrozenMarkdown)
        writes = 0
        append = markdown.append

        def counted(source: str) -> Any:
            nonlocal writes
            writes += 1
            return append(source)

        markdown.append = counted  # type: ignore[method-assign]
        # The view was made with the first piece; the other 59 are held, not lost.
        assert markdown.source == pieces[0] and view.text == text
        await conversation.committed(_message("m1", text))
        await pilot.pause()
        assert _shown_text(view) == text
        assert writes == 1
        assert len(pieces) > 50


async def test_streamed_markdown_is_shown_in_full_within_the_interval_without_a_commit() -> None:
    from tui.widgets.message_view import MARKDOWN_EVERY

    text = "# Plan\n\n- one\n- two\n- three\n\nDone."
    async with _Host().run_test(size=(80, 24)) as pilot:
        conversation = pilot.app.query_one(Conversation)
        conversation.run_id = "run"
        await conversation.delta("m1", 0, text[:10], thinking=False)
        await conversation.delta("m1", 10, text[10:], thinking=False)
        markdown = conversation.message_views[0].query_one(".segment", FrozenMarkdown)
        await wait_until(pilot, lambda: markdown.source == text, timeout=30 + MARKDOWN_EVERY)


async def test_a_commit_right_after_the_last_delta_shows_every_piece() -> None:
    """The commit comes before the Markdown part's next write is due: what was waiting for
    that write is written first, so nothing streamed goes missing from the screen."""
    text = "# Plan\n\n- one\n- two\n- three\n\nDone."
    async with _Host().run_test(size=(80, 24)) as pilot:
        conversation = pilot.app.query_one(Conversation)
        conversation.run_id = "run"
        await conversation.delta("m1", 0, text[:10], thinking=False)
        await pilot.pause()
        await conversation.delta("m1", 10, text[10:], thinking=False)
        await conversation.committed(_message("m1", text))  # no pause: the write is not due yet
        await pilot.pause()
        view = conversation.message_views[0]
        assert _shown_text(view) == text


async def test_a_tui_watching_a_run_another_process_streams_shows_its_answer_as_it_grows(
    db_path: Path, workspace: Path, tmp_path: Path
) -> None:
    """Found by a new-user trial: a second TUI on the same database showed only the prompt of a
    run the first one streamed, until the answer was committed (or, cancelled, until the run was
    opened again). The other process's draft now streams into the conversation, its thinking
    too."""
    from runtime.config import Config
    from tests.fakes.scripted import ScriptedProvider, Turn, open_scripted

    text = "Streamed by the other agent-tui, shown here as it grows. " * 4
    thought = "The other process thinks first; its thinking is in its draft as well."
    provider = ScriptedProvider([Turn(text, thinking=thought, pause_until=tmp_path / "never")])
    executing = await open_scripted(provider, db_path, workspace)
    watching = await Runtime.open(db_path=db_path, workspace=workspace, config=Config())
    try:
        run = await executing.start("go")
        app = make_app(watching, workspace, open_job=run.job_id)
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            assert isinstance(screen, MainScreen)

            def streamed() -> str:
                return "".join(
                    _shown_text(view)
                    for view in screen.query(MessageView)
                    if view.role is Role.ASSISTANT
                )

            await wait_until(pilot, lambda: streamed() == text)
            [answer] = [v for v in screen.query(MessageView) if v.role is Role.ASSISTANT]
            await wait_until(pilot, lambda: answer.thinking_text == thought)
            assert (await watching.get_run(run.id)).state is RunState.RUNNING  # not committed
            await executing.cancel(run.id, reason="interrupted")
            await wait_until(
                pilot,
                lambda: screen.selected_run is not None and screen.selected_run.state.is_terminal,
            )
            assert streamed() == text  # what streamed stays, as in the TUI that ran it
    finally:
        await watching.close()
        await executing.close()


async def test_a_follow_up_sent_from_elsewhere_is_shown_in_the_job_on_screen(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: `agent-tui follow-up JOB …` from another shell put the new
    run in the browser, but the open conversation stayed on the run before it."""
    from runtime.config import Config

    executing = await Runtime.open(
        db_path=db_path, workspace=workspace, config=Config(), model="demo:instant"
    )
    watching = await Runtime.open(db_path=db_path, workspace=workspace, config=Config())
    try:
        first = await executing.start("/stream 20")
        assert (await executing.wait(first.id, timeout=30)).state is RunState.COMPLETED
        app = make_app(watching, workspace, open_job=first.job_id)
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            assert isinstance(screen, MainScreen)
            await wait_until(
                pilot,
                lambda: screen.selected_run is not None and screen.selected_run.id == first.id,
            )
            second = await executing.follow_up(first.job_id, "/stream 10")
            await wait_until(
                pilot,
                lambda: screen.selected_run is not None and screen.selected_run.id == second.id,
            )
            await wait_until(pilot, lambda: screen.conversation.run_id == second.id)
    finally:
        await watching.close()
        await executing.close()
