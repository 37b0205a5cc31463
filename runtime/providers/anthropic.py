"""Claude through the official ``anthropic`` SDK (DESIGN §9): streaming, tools, thinking, caching.

The SDK streams raw events (``message_start``, ``content_block_start/delta/stop``,
``message_delta``, ``message_stop``; it skips ``ping`` and raises an ``error`` event as a status
error). This adapter turns them into our ``ModelEvent`` values and turns every
SDK or transport failure into ``ModelError``, so the engine never sees a vendor type.

The SDK is created with ``max_retries=0``: the engine retries, visibly, honouring ``retry_after``.
The API key is handed to the SDK and never logged, stored or put in an error message.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any

import anthropic
import httpx2

from runtime.errors import ModelError
from runtime.models import (
    Message,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from runtime.providers import pricing
from runtime.providers.base import (
    ModelEvent,
    ModelRequest,
    RedactedThinking,
    StopReason,
    StopReasonName,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolSpec,
    UsageReport,
)
from runtime.providers.retry_after import parse_retry_after
from runtime.results import limit_result

__all__ = ["DEFAULT_CONTEXT_WINDOW", "AnthropicProvider", "context_window_for"]

log = logging.getLogger(__name__)

DEFAULT_CONTEXT_WINDOW = 200_000

# Longest prefix wins. Models not listed have 200k tokens.
_CONTEXT_WINDOWS: dict[str, int] = {
    "claude-opus-4-6": 1_000_000,
    "claude-opus-4-7": 1_000_000,
    "claude-opus-4-8": 1_000_000,
    "claude-sonnet-4-6": 1_000_000,
    "claude-sonnet-5": 1_000_000,
    "claude-opus-5": 1_000_000,
    "claude-fable-5": 1_000_000,
    "claude-mythos-5": 1_000_000,
}

_CACHE = {"type": "ephemeral"}

_STOP_REASONS: dict[str, StopReasonName] = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "refusal": "refusal",
    "pause_turn": "pause_turn",
    "stop_sequence": "stop_sequence",
    # The prompt plus the answer filled the context: for the engine, the answer was cut short.
    "model_context_window_exceeded": "max_tokens",
}

_VERSION = re.compile(r"^claude-(?:[a-z]+-)?(\d+)(?:-(\d{1,2}))?(?:-|$)")

_KEY_HINT = "Check ANTHROPIC_API_KEY (or use the offline model `demo`)."


def context_window_for(model: str) -> int:
    best = max((p for p in _CONTEXT_WINDOWS if model.startswith(p)), key=len, default=None)
    return _CONTEXT_WINDOWS[best] if best is not None else DEFAULT_CONTEXT_WINDOW


def _uses_adaptive_thinking(model: str) -> bool:
    """Claude 4.6 and later take ``thinking: {type: adaptive}``; 5.x refuse a token budget."""
    match = _VERSION.match(model)
    if match is None:
        return False
    major = int(match.group(1))
    minor = int(match.group(2) or 0)
    return (major, minor) >= (4, 6)


class AnthropicProvider:
    """One Claude model, streamed through ``AsyncAnthropic``."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 600.0,
        connect_timeout: float = 10.0,
        context_window: int | None = None,
    ) -> None:
        self._model = model
        self._context_window = context_window or context_window_for(model)
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=base_url,
            max_retries=0,
            timeout=httpx2.Timeout(timeout, connect=connect_timeout),
        )

    def __repr__(self) -> str:
        return f"AnthropicProvider({self._model!r})"

    @property
    def reference(self) -> str:
        return f"anthropic:{self._model}"

    @property
    def context_window(self) -> int:
        return self._context_window

    def cost_usd(self, usage: Usage) -> float:
        return pricing.cost_usd(self._model, usage)

    async def aclose(self) -> None:
        await self._client.close()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        if not request.model:
            request = request.model_copy(update={"model": self._model})
        params = build_params(request)
        log.debug(
            "anthropic request: model=%s messages=%d tools=%d thinking=%s",
            params["model"],
            len(params["messages"]),
            len(params.get("tools", ())),
            "thinking" in params,
        )
        try:
            response = await self._client.messages.create(**params, stream=True)
        except anthropic.APIError as err:
            raise translate_error(err) from err
        except httpx2.HTTPError as err:
            raise _interrupted(err) from err
        # ``async with`` closes the HTTP stream on any exit, cancellation included.
        async with response:
            folder = _EventFolder()
            try:
                async for raw_event in response:
                    for model_event in folder.fold(raw_event):
                        yield model_event
            except anthropic.APIError as err:
                raise translate_error(err) from err
            except httpx2.HTTPError as err:
                raise _interrupted(err) from err
            if not folder.stopped:
                raise ModelError(
                    "The Anthropic stream ended before the message was complete.",
                    retryable=True,
                    code="stream_interrupted",
                )


