"""Context compaction (DESIGN §16), the pure part: when to compact, where to cut, what to ask the
model, and the history that replaces the older part.

Before a model call the engine decides as ``needs_compaction`` does (with a ``HistoryTally``),
counting the whole request: its messages, its system prompt and its tool definitions
(``tool_specs_tokens``, as ``/context`` counts them). When the system prompt and the tool
definitions, with room for the summary (``summary_allowance``), leave the recent history
(almost) no room below the share of the window, compacting cannot make room and the engine does
not compact (``compaction_can_help``).
``plan_compaction`` picks the older messages to summarise and the recent ones to keep
(``kept_share`` of the window), never splitting a ``tool_use`` from its ``tool_result`` (the
kept part never starts with a tool message); ``summary_request_text`` is the transcript the
model summarises; ``compacted_history`` is summary + recent turns. The originals are never
deleted: a compaction record names the messages it covered, and forks from before it see
everything.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from runtime.models import (
    Message,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)

if TYPE_CHECKING:
    from runtime.providers.base import ToolSpec

__all__ = [
    "COMPACTION_INSTRUCTIONS",
    "SUMMARISER_SYSTEM",
    "SUMMARY_MAX_TOKENS",
    "CompactionPlan",
    "HistoryTally",
    "compacted_history",
    "compaction_can_help",
    "compaction_room",
    "estimate_tokens",
    "kept_share",
    "needs_compaction",
    "plan_compaction",
    "summary_allowance",
    "summary_request_text",
    "tool_specs_chars",
    "tool_specs_tokens",
]

CHARS_PER_TOKEN = 4
"""A rough, provider-independent estimate; real usage replaces it once a call reports it."""
DEFAULT_SHARE = 0.8
KEEP_RECENT_SHARE = 0.25
"""Of the context window, how much recent history is kept verbatim after a compaction."""
SUMMARY_MAX_TOKENS = 4096
"""The most a summary call may answer."""
FIRST_SUMMARY_SHARE = 0.05
"""Of the context window, what a first summary is expected to take (``summary_allowance``)."""
MIN_ROOM_SHARE = 0.02
"""Of the context window, the least room a compaction must leave the recent history to be
worth its call (``compaction_can_help``)."""

COMPACTION_INSTRUCTIONS = (
    "Summarise the conversation below so that the work can continue from the summary alone. "
    "Keep: the person's goal and every requirement they stated, decisions made and why, files "
    "read or changed (with paths) and what was learnt from them, commands run and their "
    "outcomes, open questions, and the next steps. Be specific and concise; do not invent."
)
SUMMARISER_SYSTEM = (
    "You are agent-tui's summariser. You write the summary that replaces the older part of a "
    "conversation between a person and an agent; answer with the summary only."
)
"""The system prompt of a summary request (the demo model recognises it)."""
SUMMARY_HEADER = "Summary of the earlier part of this conversation (compacted):"


_UNICODE_JSON = json.JSONEncoder(ensure_ascii=False)
"""``json.dumps(value, ensure_ascii=False)`` without making an encoder at each call."""


def _block_chars(block: object) -> int:
    if isinstance(block, TextBlock):
        return len(block.text)
    if isinstance(block, ThinkingBlock):
        return len(block.thinking)
    if isinstance(block, ToolUseBlock):
        return len(block.name) + len(_UNICODE_JSON.encode(block.input))
    if isinstance(block, ToolResultBlock):
        return len(block.content)
    return 0


def message_chars(message: Message) -> int:
    return sum(_block_chars(b) for b in message.content)


MESSAGE_TOKENS = 4
"""What a message costs beyond its characters (its role and framing), in the estimates."""


def tool_specs_chars(specs: Sequence[ToolSpec]) -> int:
    """The characters the definitions of ``specs`` take in a request (name, description and
    JSON Schema), for the estimates: ``/context``'s "tool definitions" and the demo model's
    input tokens."""
    return sum(
        len(spec.name) + len(spec.description) + len(json.dumps(spec.input_schema))
        for spec in specs
    )


def tool_specs_tokens(specs: Sequence[ToolSpec]) -> int:
    """The tokens the definitions of ``specs`` take in a request, estimated: ``/context``'s
    "tool definitions", and what compaction counts for them."""
    return tool_specs_chars(specs) // CHARS_PER_TOKEN


def estimate_tokens(
    messages: Sequence[Message],
    *,
    system: str = "",
    tools: Sequence[ToolSpec] = (),
    chars_of: Callable[[Message], int] = message_chars,
) -> int:
    """A request of ``messages`` with the system prompt ``system`` and the tool definitions
    ``tools``. ``chars_of``: ``message_chars``, or what gives the same faster (a
    ``HistoryTally``'s ``chars_of``, for messages it counted)."""
    chars = len(system) + sum(chars_of(m) for m in messages)
    return chars // CHARS_PER_TOKEN + MESSAGE_TOKENS * len(messages) + tool_specs_tokens(tools)


class HistoryTally:
    """``estimate_tokens`` of a growing history's requests, each message counted once: prefix
    sums of the characters of the messages of one history list, extended with what it gained
    since the last call (a step costs the same whatever the length of the history). Counted
    again from the start when the list is not the one counted (another list, or shorter)."""

    def __init__(self) -> None:
        self._prefix: list[int] = [0]
        """``_prefix[i]``: the characters of the history's first ``i`` messages."""
        self._counted: dict[int, tuple[Message, int]] = {}
        """``id(message)`` → the message and its characters, for the history's messages."""
        self._first: Message | None = None
        self._last: Message | None = None
        self._tools: tuple[Sequence[ToolSpec], int] = ((), 0)
        """The tool definitions last counted (the same list from step to step), and their
        tokens: counted again only for another list."""

    def _tool_tokens(self, tools: Sequence[ToolSpec]) -> int:
        if tools is not self._tools[0]:
            self._tools = (tools, tool_specs_tokens(tools))
        return self._tools[1]

    def overhead(self, *, system: str = "", tools: Sequence[ToolSpec] = ()) -> int:
        """What a request sends whatever its messages: ``estimate_tokens([], system=system,
        tools=tools)``."""
        return len(system) // CHARS_PER_TOKEN + self._tool_tokens(tools)

    def _extend(self, history: Sequence[Message]) -> None:
        counted = len(self._prefix) - 1
        if counted and (
            counted > len(history)
            or history[0] is not self._first
            or history[counted - 1] is not self._last
        ):
            self._prefix, counted = [0], 0
            self._counted = {}
        total = self._prefix[-1]
        for message in history[counted:]:
            chars = message_chars(message)
            self._counted[id(message)] = (message, chars)
            total += chars
            self._prefix.append(total)
        self._first = history[0] if history else None
        self._last = history[-1] if history else None

    def chars_of(self, message: Message) -> int:
        """``message_chars(message)``: looked up for a message of the history counted last."""
        found = self._counted.get(id(message))
        if found is not None and found[0] is message:
            return found[1]
        return message_chars(message)

    def estimate(
        self,
        messages: Sequence[Message],
        history: Sequence[Message],
        *,
        system: str = "",
        tools: Sequence[ToolSpec] = (),
    ) -> int:
        """``estimate_tokens(messages, system=system, tools=tools)`` for a request made from
        ``history``: ``messages[1:]`` must be the last ``len(messages) - 1`` messages of
        ``history`` (the whole history, or a compaction's summary or merged first turn, then
        the kept tail)."""
        if not messages:
            return self.overhead(system=system, tools=tools)
        self._extend(history)
        tail = len(messages) - 1
        chars = message_chars(messages[0]) + self._prefix[-1] - self._prefix[-1 - tail]
        counted = (len(system) + chars) // CHARS_PER_TOKEN + MESSAGE_TOKENS * len(messages)
        return counted + self._tool_tokens(tools)


def needs_compaction(
    messages: Sequence[Message],
    *,
    context_window: int,
    system: str = "",
    tools: Sequence[ToolSpec] = (),
    share: float = DEFAULT_SHARE,
) -> bool:
    """Whether the request would take more than ``share`` of the window, tool definitions
    included (and whether compacting could help at all is ``compaction_can_help``)."""
    return estimate_tokens(messages, system=system, tools=tools) > context_window * share


def summary_allowance(*, context_window: int, previous_summary: str | None = None) -> int:
    """The tokens the summary of a compaction is expected to take in the requests after it:
    as many as the previous summary's, which it folds in; a first one ``FIRST_SUMMARY_SHARE``
    of the window, at most ``SUMMARY_MAX_TOKENS`` (what the summary call may answer)."""
    first = min(SUMMARY_MAX_TOKENS, int(context_window * FIRST_SUMMARY_SHARE))
    if not previous_summary:
        return first
    header = len(SUMMARY_HEADER) + 2
    return max(first, (header + len(previous_summary)) // CHARS_PER_TOKEN + MESSAGE_TOKENS)


def compaction_room(
    overhead: int, *, context_window: int, share: float, summary_tokens: int
) -> float:
    """The tokens a compaction leaves the recent history below ``share`` of the window: what
    remains once every request's ``overhead`` (the system prompt and the tool definitions) and
    the summary (``summary_tokens``, as ``summary_allowance`` expects it) are counted."""
    return context_window * share - overhead - summary_tokens


def compaction_can_help(room: float, *, context_window: int) -> bool:
    """False when a compaction would leave the recent history less than ``MIN_ROOM_SHARE`` of
    the window (``room``, from ``compaction_room``): the request after it would still be past
    the threshold, or soon again, and compacting before each step would only cost calls."""
    return room >= context_window * MIN_ROOM_SHARE


def kept_share(room: float, *, context_window: int) -> float:
    """Of the window, how much recent history a compaction keeps: ``KEEP_RECENT_SHARE``, or
    less when the system prompt, the tool definitions and the summary leave the messages less
    ``room`` below the threshold (``compaction_room``): half that room, so that the requests
    after a compaction can grow for a while before the next one (not compact again at once)."""
    return max(0.0, min(KEEP_RECENT_SHARE, room / 2 / context_window))


@dataclass(frozen=True)
class CompactionPlan:
    summarised: list[Message]
    kept: list[Message]

    @property
    def through_message_id(self) -> str:
        """The last message the summary covers (what the compaction record names)."""
        return self.summarised[-1].id


def plan_compaction(
    messages: Sequence[Message],
    *,
    context_window: int,
    keep_share: float = KEEP_RECENT_SHARE,
    chars_of: Callable[[Message], int] = message_chars,
) -> CompactionPlan | None:
    """Cut so that the kept tail fits in ``keep_share`` of the window and starts at a message a
    model request may start from (never a tool message: its ``tool_use`` would be summarised
    away). None when the whole history already fits in the kept share: there is nothing worth
    summarising yet. ``chars_of`` as for ``estimate_tokens``."""
    budget = int(context_window * keep_share)
    if estimate_tokens(messages, chars_of=chars_of) <= budget:
        return None
    cut = len(messages)
    kept_tokens = 0
    for index in range(len(messages) - 1, 0, -1):
        kept_tokens += estimate_tokens([messages[index]], chars_of=chars_of)
        if kept_tokens > budget:
            break
        if messages[index].role is not Role.TOOL:
            cut = index
    if cut >= len(messages):
        # Even the last turn is bigger than the budget: keep just the last safe start.
        cut = next(
            (i for i in range(len(messages) - 1, 0, -1) if messages[i].role is not Role.TOOL), 0
        )
    if cut <= 0:
        return None
    return CompactionPlan(summarised=list(messages[:cut]), kept=list(messages[cut:]))


def _render(message: Message) -> str:
    parts: list[str] = []
    for block in message.content:
        if isinstance(block, TextBlock) and block.text.strip():
            parts.append(block.text.strip())
        elif isinstance(block, ToolUseBlock):
            parts.append(f"[called {block.name} {_UNICODE_JSON.encode(block.input)}]")
        elif isinstance(block, ToolResultBlock):
            status = "error" if block.is_error else "result"
            text = block.content if len(block.content) <= 4000 else block.content[:4000] + " […]"
            parts.append(f"[{status}: {text}]")
    return f"{message.role.value}: " + "\n".join(parts) if parts else ""


def summary_request_text(plan: CompactionPlan, *, previous_summary: str | None = None) -> str:
    """The user turn sent to the model to get the summary."""
    lines = [COMPACTION_INSTRUCTIONS, ""]
    if previous_summary:
        lines += ["An earlier summary, to fold in:", previous_summary, ""]
    lines += ["<conversation>"]
    lines += [text for m in plan.summarised if (text := _render(m))]
    lines += ["</conversation>"]
    return "\n".join(lines)


def compacted_history(summary: str, plan: CompactionPlan) -> list[Message]:
    """Summary + recent turns, as the model request's history. The summary rides in a user
    message: merged into the first kept message when that is a user turn, otherwise before it
    (so roles still alternate)."""
    note = TextBlock(text=f"{SUMMARY_HEADER}\n\n{summary.strip()}")
    first = plan.kept[0]
    if first.role is Role.USER:
        merged = first.model_copy(update={"content": [note, *first.content]})
        return [merged, *plan.kept[1:]]
    anchor = plan.summarised[-1]
    summary_message = Message(
        id=f"{anchor.id}:summary",
        run_id=first.run_id,
        job_id=first.job_id,
        position=first.position,
        role=Role.USER,
        content=[note],
        created_at=first.created_at,
    )
    return [summary_message, *plan.kept]
