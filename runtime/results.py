"""Tool results as the model sees them: a result larger than the limit is cut, head and tail
kept, with a marker that says how much was left out and how to see it. The whole result stays in
the database (the cut happens when a model request is built, never when a result is stored)."""

from __future__ import annotations

DEFAULT_RESULT_LIMIT_TOKENS = 25_000
"""The default limit of one tool result in a model request, in (estimated) tokens."""
CHARS_PER_TOKEN = 4
"""The estimate: about four characters a token (English text and code)."""
_HEAD_SHARE = 0.6
_SNAP = 0.1
"""How far (a share of the kept part) a cut may move back to end at a line break."""


def estimate_tokens(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


def limit_result(
    text: str, *, limit_tokens: int = DEFAULT_RESULT_LIMIT_TOKENS, tool_call_id: str = ""
) -> str:
    """``text`` unchanged when within ``limit_tokens`` (estimated), else its head and tail with a
    marker in between."""
    budget = max(limit_tokens, 1) * CHARS_PER_TOKEN
    if len(text) <= budget:
        return text
    keep = max(budget - 400, budget // 2)  # room for the marker
    head_end = _snap_back(text, int(keep * _HEAD_SHARE), int(keep * _HEAD_SHARE * _SNAP))
    tail_start = _snap_forward(text, len(text) - (keep - head_end), int(keep * _SNAP))
    omitted = tail_start - head_end
    where = f" (tool call {tool_call_id})" if tool_call_id else ""
    tokens = estimate_tokens(text[head_end:tail_start])
    marker = (
        f"\n[… {omitted:,} of {len(text):,} characters (about {tokens:,} tokens) left out here:"
        f" the result is longer than the {limit_tokens:,}-token limit."
        f" The whole result is kept{where}; to see the part left out, call the tool again"
        " asking for less (a range of lines, a page, a narrower query).]\n"
    )
    return text[:head_end] + marker + text[tail_start:]


def _snap_back(text: str, index: int, reach: int) -> int:
    newline = text.rfind("\n", max(0, index - reach), index)
    return newline + 1 if newline >= 0 else index


def _snap_forward(text: str, index: int, reach: int) -> int:
    newline = text.find("\n", index, index + reach)
    return newline + 1 if newline >= 0 else index
