"""What the Anthropic provider sends, asserted on the request the fake server recorded."""

from __future__ import annotations

import json
from typing import Any

from runtime.models import Role, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from runtime.providers.anthropic import AnthropicProvider
from tests.fakes.anthropic_server import FakeAnthropicServer, error_response, text_response
from tests.providers.helpers import API_KEY, collect, collect_until_error, message, request, tool


def _cache_marks(body: Any) -> list[str]:
    """Paths in the JSON body that carry a cache_control breakpoint."""
    marks: list[str] = []

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            if "cache_control" in node:
                marks.append(path)
            for key, value in node.items():
                walk(value, f"{path}.{key}")
        elif isinstance(node, list):
            for index, value in enumerate(node):
                walk(value, f"{path}[{index}]")

    walk(body, "")
    return marks


def _tool_turn_history() -> list[Any]:
    return [
        message(0, Role.USER, TextBlock(text="Read a.txt and b.txt.")),
        message(
            1,
            Role.ASSISTANT,
            ThinkingBlock(thinking="I should read both.", signature="SIG-abc=="),
            TextBlock(text="Reading."),
            ToolUseBlock(
                id="toolu_A", tool_call_id="tc-1", name="read_file", input={"path": "a.txt"}
            ),
            ToolUseBlock(
                id="toolu_B", tool_call_id="tc-2", name="read_file", input={"path": "b.txt"}
            ),
        ),
        message(
            2,
            Role.TOOL,
            ToolResultBlock(tool_use_id="toolu_A", tool_call_id="tc-1", content="alpha"),
            ToolResultBlock(
                tool_use_id="toolu_B", tool_call_id="tc-2", content="no such file", is_error=True
            ),
        ),
    ]


async def test_tool_results_go_back_as_a_user_turn_after_the_signed_thinking_and_tool_uses(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider
) -> None:
    anthropic_server.add(text_response("Both read."))

    await collect(anthropic_provider, request(_tool_turn_history(), tools=[tool("read_file")]))

    body = anthropic_server.requests[0].body
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assistant = body["messages"][1]["content"]
    assert assistant[0] == {
        "type": "thinking",
        "thinking": "I should read both.",
        "signature": "SIG-abc==",
    }
    assert [b["type"] for b in assistant] == ["thinking", "text", "tool_use", "tool_use"]
    assert [(b["id"], b["input"]) for b in assistant[2:]] == [
        ("toolu_A", {"path": "a.txt"}),
        ("toolu_B", {"path": "b.txt"}),
    ]
    results = body["messages"][2]["content"]
    assert [(r["type"], r["tool_use_id"], r["content"], r["is_error"]) for r in results] == [
        ("tool_result", "toolu_A", "alpha", False),
        ("tool_result", "toolu_B", "no such file", True),
    ]


async def test_cache_breakpoints_sit_on_the_system_prompt_the_last_tool_and_the_tail(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider
) -> None:
    anthropic_server.add(text_response("ok"))

    await collect(
        anthropic_provider,
        request(_tool_turn_history(), tools=[tool("read_file"), tool("list_dir"), tool("search")]),
    )

    body = anthropic_server.requests[0].body
    assert sorted(_cache_marks(body)) == [".messages[2].content[1]", ".system[0]", ".tools[2]"]
    assert body["system"][0]["text"] == "You are a careful assistant."
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}


async def test_redacted_thinking_is_echoed_back_and_unsigned_thinking_is_dropped(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider
) -> None:
    anthropic_server.add(text_response("ok"))
    history = [
        message(0, Role.USER, TextBlock(text="hi")),
        message(
            1,
            Role.ASSISTANT,
            ThinkingBlock(thinking="OPAQUE==", redacted=True),
            ThinkingBlock(thinking="from another model, unsigned"),
            TextBlock(text="hello"),
        ),
        message(2, Role.USER, TextBlock(text="again")),
    ]

    await collect(anthropic_provider, request(history))

    assistant = anthropic_server.requests[0].body["messages"][1]["content"]
    assert assistant == [
        {"type": "redacted_thinking", "data": "OPAQUE=="},
        {"type": "text", "text": "hello"},
    ]


async def test_a_follow_up_after_tool_results_merges_into_one_user_turn(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider
) -> None:
    anthropic_server.add(text_response("ok"))
    history = [*_tool_turn_history(), message(3, Role.USER, TextBlock(text="Now summarise."))]

    await collect(anthropic_provider, request(history))

    messages = anthropic_server.requests[0].body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert [b["type"] for b in messages[2]["content"]] == ["tool_result", "tool_result", "text"]


async def test_a_thinking_budget_uses_budget_tokens_on_older_models(
    anthropic_server: FakeAnthropicServer,
) -> None:
    anthropic_server.add(text_response("ok"))
    provider = AnthropicProvider(
        "claude-haiku-4-5", api_key=API_KEY, base_url=anthropic_server.base_url
    )
    try:
        await collect(
            provider, request(model="claude-haiku-4-5", thinking_budget=4000, max_tokens=2000)
        )
    finally:
        await provider.aclose()

    body = anthropic_server.requests[0].body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 4000}
    assert body["max_tokens"] > 4000


async def test_a_thinking_budget_uses_adaptive_thinking_on_current_models(
    anthropic_server: FakeAnthropicServer,
) -> None:
    anthropic_server.add(text_response("ok"), text_response("ok"))
    for model in ("claude-sonnet-5", "claude-opus-4-6"):
        provider = AnthropicProvider(model, api_key=API_KEY, base_url=anthropic_server.base_url)
        try:
            await collect(provider, request(model=model, thinking_budget=4000))
        finally:
            await provider.aclose()

    assert [r.body["thinking"] for r in anthropic_server.requests] == [{"type": "adaptive"}] * 2
    assert [r.body["model"] for r in anthropic_server.requests] == [
        "claude-sonnet-5",
        "claude-opus-4-6",
    ]


async def test_without_a_budget_no_thinking_parameter_is_sent(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider
) -> None:
    anthropic_server.add(text_response("ok"))

    await collect(anthropic_provider, request())

    body = anthropic_server.requests[0].body
    assert "thinking" not in body
    assert body["stream"] is True
    assert body["max_tokens"] == 4096


async def test_the_key_goes_in_the_header_and_the_sdk_itself_never_retries(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider
) -> None:
    anthropic_server.add(error_response(529, "overloaded_error", "busy"), text_response("late"))

    _, error = await collect_until_error(anthropic_provider.stream(request()))

    assert error is not None
    assert len(anthropic_server.requests) == 1  # the engine retries, visibly; not the SDK
    recorded = anthropic_server.requests[0]
    assert (recorded.method, recorded.path) == ("POST", "/v1/messages")
    # This SDK version sends the key as a bearer token (older ones used x-api-key).
    assert API_KEY in (
        recorded.headers.get("x-api-key"),
        recorded.headers.get("authorization", "")[7:],
    )
    assert "anthropic-version" in recorded.headers
    assert json.dumps(recorded.body).count(API_KEY) == 0
