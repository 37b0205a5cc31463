"""A pure reducer: a provider's event stream folded into message content and tool calls.

``Fold.apply`` takes one event and returns the text it shows (to publish as a delta), if any.
Orderings no provider may send (arguments or an end for a tool call that was never started, a
tool call started twice, arguments after its end) raise a retryable ``protocol_error``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from runtime.engine.execution import DELEGATE_PREFIX
from runtime.errors import ModelError
from runtime.ids import new_id
from runtime.models import ContentBlock, TextBlock, ThinkingBlock, ToolUseBlock, Usage
from runtime.providers.base import (
    ModelEvent,
    RedactedThinking,
    StopReason,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageReport,
)
from runtime.store.base import NewToolCall, cut_short_usage
from runtime.tools.base import Tool


class _Pieces:
    """Text kept as the pieces it streamed in (an append each), read back from any offset.

    Readers (the bus handing pieces out, the draft kept on a clock) each read on from where
    they last stopped: where a read ended is remembered as (offset → piece index), so the
    next one from there joins the pieces after it at C speed instead of walking back over
    them one by one (a 1 MB answer is ~150,000 pieces)."""

    __slots__ = ("_ends", "length", "pieces")

    MARKS = 8
    """Read ends remembered (a reader or two per message)."""

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.length = 0
        self._ends: dict[int, int] = {0: 0}

    def add(self, text: str) -> None:
        self.pieces.append(text)
        self.length += len(text)

    def whole(self) -> str:
        joined = "".join(self.pieces)
        self.pieces = [joined]
        self._ends = {0: 0, self.length: 1}
        return joined

    def since(self, start: int) -> str:
        """The text from character ``start`` on."""
        index = self._ends.get(start)
        if index is not None:
            text = "".join(self.pieces[index:])
        else:  # not where a read ended: walk back from the end (a short way, as a rule)
            taken: list[str] = []
            end = self.length
            index = len(self.pieces)
            while index > 0 and end > start:
                index -= 1
                piece = self.pieces[index]
                end -= len(piece)
                taken.append(piece)
            taken.reverse()
            text = "".join(taken)[max(start - end, 0) :]
        if len(self._ends) >= self.MARKS:
            del self._ends[next(iter(self._ends))]  # the oldest
        self._ends[self.length] = len(self.pieces)
        return text


@dataclass(frozen=True)
class Shown:
    """Text an event added, at ``offset`` in the message's text (or thinking)."""

    offset: int
    text: str
    thinking: bool = False


def _protocol_error(text: str) -> ModelError:
    return ModelError(text, retryable=True, code="protocol_error")


