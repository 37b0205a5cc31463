"""A message's Markdown, rendered by ``FrozenMarkdown`` block by block with one shared parser."""

from __future__ import annotations

import asyncio

import pytest
from rich.console import Console
from rich.markdown import Markdown as RichMarkdown
from textual.app import App, ComposeResult
from textual.strip import Strip

from tests.tui.helpers import layout_requests, wait_until
from tui.widgets.frozen_markdown import FrozenMarkdown, _Markdown

SAMPLES = [
    "Plain words, nothing else.",
    "# Title\n\nSome *emphasis*, **strong**, `code` and ~~struck~~ text.\n\n"
    "1. first\n2. second\n\n- a\n- b\n\n> quoted\n\n"
    "```python\nprint('hi')\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nSee https://example.org.",
    "A [link](https://example.org) and a second paragraph\nwith a soft break.",
]


class _RichBuilt(_Markdown):
    """The same elements, built by Rich's own constructor (a parser of its own each time)."""

    __init__ = RichMarkdown.__init__  # type: ignore[assignment]


def _segments(markdown: RichMarkdown) -> list[tuple[str, str]]:
    console = Console(width=60, color_system="truecolor", force_terminal=True)
    lines = console.render_lines(markdown, console.options, pad=False)
    return [(segment.text, str(segment.style)) for line in lines for segment in line]


def test_the_shared_parser_renders_exactly_what_richs_own_constructor_does() -> None:
    for source in SAMPLES:
        assert _segments(_Markdown(source)) == _segments(_RichBuilt(source))


def test_documents_parsed_one_after_another_do_not_leak_into_each_other() -> None:
    first = _segments(_Markdown(SAMPLES[1]))
    _segments(_Markdown(SAMPLES[2]))
    assert _segments(_Markdown(SAMPLES[1])) == first
    assert "struck" in "".join(text for text, _ in first)


def test_blocks_begin_after_a_blank_line_at_the_first_column_outside_fences() -> None:
    from tui.widgets.frozen_markdown import block_starts

    assert block_starts("para\n\nnext") == [6]
    assert block_starts("para\n\n") == []  # the next line may continue a list item
    nested = "- a\n\n  continued\n\n    code\n\nafter\n"
    assert block_starts(nested) == [nested.index("after")]
    assert block_starts("```\nx\n\ny\n```\n\nz") == [14]
    assert block_starts("x\n\n```\ncode\n\nmore") == [3]  # inside an open fence: none
    assert block_starts("~~~~\nz\n```\n\nq\n~~~~\n\nw") == [20]  # only its own kind closes it
    assert block_starts("1. a\n\n2. b\n\n## H\n") == [6, 12]
    assert block_starts("x\u2028\u2028y") == []  # only "\n" ends a line, as in Markdown


SOURCE = (
    "# Plan\n\nThe first paragraph, with *emphasis*\nand a soft break.\n\n"
    + "".join(f"{n}. Step {n} of the plan, long enough to wrap at forty columns.\n" for n in (1, 2))
    + "\n- a\n- b\n\n```python\nprint('hi')\n\nprint('there')\n```\n\n"
    "> quoted\n\n---\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nThe end.\n"
)


class _Host(App[None]):
    def compose(self) -> ComposeResult:
        yield FrozenMarkdown(SOURCE, classes="whole")
        yield FrozenMarkdown("", classes="streamed")


def _rows(widget: FrozenMarkdown) -> list[str]:
    return [widget.render_line(y).text.rstrip() for y in range(widget.size.height)]


async def test_text_streamed_in_pieces_is_drawn_as_the_whole_text_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pieces appended as an answer streams end as the same rows as the text given at once (a
    settled message), and each append renders the open block at the end, not the blocks
    before it, so its cost does not grow with the message."""
    from tui.widgets import frozen_markdown
    from tui.widgets.frozen_markdown import block_starts

    rendered: list[str] = []

    class Counted(frozen_markdown._Markdown):
        def __init__(self, markup: str) -> None:
            rendered.append(markup)
            super().__init__(markup)

    async with _Host().run_test(size=(40, 80)) as pilot:
        whole = pilot.app.query_one(".whole", FrozenMarkdown)
        streamed = pilot.app.query_one(".streamed", FrozenMarkdown)
        await pilot.pause()
        monkeypatch.setattr(frozen_markdown, "_Markdown", Counted)
        for start in range(0, len(SOURCE), 7):
            rendered.clear()
            streamed.append(SOURCE[start : start + 7])
            await pilot.pause()
            assert len(rendered) <= 2, rendered  # a block just sealed, and the open one
            assert not any(block_starts(markup) for markup in rendered), rendered  # one each
        assert streamed.source == SOURCE
        assert _rows(streamed) == _rows(whole)
        assert "print('there')" in "\n".join(_rows(whole))
        assert len(_rows(whole)) > 20


async def test_a_write_that_keeps_the_height_repaints_without_a_layout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The screen is laid out again only when a write changes the widget's height."""
    async with _Host().run_test(size=(40, 80)) as pilot:
        streamed = pilot.app.query_one(".streamed", FrozenMarkdown)
        streamed.append("Some words")
        await pilot.pause()
        asked = layout_requests(monkeypatch, streamed)
        streamed.append(" and more")  # the same row
        streamed.append("\n\nA second paragraph.")  # two rows more
        assert asked == [False, True]
        await pilot.pause()
        assert _rows(streamed) == ["Some words and more", "", "A second paragraph."]


