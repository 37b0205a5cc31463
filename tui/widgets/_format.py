"""Small presentation helpers shared by the widgets (icons, ages, token and cost figures)."""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

from rich.cells import cell_len, set_cell_size
from rich.text import Text

from runtime.interrupted import needs_resume
from runtime.kinds import Role, RunState
from tui.formatting import format_age, format_tokens

if TYPE_CHECKING:
    from runtime.models import Run

STATE_ICONS: dict[RunState | None, str] = {
    RunState.QUEUED: "◌",
    RunState.RUNNING: "●",
    RunState.INPUT_REQUIRED: "?",
    RunState.COMPLETED: "✓",
    RunState.FAILED: "✗",
    RunState.CANCELLED: "⊘",
    None: "·",
}


def context_fill(context_tokens: int, window: int | None) -> str:
    """The context used, as a percentage of the model's window ("ctx —" when unknown)."""
    if not window or window <= 0:
        return "ctx —"
    percent = context_tokens * 100 / window
    shown = f"{percent:.0f}" if percent >= 1 or context_tokens == 0 else "<1"
    return f"ctx {shown}%"


def state_text(run: Run) -> str:
    """The run's state in words, with the reason a crash left when it decides what a retry
    does: ``failed · tool outcome unknown``. A run a crash put back in the queue is not going to
    run by itself (it waits for a person, DESIGN §5): ``interrupted · waits for retry``, not
    ``queued``, which reads as if it were about to start; a detached run waits for a worker."""
    state = run.state.value.replace("_", " ")
    if run.state is RunState.FAILED and run.failure is not None:
        if run.failure.code == "tool_indeterminate":
            return f"{state} · tool outcome unknown"
        if run.failure.code == "interrupted":
            return f"{state} · interrupted"
    if run.interrupted and not run.state.is_terminal:
        return "interrupted · waits for retry"
    if run.state is RunState.QUEUED and run.detached:
        # Not this app's to start (``run --detach``, a TUI in --attach mode): it waits for an
        # ``agent-tui worker``, and with none running it waits on.
        return "queued for a worker"
    return state


def run_icon(run: Run) -> str:
    if needs_resume(run):
        return "⚠"
    return STATE_ICONS[run.state]


AGE_TICK = 1.0
"""Seconds between two recomputations of the ages on screen (the browser's, the search hits')."""


def age(timestamp: float, *, now: float | None = None, hidden: bool = False) -> str:
    if hidden:
        return ""
    return format_age((now if now is not None else time.time()) - timestamp)


def tokens(count: int) -> str:
    return format_tokens(count)


def cost(usd: float) -> str:
    return f"${usd:.2f}" if usd >= 0.01 or usd == 0 else f"${usd:.4f}"


def typed_text(text: str, workspace: str | None) -> str:
    """A person's message as they typed it: a skill of ``workspace`` invoked reads
    ``/name args``, not the instructions it expanded to (the store keeps only what the model
    read). Text that only looks like an expansion (a SKILL.md pasted) stays as it is."""
    if workspace is None or not text.startswith("# Skill: "):
        return text
    # The skills bring the config: not at start.
    from runtime.skills import skill_invocation, workspace_skills

    invocation = skill_invocation(text, workspace_skills(workspace))
    return text if invocation is None else invocation.typed


def short(text: str, width: int) -> str:
    """``text`` on one line, cut to ``width`` cells with "…". Counted in cells: a wide
    character (Chinese, Japanese, an emoji) takes two, and a title of them cut by characters
    pushed a browser row's age and tokens out of the pane (a new-user trial)."""
    text = " ".join(text.split())
    if cell_len(text) <= width:
        return text
    return set_cell_size(text, width - 1) + "…"  # a wide one that would not fit: a space


def pad(text: str, width: int) -> str:
    """``text`` padded with spaces to ``width`` cells (``str.ljust`` counts characters)."""
    return text + " " * (width - cell_len(text))


_MARKDOWN_LINE_START = re.compile(r"^\s*(?:#{1,6}\s+|>\s?|[-*+]\s+(?:\[[ xX]\]\s+)?|\d+[.)]\s+)")
_MARKDOWN_FENCE = re.compile(r"^\s*(```|~~~)\S*\s*$")
_MARKDOWN_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_MARKDOWN_STRONG = re.compile(r"(?<![\w/.\\])(\*\*|__)(?=\S)(.+?)(?<=\S)\1(?![\w/\\]|\.\w)")
"""Strong emphasis, not inside a word or a path: ``__init__.py``, ``a__b__c`` stay whole."""
_MARKDOWN_EMPHASIS = re.compile(r"(?<![*\w])\*(?=\S)([^*]+?)(?<=\S)\*(?![*\w])")
_MARKDOWN_CODE = re.compile(r"(`+[^`]*`+)")
HIT_OPEN, HIT_CLOSE = "«", "»"
"""How the store marks the matched terms in a snippet."""


def plain_markdown(text: str) -> str:
    """``text`` without the Markdown marks a reader does not see on screen (heading hashes,
    list bullets, quote bars, fences, emphasis stars, backticks, link targets), one line."""
    lines = []
    for line in text.splitlines():
        if _MARKDOWN_FENCE.match(line):
            continue
        line = _MARKDOWN_LINE_START.sub("", line)
        line = _MARKDOWN_LINK.sub(r"\1", line)
        # Emphasis outside code spans only: `__main__` is code, shown whole.
        parts = _MARKDOWN_CODE.split(line)
        for index in range(0, len(parts), 2):
            parts[index] = _MARKDOWN_EMPHASIS.sub(r"\1", _MARKDOWN_STRONG.sub(r"\2", parts[index]))
        lines.append("".join(parts).replace("`", ""))
    return " ".join(" ".join(lines).split())


def found_words(snippet: str) -> list[str]:
    """The words a search hit matched (between the store's marks), each once, in order."""
    words = re.findall(f"{HIT_OPEN}([^{HIT_CLOSE}]+){HIT_CLOSE}", snippet)
    return list(dict.fromkeys(word for word in words if word.strip()))


def search_snippet(snippet: str, width: int, *, role: Role | None = None) -> Text:
    """A search hit's words as a reader sees them, cut to ``width`` cells, the matched terms
    (between the store's marks) in bold. A tool's result is not Markdown (paths, code, logs):
    it reads as stored, on one line; a person's or the agent's text loses its Markdown marks."""
    plain = " ".join(snippet.split()) if role is Role.TOOL else plain_markdown(snippet)
    first = plain.find(HIT_OPEN)
    lead = max(8, width // 3)
    if first > lead and len(plain) > width:  # the match would be cut off: start nearer to it
        start = plain.rfind(" ", 0, first - lead // 2) + 1
        plain = "…" + plain[start:].lstrip("…")
    plain = short(plain, width)
    text = Text(style="dim")
    for index, part in enumerate(re.split(f"[{HIT_OPEN}{HIT_CLOSE}]", plain)):
        text.append(part, style="bold not dim" if index % 2 else "")
    return text
