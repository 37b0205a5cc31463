"""Any OpenAI-compatible chat completions server through ``httpx`` (DESIGN §9).

Ollama, vLLM, llama.cpp's server, LM Studio and OpenAI itself speak this protocol:
``POST {base_url}/chat/completions`` with ``stream: true`` answers with SSE ``data:`` lines of
``chat.completion.chunk`` objects, ending with ``data: [DONE]``. With
``stream_options.include_usage`` the last chunk carries the token usage.

The base URL comes from the ``base_url`` argument, else ``OPENAI_BASE_URL``, else Ollama's local
endpoint ``http://localhost:11434/v1``. The key (``OPENAI_API_KEY``) is optional: local servers
need none. It is sent as a bearer token and never logged, stored or put in an error message.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

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
from runtime.providers.base import (
    ModelEvent,
    ModelRequest,
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

__all__ = ["DEFAULT_OPENAI_BASE_URL", "OpenAIProvider"]

log = logging.getLogger(__name__)

DEFAULT_OPENAI_BASE_URL = "http://localhost:11434/v1"
"""Ollama's OpenAI-compatible endpoint: the common local server."""

_FINISH_REASONS: dict[str, StopReasonName] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}

_KEY_HINT = "Check OPENAI_API_KEY (and OPENAI_BASE_URL)."


class OpenAIProvider:
    """One model on an OpenAI-compatible server, streamed with httpx."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 600.0,
        connect_timeout: float = 10.0,
        context_window: int = 128_000,
    ) -> None:
        self._model = model
        self._base_url = (
            base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_OPENAI_BASE_URL
        ).rstrip("/")
        self._api_key = api_key
        self._context_window = context_window
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(timeout, connect=connect_timeout))

    def __repr__(self) -> str:
        return f"OpenAIProvider({self._model!r}, base_url={self._base_url!r})"

    @property
    def reference(self) -> str:
        return f"openai:{self._model}"

    @property
    def base_url(self) -> str:
        return self._base_url

    @property
    def context_window(self) -> int:
        return self._context_window

    def cost_usd(self, usage: Usage) -> float:
        # Local and self-hosted models have no price table.
        return 0.0

    async def aclose(self) -> None:
        await self._client.aclose()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        body = build_body(request.model or self._model, request)
        headers = {"accept": "text/event-stream", "content-type": "application/json"}
        if self._api_key:
            headers["authorization"] = f"Bearer {self._api_key}"
        url = f"{self._base_url}/chat/completions"
        log.debug(
            "openai request: POST %s model=%s messages=%d",
            url,
            body["model"],
            len(body["messages"]),
        )
        folder = _ChunkFolder()
        try:
            async with self._client.stream("POST", url, json=body, headers=headers) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise _status_error(response)
                async for data in _sse_data(response):
                    if data == "[DONE]":
                        for model_event in folder.finish():
                            yield model_event
                        return
                    for model_event in folder.fold(_parse_chunk(data)):
                        yield model_event
        except httpx.ConnectError as err:
            raise ModelError(
                f"Could not connect to {self._base_url}: {err or 'connection refused'}. "
                "Is the server running? Set OPENAI_BASE_URL to its address.",
                retryable=True,
                code="stream_interrupted",
            ) from err
        except httpx.HTTPError as err:
            raise ModelError(
                f"The connection to {self._base_url} was interrupted: {err or type(err).__name__}",
                retryable=True,
                code="stream_interrupted",
            ) from err
        # The body ended without [DONE]: complete if the server said why it stopped.
        if folder.finish_reason is None:
            raise ModelError(
                "The model stream ended before the answer was complete.",
                retryable=True,
                code="stream_interrupted",
            )
        for model_event in folder.finish():
            yield model_event


async def _sse_data(response: httpx.Response) -> AsyncIterator[str]:
    """The data of each SSE event (multi-line data joined with newlines)."""
    data_lines: list[str] = []
    async for line in response.aiter_lines():
        if not line:
            if data_lines:
                yield "\n".join(data_lines)
                data_lines = []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if name == "data":
            data_lines.append(value[1:] if value.startswith(" ") else value)
    if data_lines:
        yield "\n".join(data_lines)


def _parse_chunk(data: str) -> dict[str, Any]:
    try:
        parsed = json.loads(data)
    except ValueError as err:
        raise ModelError(
            f"The model server sent a chunk that is not JSON: {data[:200]!r}",
            retryable=True,
            code="stream_interrupted",
        ) from err
    if not isinstance(parsed, dict):
        return {}
    error = parsed.get("error")
    if error:
        message = error.get("message") if isinstance(error, dict) else str(error)
        raise ModelError(
            f"The model server reported an error during the stream: {message}",
            retryable=True,
            code="server_error",
        )
    return parsed


# --- request ------------------------------------------------------------------------------------


def build_body(model: str, request: ModelRequest) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "messages": to_wire_messages(request.system, request.messages),
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": request.max_tokens,
    }
    if request.tools:
        body["tools"] = to_wire_tools(request.tools)
    return body


def to_wire_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": t.input_schema,
            },
        }
        for t in tools
    ]


def to_wire_messages(system: str, messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Our history as chat messages; thinking is dropped (these servers cannot verify it)."""
    wire: list[dict[str, Any]] = []
    if system:
        wire.append({"role": "system", "content": system})
    for message in messages:
        texts: list[str] = []
        tool_calls: list[dict[str, Any]] = []
        results: list[dict[str, Any]] = []
        pictures: list[dict[str, Any]] = []  # after every tool message of the turn
        for block in message.content:
            if isinstance(block, TextBlock):
                texts.append(block.text)
            elif isinstance(block, ToolUseBlock):
                tool_calls.append(
                    {
                        "id": block.id,
                        "type": "function",
                        "function": {"name": block.name, "arguments": json.dumps(block.input)},
                    }
                )
            elif isinstance(block, ToolResultBlock):
                limited = limit_result(block.content, tool_call_id=block.tool_call_id)
                content = f"Error: {limited}" if block.is_error else limited
                results.append(
                    {"role": "tool", "tool_call_id": block.tool_use_id, "content": content}
                )
                images = [
                    {
                        "type": "image_url",
                        "image_url": {"url": f"data:{image.media_type};base64,{image.data}"},
                    }
                    for image in block.images
                    if image.data is not None
                ]
                if images:
                    # Tool messages carry text only: the images follow as a user message.
                    note = f"The images of tool call {block.tool_use_id}:"
                    pictures.append(
                        {"role": "user", "content": [{"type": "text", "text": note}, *images]}
                    )
            elif isinstance(block, ThinkingBlock):
                continue
        text = "".join(texts)
        if message.role == Role.ASSISTANT:
            if not text and not tool_calls:
                continue
            entry: dict[str, Any] = {"role": "assistant", "content": text or None}
            if tool_calls:
                entry["tool_calls"] = tool_calls
            wire.append(entry)
            continue
        wire.extend(results)
        wire.extend(pictures)
        if text:
            wire.append({"role": "user", "content": text})
    return wire


