"""A settled message's Markdown, rendered once by ``FrozenMarkdown`` with one shared parser."""

from __future__ import annotations

from rich.console import Console
from rich.markdown import Markdown as RichMarkdown

from tui.widgets.frozen_markdown import _Markdown

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
