"""The OpenAI-compatible provider against a fake chat completions server on loopback."""

from __future__ import annotations

import asyncio
import json
import logging

import httpx
import pytest

from runtime.errors import ModelError
from runtime.models import (
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from runtime.providers.base import (
    StopReason,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageReport,
)
from runtime.providers.openai import OpenAIProvider
from tests.fakes.openai_server import (
    FakeOpenAIServer,
    chunk,
    done,
    drop,
    gate,
    openai_error_response,
    openai_text_response,
    openai_tool_calls_response,
    stream,
    tool_call_delta,
    usage_chunk,
)
from tests.providers.helpers import API_KEY, collect, collect_until_error, message, request, tool


async def _error_of(provider: OpenAIProvider) -> tuple[list[object], ModelError]:
    events, error = await collect_until_error(provider.stream(request()))
    assert type(error) is ModelError, f"expected a ModelError, got {error!r}"
    return list(events), error


async def test_streamed_text_usage_and_stop_arrive_as_model_events(
    openai_server: FakeOpenAIServer, openai_provider: OpenAIProvider
) -> None:
    openai_server.add(openai_text_response(["Hel", "lo ", "wörld"], chunk_size=6))

    events = await collect(openai_provider, request())

    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hel", "lo ", "wörld"]
    assert UsageReport(usage=Usage(input_tokens=11, output_tokens=7)) in events
    assert events[-1] == StopReason(reason="end_turn")


async def test_tool_call_fragments_become_start_delta_and_end_per_call(
    openai_server: FakeOpenAIServer, openai_provider: OpenAIProvider
) -> None:
    openai_server.add(
        openai_tool_calls_response(
            [
                ("call_1", "read_file", {"path": 'a "quoted"\\name.txt'}),
                ("call_2", "list_dir", {}),
            ]
        )
    )

    events = await collect(openai_provider, request(tools=[tool("read_file"), tool("list_dir")]))

    starts = [(e.index, e.id, e.name) for e in events if isinstance(e, ToolCallStart)]
    assert starts == [(0, "call_1", "read_file"), (1, "call_2", "list_dir")]
    for index, expected in enumerate([{"path": 'a "quoted"\\name.txt'}, {}]):
        fragments = [
            e.json_fragment for e in events if isinstance(e, ToolCallDelta) and e.index == index
        ]
        assert json.loads("".join(fragments)) == expected
    assert [e.index for e in events if isinstance(e, ToolCallEnd)] == [0, 1]
    assert events[-1] == StopReason(reason="tool_use")


async def test_a_server_that_says_stop_after_tool_calls_still_means_tool_use(
    openai_server: FakeOpenAIServer, openai_provider: OpenAIProvider
) -> None:
    # Ollama style: the whole call in one chunk, no id, finish_reason "stop", no [DONE].
    openai_server.add(
        stream(
            [
                chunk(
                    {
                        "role": "assistant",
                        "content": "",
                        "tool_calls": [
                            {
                                "index": 0,
                                "function": {"name": "list_dir", "arguments": {"path": "."}},
                            }
                        ],
                    }
                ),
                chunk({}, finish_reason="stop"),
            ]
        )
    )

    events = await collect(openai_provider, request())

    assert ToolCallStart(index=0, id="call_0", name="list_dir") in events
    assert ToolCallDelta(index=0, json_fragment='{"path": "."}') in events
    assert events[-1] == StopReason(reason="tool_use")


@pytest.mark.parametrize(
    ("finish_reason", "expected"),
    [("stop", "end_turn"), ("length", "max_tokens"), ("content_filter", "refusal")],
)
async def test_finish_reasons_map_to_stop_reasons(
    openai_server: FakeOpenAIServer,
    openai_provider: OpenAIProvider,
    finish_reason: str,
    expected: str,
) -> None:
    openai_server.add(openai_text_response("x", finish_reason=finish_reason))

    events = await collect(openai_provider, request())

    assert events[-1] == StopReason(reason=expected)


async def test_reasoning_content_and_cached_prompt_tokens_are_reported(
    openai_server: FakeOpenAIServer, openai_provider: OpenAIProvider
) -> None:
    openai_server.add(
        stream(
            [
                chunk({"role": "assistant", "reasoning_content": "thinking..."}),
                chunk({"content": "answer"}),
                chunk({}, finish_reason="stop"),
                usage_chunk(prompt_tokens=100, completion_tokens=5, cached_tokens=60),
                done(),
            ]
        )
    )

    events = await collect(openai_provider, request())

    assert events[0] == ThinkingDelta(text="thinking...")
    assert (
        UsageReport(usage=Usage(input_tokens=40, output_tokens=5, cache_read_tokens=60)) in events
    )
    assert openai_provider.cost_usd(Usage(input_tokens=1000)) == 0.0


async def test_history_is_sent_in_chat_format_with_tool_calls_and_tool_messages(
    openai_server: FakeOpenAIServer, openai_provider: OpenAIProvider
) -> None:
    openai_server.add(openai_text_response("done"))
    history = [
        message(0, Role.USER, TextBlock(text="Read a.txt")),
        message(
            1,
            Role.ASSISTANT,
            ThinkingBlock(thinking="secret plan", signature="SIG"),
            TextBlock(text="Reading."),
            ToolUseBlock(
                id="call_9", tool_call_id="tc-9", name="read_file", input={"path": "a.txt"}
            ),
        ),
        message(
            2,
            Role.TOOL,
            ToolResultBlock(
                tool_use_id="call_9", tool_call_id="tc-9", content="no such file", is_error=True
            ),
        ),
    ]

    await collect(
        openai_provider,
        request(history, model="llama3.1", tools=[tool("read_file")], max_tokens=321),
    )

    recorded = openai_server.requests[0]
    assert (recorded.method, recorded.path) == ("POST", "/v1/chat/completions")
    assert recorded.headers["authorization"] == f"Bearer {API_KEY}"
    body = recorded.body
    assert body["model"] == "llama3.1"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 321
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "A tool.",
                "parameters": tool("read_file").input_schema,
            },
        }
    ]
    assert body["messages"] == [
        {"role": "system", "content": "You are a careful assistant."},
        {"role": "user", "content": "Read a.txt"},
        {
            "role": "assistant",
            "content": "Reading.",
            "tool_calls": [
                {
                    "id": "call_9",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_9", "content": "Error: no such file"},
    ]
    assert "secret plan" not in json.dumps(body)


async def test_no_key_means_no_authorization_header(openai_server: FakeOpenAIServer) -> None:
    openai_server.add(openai_text_response("hi"))
    provider = OpenAIProvider("qwen3", base_url=openai_server.base_url)
    try:
        await collect(provider, request())
    finally:
        await provider.aclose()

    assert "authorization" not in openai_server.requests[0].headers


@pytest.mark.parametrize("status", [401, 403])
async def test_a_refused_key_fails_for_good_and_names_openai_api_key(
    openai_server: FakeOpenAIServer, openai_provider: OpenAIProvider, status: int
) -> None:
    openai_server.add(openai_error_response(status, "Incorrect API key provided"))

    _, error = await _error_of(openai_provider)

    assert (error.code, error.retryable, error.status) == ("auth_failed", False, status)
    assert "OPENAI_API_KEY" in error.message
    assert API_KEY not in error.message


@pytest.mark.parametrize("status", [400, 404, 422])
async def test_an_invalid_request_fails_for_good_with_the_servers_message(
    openai_server: FakeOpenAIServer, openai_provider: OpenAIProvider, status: int
) -> None:
    openai_server.add(openai_error_response(status, "model 'llama3.1' not found"))

    _, error = await _error_of(openai_provider)

    assert (error.code, error.retryable) == ("invalid_request", False)
    assert "model 'llama3.1' not found" in error.message


async def test_rate_limits_and_server_errors_are_retryable_with_retry_after(
    openai_server: FakeOpenAIServer, openai_provider: OpenAIProvider
) -> None:
    openai_server.add(
        openai_error_response(429, "Rate limit reached", retry_after=4),
        openai_error_response(500, "boom", error_type="server_error"),
        openai_error_response(503, "loading model", retry_after=1),
    )

    errors = [(await _error_of(openai_provider))[1] for _ in range(3)]

    assert [(e.code, e.retryable, e.retry_after) for e in errors] == [
        ("rate_limited", True, 4.0),
        ("server_error", True, None),
        ("overloaded", True, 1.0),
    ]


async def test_an_error_object_in_the_stream_is_a_retryable_server_error(
    openai_server: FakeOpenAIServer, openai_provider: OpenAIProvider
) -> None:
    openai_server.add(
        stream([chunk({"content": "par"}), {"data": {"error": {"message": "backend crashed"}}}])
    )

    events, error = await _error_of(openai_provider)

    assert TextDelta(text="par") in events
    assert (error.code, error.retryable) == ("server_error", True)
    assert "backend crashed" in error.message


async def test_a_dropped_connection_or_a_truncated_stream_is_a_retryable_interruption(
    openai_server: FakeOpenAIServer, openai_provider: OpenAIProvider
) -> None:
    openai_server.add(
        stream([chunk({"content": "par"}), drop()]),
        stream([chunk({"content": "tial"})]),
    )

    errors = [(await _error_of(openai_provider))[1] for _ in range(2)]

    assert [(e.code, e.retryable) for e in errors] == [("stream_interrupted", True)] * 2


async def test_a_server_that_is_not_running_gives_a_retryable_error_naming_the_url() -> None:
    async with FakeOpenAIServer() as server:
        base_url = server.base_url
    provider = OpenAIProvider("llama3.1", base_url=base_url)
    try:
        _, error = await _error_of(provider)
    finally:
        await provider.aclose()

    assert (error.code, error.retryable) == ("stream_interrupted", True)
    assert base_url in error.message
    assert "OPENAI_BASE_URL" in error.message


async def test_cancelling_mid_stream_closes_the_connection_promptly(
    openai_server: FakeOpenAIServer, openai_provider: OpenAIProvider
) -> None:
    openai_server.add(stream([chunk({"content": "first"}), gate("hold")]))
    first_text = asyncio.Event()

    async def consume() -> None:
        async for model_event in openai_provider.stream(request()):
            if isinstance(model_event, TextDelta):
                first_text.set()

    task = asyncio.create_task(consume())
    async with asyncio.timeout(5):
        await openai_server.wait_for_gate("hold")
        await first_text.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    async with asyncio.timeout(1):
        await openai_server.disconnected.wait()


async def test_the_api_key_never_appears_in_logs_or_errors(
    openai_server: FakeOpenAIServer,
    openai_provider: OpenAIProvider,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    openai_server.add(
        openai_text_response("fine"),
        openai_error_response(401, "bad key"),
        stream([chunk({"content": "x"}), drop()]),
    )

    await collect(openai_provider, request())
    errors = [(await _error_of(openai_provider))[1] for _ in range(2)]

    assert caplog.records
    assert API_KEY not in caplog.text
    for error in errors:
        assert API_KEY not in str(error)
        assert not isinstance(error, httpx.HTTPError)
    assert API_KEY not in repr(openai_provider)


def test_tool_call_delta_builder_marks_only_the_first_piece_with_an_id() -> None:
    assert "id" in tool_call_delta(0, call_id="c", name="n")
    assert "id" not in tool_call_delta(0, arguments="{}")