# --- response -----------------------------------------------------------------------------------


@dataclass
class _Call:
    index: int
    id: str | None = None
    name: str | None = None
    started: bool = False
    pending: str = ""


class _ChunkFolder:
    def __init__(self) -> None:
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self._calls: dict[int, _Call] = {}
        self._had_calls = False
        self._finished = False

    def fold(self, chunk: dict[str, Any]) -> list[ModelEvent]:
        events: list[ModelEvent] = []
        choices = chunk.get("choices") or []
        if choices and isinstance(choices[0], dict):
            choice = choices[0]
            delta = choice.get("delta") or {}
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                events.append(ThinkingDelta(text=reasoning))
            content = delta.get("content")
            if isinstance(content, str) and content:
                events.append(TextDelta(text=content))
            for raw_call in delta.get("tool_calls") or []:
                events += self._tool_call(raw_call)
            if choice.get("finish_reason"):
                self.finish_reason = str(choice["finish_reason"])
                events += self._end_calls()
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage = _usage(usage)
            events.append(UsageReport(usage=self.usage))
        return events

    def _tool_call(self, raw: dict[str, Any]) -> list[ModelEvent]:
        position = int(raw.get("index", len(self._calls)))
        call = self._calls.get(position)
        if call is None:
            call = self._calls[position] = _Call(index=len(self._calls))
        function = raw.get("function") or {}
        if raw.get("id"):
            call.id = str(raw["id"])
        if function.get("name"):
            call.name = str(function["name"])
        arguments = function.get("arguments")
        if isinstance(arguments, dict):  # some servers send the arguments as an object
            arguments = json.dumps(arguments)
        events: list[ModelEvent] = []
        if not call.started and call.name:
            call.started = True
            call_id = call.id or f"call_{call.index}"
            events.append(ToolCallStart(index=call.index, id=call_id, name=call.name))
        fragment = call.pending + (arguments or "")
        if call.started:
            call.pending = ""
            if fragment:
                events.append(ToolCallDelta(index=call.index, json_fragment=fragment))
        else:
            call.pending = fragment
        return events

    def _end_calls(self) -> list[ModelEvent]:
        events: list[ModelEvent] = []
        for call in sorted(self._calls.values(), key=lambda c: c.index):
            if call.started:
                events.append(ToolCallEnd(index=call.index))
        self._calls.clear()
        if events:
            self._had_calls = True
        return events

    def finish(self) -> list[ModelEvent]:
        if self._finished:
            return []
        self._finished = True
        events = self._end_calls()
        reason = _FINISH_REASONS.get(self.finish_reason or "stop", "end_turn")
        if self._had_calls and reason == "end_turn":
            # Some servers (Ollama) say "stop" after tool calls.
            reason = "tool_use"
        events.append(StopReason(reason=reason))
        return events


def _usage(raw: dict[str, Any]) -> Usage:
    prompt = int(raw.get("prompt_tokens") or 0)
    details = raw.get("prompt_tokens_details") or {}
    cached = int(details.get("cached_tokens") or 0) if isinstance(details, dict) else 0
    return Usage(
        input_tokens=max(0, prompt - cached),
        output_tokens=int(raw.get("completion_tokens") or 0),
        cache_read_tokens=cached,
    )


def _status_error(response: httpx.Response) -> ModelError:
    status = response.status_code
    detail = _error_detail(response)
    retry_after = parse_retry_after(response.headers)
    if status in (401, 403):
        return ModelError(
            f"The model server refused the credentials (HTTP {status}): {detail}. {_KEY_HINT}",
            retryable=False,
            code="auth_failed",
            status=status,
        )
    if status == 429:
        return ModelError(
            f"The model server's rate limit was reached (HTTP 429): {detail}",
            retryable=True,
            code="rate_limited",
            status=status,
            retry_after=retry_after,
        )
    if status >= 500 or status == 408:
        return ModelError(
            f"The model server failed (HTTP {status}): {detail}",
            retryable=True,
            code="overloaded" if status in (503, 529) else "server_error",
            status=status,
            retry_after=retry_after,
        )
    return ModelError(
        f"The model server rejected the request (HTTP {status}): {detail}",
        retryable=False,
        code="invalid_request",
        status=status,
    )


def _error_detail(response: httpx.Response) -> str:
    text = response.text.strip()
    try:
        body = json.loads(text)
    except ValueError:
        return text[:300] or response.reason_phrase
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str):
            return error
        if body.get("message"):
            return str(body["message"])
    return text[:300]