async def test_a_class_that_changes_only_the_box_keeps_the_rendered_rows_a_theme_does_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A streaming answer's head gets a margin once its plain tail starts; that rendered the
    whole head (8,000 characters, 10-20 ms) a second time. Colours that change render again."""

    class Host(App[None]):
        CSS = "FrozenMarkdown.-spaced { margin: 0 0 1 0; }"

        def compose(self) -> ComposeResult:
            yield FrozenMarkdown("# Title\n\nSome *words*.\n\n- a\n- b\n")

    rendered: list[str] = []
    original = FrozenMarkdown._render_block

    def spy(self: FrozenMarkdown, source: str, width: int) -> list[Strip]:
        rendered.append(source)
        return original(self, source, width)

    monkeypatch.setattr(FrozenMarkdown, "_render_block", spy)
    async with Host().run_test(size=(40, 20)) as pilot:
        markdown = pilot.app.query_one(FrozenMarkdown)
        # Every block drawn first: rendered a time budget at a time, a loaded machine had
        # blocks still to come after one pause, which counted as rendered again.
        async with asyncio.timeout(30):
            while not markdown.settled:
                await pilot.pause()
        assert rendered and _rows(markdown)[0].strip() == "Title"
        rendered.clear()
        markdown.add_class("-spaced")
        await pilot.pause()
        await pilot.pause()
        assert rendered == []
        assert markdown.styles.margin.bottom == 1
        pilot.app.theme = "textual-light" if pilot.app.theme != "textual-light" else "nord"
        await pilot.pause()
        await pilot.pause()
        assert rendered  # new colours: rendered again


async def test_a_long_text_is_rendered_a_few_blocks_per_frame_and_ends_as_if_rendered_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A fast stream's first piece brings tens of KB; its whole Markdown head (8,000
    characters) was rendered inside the one layout that also mounted the answer, the new job
    and the footer's keys: a frame of 30-35 ms in which keys waited. A layout now renders
    blocks for at most ``RENDER_BUDGET`` (at least one); the rest follows after the frame, and
    the rows end the same."""
    from textual.screen import Screen

    from tui.widgets import frozen_markdown

    source = "\n\n".join(f"Paragraph {n} with *some* words, long enough." for n in range(30))
    per_frame = [0]
    """Blocks rendered from one layout of the screen to the next."""
    render_block = FrozenMarkdown._render_block
    refresh_layout = Screen._refresh_layout

    def counted_block(self: FrozenMarkdown, markup: str, width: int) -> list[Strip]:
        per_frame[-1] += 1
        return render_block(self, markup, width)

    def counted_layout(self: Screen[object], *args: object, **kwargs: object) -> None:
        per_frame.append(0)
        refresh_layout(self, *args, **kwargs)  # type: ignore[arg-type]

    class Host(App[None]):
        def compose(self) -> ComposeResult:
            yield FrozenMarkdown(source)

    monkeypatch.setattr(frozen_markdown, "RENDER_BUDGET", 0.0)  # a block a pass
    monkeypatch.setattr(frozen_markdown, "RESUME_BUDGET", 0.0)
    monkeypatch.setattr(FrozenMarkdown, "_render_block", counted_block)
    monkeypatch.setattr(Screen, "_refresh_layout", counted_layout)
    async with Host().run_test(size=(80, 100)) as pilot:
        markdown = pilot.app.query_one(FrozenMarkdown)
        await wait_until(
            pilot, lambda: _rows(markdown)[-1:] == ["Paragraph 29 with some words, long enough."]
        )
        gradual = _rows(markdown)
        # Before: all 30 in the first layout. Now one, then one after each frame (the last
        # sealed block with the open one after it).
        assert max(per_frame) <= 2, per_frame
        assert sum(per_frame) == 30
        monkeypatch.setattr(frozen_markdown, "RENDER_BUDGET", 10.0)
        markdown.set_source(source)
        await pilot.pause()
        await pilot.pause()
        assert gradual == _rows(markdown)
        assert gradual[0] == "Paragraph 0 with some words, long enough."
        assert len(gradual) == 59  # 30 paragraphs, a blank row between two
