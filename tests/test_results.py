"""Tool results in model requests: cut above the limit, head and tail kept, a marker between."""

from __future__ import annotations

from runtime.results import estimate_tokens, limit_result


def test_a_result_within_the_limit_is_unchanged() -> None:
    text = "x" * 400
    assert limit_result(text, limit_tokens=100) is text


def test_a_result_over_the_limit_keeps_head_and_tail_and_says_what_was_left_out() -> None:
    lines = [f"line {number:06d}" for number in range(100_000)]
    text = "\n".join(lines)

    cut = limit_result(text, limit_tokens=1_000, tool_call_id="tc-9")

    assert estimate_tokens(cut) <= 1_000
    assert cut.startswith("line 000000\nline 000001\n")
    assert cut.endswith("line 099999")
    head, marker, rest = cut.partition("\n[… ")
    note, _, tail = rest.partition("]\n")
    omitted = len(text) - len(head) - len(tail)
    assert marker and note.startswith(f"{omitted:,} of {len(text):,} characters")
    assert "1,000-token limit" in note and "tool call tc-9" in note
    assert "call the tool again" in note
    # Cuts fall on line breaks: no half lines on either side.
    assert head.endswith("\n") and tail.startswith("line ")