class Fold:
    """Folds a provider's event stream into message content and tool calls."""

    def __init__(self) -> None:
        self.blocks: list[dict[str, Any]] = []
        self.tools: dict[int, dict[str, Any]] = {}
        self.usage = Usage()
        self.stop_reason = "end_turn"
        self._text = _Pieces()
        self._thinking = _Pieces()

    def apply(self, event: ModelEvent) -> Shown | None:
        """Fold one event in; the text it shows, if any."""
        if isinstance(event, TextDelta):
            offset = self._text.length
            self.add_text(event.text)
            return Shown(offset, event.text)
        if isinstance(event, ThinkingDelta):
            offset = self._thinking.length
            self.add_thinking(event.text, event.signature)
            return Shown(offset, event.text, thinking=True) if event.text else None
        if isinstance(event, RedactedThinking):
            self.blocks.append({"type": "redacted", "data": event.data})
        elif isinstance(event, ToolCallStart):
            self.start_tool(event.index, event.id, event.name)
        elif isinstance(event, ToolCallDelta):
            self.tool_arguments(event.index, event.json_fragment)
        elif isinstance(event, ToolCallEnd):
            self._open_tool(event.index, "an end").setdefault("ended", True)
        elif isinstance(event, UsageReport):
            self.usage = merge_usage(self.usage, event.usage)
        elif isinstance(event, StopReason):
            self.stop_reason = event.reason
        return None

    def _current(self, kind: str) -> dict[str, Any]:
        if self.blocks and self.blocks[-1]["type"] == kind:
            return self.blocks[-1]
        block: dict[str, Any] = {"type": kind, "parts": [], "signature": None}
        self.blocks.append(block)
        return block

    @property
    def text_length(self) -> int:
        return self._text.length

    @property
    def thinking_length(self) -> int:
        return self._thinking.length

    def add_text(self, text: str) -> None:
        self._current("text")["parts"].append(text)
        pieces = self._text  # inline: once per delta
        pieces.pieces.append(text)
        pieces.length += len(text)

    def all_text(self) -> str:
        return self._text.whole()

    def text_since(self, start: int) -> str:
        """The text from character ``start`` on; costs about its length (the pieces after
        ``start``), not the length of all the text."""
        return self._text.since(start)

    def thinking_since(self, start: int) -> str:
        """The thinking from character ``start`` on (as ``text_since``)."""
        return self._thinking.since(start)

    def add_thinking(self, text: str, signature: str | None) -> None:
        block = self._current("thinking")
        block["parts"].append(text)
        if signature:
            block["signature"] = signature
        self._thinking.add(text)

    def start_tool(self, index: int, provider_id: str, name: str) -> None:
        if index in self.tools:
            raise _protocol_error(f"the model started tool call {index} twice")
        entry = {"type": "tool", "index": index, "id": provider_id, "name": name, "json": []}
        self.tools[index] = entry
        self.blocks.append(entry)

    def _open_tool(self, index: int, what: str) -> dict[str, Any]:
        entry = self.tools.get(index)
        if entry is None:
            raise _protocol_error(f"the model sent {what} for tool call {index} before starting it")
        if entry.get("ended"):
            raise _protocol_error(f"the model sent {what} for tool call {index} after its end")
        return entry

    def tool_arguments(self, index: int, fragment: str) -> None:
        self._open_tool(index, "arguments")["json"].append(fragment)

    def usage_so_far(self) -> Usage:
        """The usage of the message as far as it streamed, for a message cut short before its
        end: what the provider reported with the output estimated from the characters streamed
        (text, thinking and tool arguments), as ``cut_short_usage`` counts it."""
        chars = self._text.length + self._thinking.length
        chars += sum(len(piece) for tool in self.tools.values() for piece in tool["json"])
        return cut_short_usage(self.usage, streamed_chars=chars)

    def result(self, tools: dict[str, Tool]) -> tuple[list[ContentBlock], list[NewToolCall]]:
        content: list[ContentBlock] = []
        calls: list[NewToolCall] = []
        for block in self.blocks:
            kind = block["type"]
            if kind == "text":
                text = "".join(block["parts"])
                if text:
                    content.append(TextBlock(text=text))
            elif kind == "thinking":
                content.append(
                    ThinkingBlock(thinking="".join(block["parts"]), signature=block["signature"])
                )
            elif kind == "redacted":
                content.append(ThinkingBlock(thinking=block["data"], redacted=True))
            elif kind == "tool":
                use, call = _tool_call(block, tools)
                content.append(use)
                calls.append(call)
        return content, calls


def _tool_call(block: dict[str, Any], tools: dict[str, Tool]) -> tuple[ToolUseBlock, NewToolCall]:
    raw = "".join(block["json"]).strip()
    try:
        arguments = json.loads(raw) if raw else {}
    except json.JSONDecodeError:
        arguments = {"_invalid_json": raw}
    if not isinstance(arguments, dict):
        arguments = {"_invalid_json": raw}
    tool_call_id = new_id()
    tool = tools.get(block["name"])
    use = ToolUseBlock(
        id=block["id"], tool_call_id=tool_call_id, name=block["name"], input=arguments
    )
    call = NewToolCall(
        id=tool_call_id,
        provider_id=block["id"],
        name=block["name"],
        arguments=arguments,
        idempotent=bool(tool is not None and tool.read_only)
        or block["name"].startswith(DELEGATE_PREFIX),
    )
    return use, call


def merge_usage(old: Usage, new: Usage) -> Usage:
    return Usage(
        input_tokens=new.input_tokens or old.input_tokens,
        output_tokens=new.output_tokens or old.output_tokens,
        cache_read_tokens=new.cache_read_tokens or old.cache_read_tokens,
        cache_write_tokens=new.cache_write_tokens or old.cache_write_tokens,
    )
