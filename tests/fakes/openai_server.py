"""A fake OpenAI-compatible chat completions server on loopback (Ollama, vLLM, llama.cpp style).

The same scripted HTTP/1.1 server as ``tests.fakes.anthropic_server`` (see its docstring for the
script format, gates, drops and the process mode), with builders for chat completion chunks:
``data: {...}`` frames and a final ``data: [DONE]``. ``base_url`` already ends in ``/v1``.

    async with FakeOpenAIServer([openai_text_response("Hello")]) as server:
        provider = OpenAIProvider("llama3.1", base_url=server.base_url)

    python -m tests.fakes.openai_server --script FILE.json --port-file PATH [--requests-file PATH]
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.fakes.anthropic_server import Response, ScriptedServer, drop, gate, main, stream

__all__ = [
    "FakeOpenAIServer",
    "chunk",
    "done",
    "drop",
    "gate",
    "openai_error_response",
    "openai_text_response",
    "openai_tool_calls_response",
    "stream",
    "tool_call_delta",
    "usage_chunk",
]


class FakeOpenAIServer(ScriptedServer):
    def __init__(
        self,
        responses: Sequence[Response] = (),
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        requests_file: Path | None = None,
    ) -> None:
        super().__init__(
            responses, host=host, port=port, requests_file=requests_file, base_path="/v1"
        )


def chunk(
    delta: Mapping[str, Any] | None = None,
    *,
    finish_reason: str | None = None,
    model: str = "fake-model",
) -> dict[str, Any]:
    """One ``chat.completion.chunk`` frame with a single choice."""
    return {
        "data": {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 1700000000,
            "model": model,
            "choices": [{"index": 0, "delta": dict(delta or {}), "finish_reason": finish_reason}],
        }
    }


def usage_chunk(
    prompt_tokens: int = 11, completion_tokens: int = 7, cached_tokens: int | None = None
) -> dict[str, Any]:
    """The last chunk sent with ``stream_options.include_usage``: no choices, only usage."""
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    return {
        "data": {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 1700000000,
            "model": "fake-model",
            "choices": [],
            "usage": usage,
        }
    }


def done() -> dict[str, Any]:
    return {"data": "[DONE]"}


def tool_call_delta(
    index: int, *, call_id: str | None = None, name: str | None = None, arguments: str = ""
) -> dict[str, Any]:
    """A ``delta.tool_calls`` entry: the first one of a call carries id and name."""
    function: dict[str, Any] = {"arguments": arguments}
    if name is not None:
        function["name"] = name
    entry: dict[str, Any] = {"index": index, "function": function}
    if call_id is not None:
        entry["id"] = call_id
        entry["type"] = "function"
    return entry


def openai_text_response(
    text: str | Sequence[str],
    *,
    finish_reason: str = "stop",
    prompt_tokens: int = 11,
    completion_tokens: int = 7,
    chunk_size: int | None = None,
) -> Response:
    pieces = [text] if isinstance(text, str) else list(text)
    return stream(
        [
            chunk({"role": "assistant", "content": ""}),
            *(chunk({"content": p}) for p in pieces),
            chunk({}, finish_reason=finish_reason),
            usage_chunk(prompt_tokens, completion_tokens),
            done(),
        ],
        chunk_size=chunk_size,
    )


def openai_tool_calls_response(
    calls: Sequence[tuple[str, str, Mapping[str, Any]]], *, text: str | None = None
) -> Response:
    """A streamed answer calling tools: ``calls`` is ``[(call_id, name, arguments), ...]``."""
    events: list[dict[str, Any]] = [chunk({"role": "assistant", "content": text or ""})]
    for index, (call_id, name, arguments) in enumerate(calls):
        encoded = json.dumps(dict(arguments))
        middle = len(encoded) // 2
        events.append(chunk({"tool_calls": [tool_call_delta(index, call_id=call_id, name=name)]}))
        events.append(chunk({"tool_calls": [tool_call_delta(index, arguments=encoded[:middle])]}))
        events.append(chunk({"tool_calls": [tool_call_delta(index, arguments=encoded[middle:])]}))
    events += [chunk({}, finish_reason="tool_calls"), usage_chunk(), done()]
    return stream(events)


def openai_error_response(
    status: int,
    message: str,
    *,
    error_type: str = "invalid_request_error",
    retry_after: float | str | None = None,
) -> Response:
    headers: dict[str, str] = {}
    if retry_after is not None:
        headers["retry-after"] = str(retry_after)
    return {
        "status": status,
        "headers": headers,
        "body": {"error": {"message": message, "type": error_type, "code": None}},
    }


if __name__ == "__main__":
    main(base_path="/v1")