# --- request ------------------------------------------------------------------------------------


def build_params(request: ModelRequest) -> dict[str, Any]:
    """The keyword arguments of ``messages.create`` for ``request`` (without ``stream``)."""
    params: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": to_wire_messages(request.messages),
    }
    if request.system:
        params["system"] = [{"type": "text", "text": request.system, "cache_control": _CACHE}]
    if request.tools:
        params["tools"] = to_wire_tools(request.tools)
    if request.thinking_budget:
        if _uses_adaptive_thinking(request.model):
            params["thinking"] = {"type": "adaptive"}
        else:
            budget = max(1024, request.thinking_budget)
            params["thinking"] = {"type": "enabled", "budget_tokens": budget}
            # The budget counts toward max_tokens and must stay below it.
            if request.max_tokens <= budget:
                params["max_tokens"] = budget + request.max_tokens
    return params


def to_wire_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = [
        {"name": t.name, "description": t.description, "input_schema": t.input_schema}
        for t in tools
    ]
    if wire:
        wire[-1]["cache_control"] = _CACHE
    return wire


def to_wire_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Our history as Messages API messages.

    A ``tool`` message becomes a user message of ``tool_result`` blocks; signed thinking is sent
    back unchanged (the API requires it before the tool results of a thinking turn); unsigned
    thinking (from another provider) is dropped; consecutive messages of one role are merged.
    The last block of the last message carries a cache breakpoint.
    """
    wire: list[dict[str, Any]] = []
    for message in messages:
        role = "assistant" if message.role == Role.ASSISTANT else "user"
        blocks = [b for b in (_wire_block(block) for block in message.content) if b is not None]
        if not blocks:
            continue
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": role, "content": blocks})
    if wire:
        for block in reversed(wire[-1]["content"]):
            if block["type"] not in ("thinking", "redacted_thinking"):
                block["cache_control"] = _CACHE
                break
    return wire


def _wire_block(
    block: TextBlock | ThinkingBlock | ToolUseBlock | ToolResultBlock,
) -> dict[str, Any] | None:
    if isinstance(block, TextBlock):
        # The API refuses text blocks that are empty or only whitespace.
        return {"type": "text", "text": block.text} if block.text.strip() else None
    if isinstance(block, ThinkingBlock):
        if block.redacted:
            return {"type": "redacted_thinking", "data": block.thinking}
        if block.signature:
            return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
        return None
    if isinstance(block, ToolUseBlock):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    text = limit_result(block.content, tool_call_id=block.tool_call_id)
    images = [
        {
            "type": "image",
            "source": {"type": "base64", "media_type": image.media_type, "data": image.data},
        }
        for image in block.images
        if image.data is not None
    ]
    content: str | list[dict[str, Any]] = text
    if images:
        content = [{"type": "text", "text": text}, *images] if text.strip() else images
    return {
        "type": "tool_result",
        "tool_use_id": block.tool_use_id,
        "content": content,
        "is_error": block.is_error,
    }


# --- response -----------------------------------------------------------------------------------


class _EventFolder:
    """Turns raw stream events into ModelEvents; unknown events and blocks are skipped."""

    def __init__(self) -> None:
        self.usage = Usage()
        self.stop_reason: StopReasonName = "end_turn"
        self.stopped = False
        self._block_kinds: dict[int, str] = {}
        self._tool_index: dict[int, int] = {}

    def fold(self, raw: object) -> list[ModelEvent]:
        kind = getattr(raw, "type", None)
        if kind == "message_start":
            usage = getattr(getattr(raw, "message", None), "usage", None)
            if usage is not None:
                self._update_usage(usage)
                return [UsageReport(usage=self.usage)]
            return []
        if kind == "content_block_start":
            return self._block_start(getattr(raw, "index", 0), getattr(raw, "content_block", None))
        if kind == "content_block_delta":
            return self._block_delta(getattr(raw, "index", 0), getattr(raw, "delta", None))
        if kind == "content_block_stop":
            index = getattr(raw, "index", 0)
            if index in self._tool_index:
                return [ToolCallEnd(index=self._tool_index[index])]
            return []
        if kind == "message_delta":
            reason = getattr(getattr(raw, "delta", None), "stop_reason", None)
            if reason is not None:
                self.stop_reason = _stop_reason(reason)
            usage = getattr(raw, "usage", None)
            if usage is not None:
                self._update_usage(usage)
                return [UsageReport(usage=self.usage)]
            return []
        if kind == "message_stop":
            self.stopped = True
            return [StopReason(reason=self.stop_reason)]
        log.debug("anthropic stream: skipped an event of unknown type %r", kind)
        return []

    def _block_start(self, index: int, block: object) -> list[ModelEvent]:
        kind = getattr(block, "type", None)
        self._block_kinds[index] = str(kind)
        if kind == "text":
            text = getattr(block, "text", None)
            return [TextDelta(text=text)] if text else []
        if kind == "thinking":
            thinking = getattr(block, "thinking", None)
            return [ThinkingDelta(text=thinking)] if thinking else []
        if kind == "redacted_thinking":
            return [RedactedThinking(data=getattr(block, "data", "") or "")]
        if kind == "tool_use":
            tool_index = len(self._tool_index)
            self._tool_index[index] = tool_index
            return [
                ToolCallStart(
                    index=tool_index,
                    id=str(getattr(block, "id", "")),
                    name=str(getattr(block, "name", "")),
                )
            ]
        log.debug("anthropic stream: skipped a content block of type %r", kind)
        return []

    def _block_delta(self, index: int, delta: object) -> list[ModelEvent]:
        kind = getattr(delta, "type", None)
        if kind == "text_delta":
            text = getattr(delta, "text", None)
            return [TextDelta(text=text)] if text else []
        if kind == "thinking_delta":
            thinking = getattr(delta, "thinking", None)
            return [ThinkingDelta(text=thinking)] if thinking else []
        if kind == "signature_delta":
            signature = getattr(delta, "signature", None)
            return [ThinkingDelta(text="", signature=signature)] if signature else []
        if kind == "input_json_delta" and index in self._tool_index:
            fragment = getattr(delta, "partial_json", None)
            if fragment:
                return [ToolCallDelta(index=self._tool_index[index], json_fragment=fragment)]
            return []
        return []

    def _update_usage(self, usage: object) -> None:
        # Counts in message_delta are cumulative: a present value replaces the earlier one.
        fields = {
            "input_tokens": getattr(usage, "input_tokens", None),
            "output_tokens": getattr(usage, "output_tokens", None),
            "cache_read_tokens": getattr(usage, "cache_read_input_tokens", None),
            "cache_write_tokens": getattr(usage, "cache_creation_input_tokens", None),
        }
        present = {name: int(value) for name, value in fields.items() if value is not None}
        self.usage = self.usage.model_copy(update=present)


def _stop_reason(reason: str) -> StopReasonName:
    mapped = _STOP_REASONS.get(reason)
    if mapped is None:
        log.warning("anthropic stream: unknown stop reason %r, treated as end_turn", reason)
        return "end_turn"
    return mapped


# --- errors -------------------------------------------------------------------------------------


def translate_error(err: anthropic.APIError) -> ModelError:
    """An SDK error as a ModelError: retryable for rate limits, overload, 5xx and broken streams."""
    if isinstance(err, anthropic.APIStatusError):
        return _status_error(err)
    if isinstance(err, anthropic.APIConnectionError):
        return _interrupted(err)
    return ModelError(
        f"Anthropic returned a response this program could not read: {err.message}",
        retryable=False,
        code="invalid_response",
    )


def _status_error(err: anthropic.APIStatusError) -> ModelError:
    status = err.status_code
    error_type = err.type or ""
    detail = err.api_message or _short(err.message)
    retry_after = parse_retry_after(err.response.headers)
    in_stream = status < 400  # an ``error`` event inside a 200 stream
    where = "during the stream" if in_stream else f"(HTTP {status})"
    if error_type == "overloaded_error" or status == 529:
        return ModelError(
            f"Anthropic is overloaded {where}: {detail}",
            retryable=True,
            code="overloaded",
            status=status,
            retry_after=retry_after,
        )
    if status in (401, 403) or error_type in ("authentication_error", "permission_error"):
        return ModelError(
            f"Anthropic refused the credentials (HTTP {status}): {detail}. {_KEY_HINT}",
            retryable=False,
            code="auth_failed",
            status=status,
        )
    if status == 429 or error_type == "rate_limit_error":
        return ModelError(
            f"Anthropic rate limit reached {where}: {detail}",
            retryable=True,
            code="rate_limited",
            status=status,
            retry_after=retry_after,
        )
    if status >= 500 or status == 408 or in_stream:
        return ModelError(
            f"Anthropic server error {where}: {detail}",
            retryable=True,
            code="server_error",
            status=status,
            retry_after=retry_after,
        )
    return ModelError(
        f"Anthropic rejected the request (HTTP {status}): {detail}",
        retryable=False,
        code="invalid_request",
        status=status,
    )


def _interrupted(err: Exception) -> ModelError:
    return ModelError(
        f"The connection to Anthropic was interrupted: {_short(str(err)) or type(err).__name__}",
        retryable=True,
        code="stream_interrupted",
    )


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
