"""The engine driving the real anthropic SDK against the fake Messages server on loopback.

Each case ends as specified, checked on the run's state and messages in the database."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from runtime.api import Runtime
from runtime.config import Config
from runtime.events import MessageDelta, Notice
from runtime.models import Role, RunState, ThinkingBlock, ToolCallState, Usage
from runtime.providers import pricing
from runtime.results import CHARS_PER_TOKEN
from tests.fakes.anthropic_server import (
    FakeAnthropicServer,
    drop,
    error_event,
    error_response,
    gate,
    message_delta,
    message_start,
    stream,
    text_block,
    text_response,
    thinking_block,
    tool_use_block,
)

API_KEY = "sk-ant-test-SECRET-4242424242"
MODEL = "anthropic:claude-sonnet-5"
WAIT = 20

Factory = Callable[[], Awaitable[Runtime]]


@pytest.fixture
async def server() -> AsyncIterator[FakeAnthropicServer]:
    async with FakeAnthropicServer() as fake:
        yield fake


@pytest.fixture
async def open_runtime(
    server: FakeAnthropicServer, db_path: Path, workspace: Path
) -> AsyncIterator[Factory]:
    opened: list[Runtime] = []
    slept: list[float] = []

    async def record_sleep(seconds: float) -> None:
        slept.append(seconds)

    async def factory() -> Runtime:
        runtime = await Runtime.open(
            db_path=db_path,
            workspace=workspace,
            config=Config(),
            model=MODEL,
            env={"ANTHROPIC_API_KEY": API_KEY, "ANTHROPIC_BASE_URL": server.base_url},
            sleep=record_sleep,
        )
        opened.append(runtime)
        return runtime

    factory.slept = slept  # type: ignore[attr-defined]
    yield factory
    for runtime in opened:
        await runtime.close()


def thinking_then_tool() -> dict[str, Any]:
    encoded = json.dumps({"path": "notes.txt"})
    return stream(
        [
            message_start(input_tokens=100),
            *thinking_block(0, ["Let me ", "look."], signature="sig-abc"),
            *text_block(1, ["Reading ", "the notes."]),
            *tool_use_block(2, "toolu_01", "read_file", [encoded[:7], encoded[7:13], encoded[13:]]),
            message_delta("tool_use", output_tokens=40),
            {"event": "message_stop", "data": {"type": "message_stop"}},
        ]
    )


async def test_a_tool_round_sends_the_result_and_the_signed_thinking_back(
    server: FakeAnthropicServer, open_runtime: Factory
) -> None:
    server.add(thinking_then_tool(), text_response("The answer is 42.", input_tokens=200))
    runtime = await open_runtime()
    run = await runtime.start("what is the answer?")
    boundary = await runtime.wait(run.id, timeout=WAIT)
    assert boundary.state is RunState.COMPLETED, boundary.run.failure

    second = server.requests[1].body
    assistant = second["messages"][1]
    assert assistant["role"] == "assistant"
    kinds = [block["type"] for block in assistant["content"]]
    assert kinds[0] == "thinking" and assistant["content"][0]["signature"] == "sig-abc"
    assert "tool_use" in kinds
    tool_turn = second["messages"][2]
    result = next(b for b in tool_turn["content"] if b["type"] == "tool_result")
    assert result["tool_use_id"] == "toolu_01"
    assert "the answer is 42" in json.dumps(result["content"])

    messages = await runtime.messages(run.id)
    assert [m.role for m in messages] == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]
    thinking = [b for b in messages[1].content if isinstance(b, ThinkingBlock)]
    assert thinking and thinking[0].signature == "sig-abc"
    [call] = await runtime.tool_calls(run.id)
    assert call.provider_id == "toolu_01" and call.state is ToolCallState.COMPLETED
    final = await runtime.get_run(run.id)
    assert final.usage.input_tokens == 300 and final.usage.output_tokens > 0
    assert final.cost_usd > 0
    assert (await runtime.get_job(run.job_id)).cost_usd == pytest.approx(final.cost_usd)


async def test_an_auth_error_fails_the_run_naming_the_key(
    server: FakeAnthropicServer, open_runtime: Factory
) -> None:
    server.add(error_response(401, "authentication_error", "invalid x-api-key"))
    runtime = await open_runtime()
    run = await runtime.start("hello")
    boundary = await runtime.wait(run.id, timeout=WAIT)
    assert boundary.state is RunState.FAILED and boundary.run.failure is not None
    assert "ANTHROPIC_API_KEY" in boundary.run.failure.message
    assert [m.role for m in await runtime.messages(run.id)] == [Role.USER]


async def test_an_invalid_request_fails_with_the_apis_message(
    server: FakeAnthropicServer, open_runtime: Factory
) -> None:
    server.add(error_response(400, "invalid_request_error", "messages: too many images"))
    runtime = await open_runtime()
    run = await runtime.start("hello")
    boundary = await runtime.wait(run.id, timeout=WAIT)
    assert boundary.state is RunState.FAILED and boundary.run.failure is not None
    assert "too many images" in boundary.run.failure.message


@pytest.mark.parametrize(("status", "kind"), [(429, "rate_limit_error"), (529, "overloaded_error")])
async def test_rate_limits_and_overload_are_retried_honouring_retry_after(
    server: FakeAnthropicServer, open_runtime: Factory, status: int, kind: str
) -> None:
    server.add(error_response(status, kind, "slow down", retry_after=7), text_response("fine"))
    runtime = await open_runtime()
    notices: list[Notice] = []

    async def collect() -> None:
        async for event in runtime.observe():
            if isinstance(event, Notice):
                notices.append(event)

    watcher = asyncio.create_task(collect())
    await asyncio.sleep(0)
    run = await runtime.start("hello")
    boundary = await runtime.wait(run.id, timeout=WAIT)
    watcher.cancel()
    assert boundary.state is RunState.COMPLETED
    assert open_runtime.slept == [7.0]  # type: ignore[attr-defined]
    assert notices and "retrying in 7.0 s" in notices[0].text
    assert len(server.requests) == 2


async def test_an_overloaded_error_event_mid_stream_is_retried_without_duplicates(
    server: FakeAnthropicServer, open_runtime: Factory
) -> None:
    server.add(
        stream(
            [
                message_start(),
                *text_block(0, ["partial "]),
                error_event("overloaded_error", "Overloaded"),
            ]
        ),
        text_response("whole answer"),
    )
    runtime = await open_runtime()
    run = await runtime.start("hello")
    boundary = await runtime.wait(run.id, timeout=WAIT)
    assert boundary.state is RunState.COMPLETED
    assistant = [m.text for m in await runtime.messages(run.id) if m.role is Role.ASSISTANT]
    assert assistant == ["whole answer"]


async def test_a_dropped_connection_is_retried_from_the_last_committed_state(
    server: FakeAnthropicServer, open_runtime: Factory
) -> None:
    server.add(
        stream([message_start(), *text_block(0, ["half an ans"]), drop()]),
        text_response("a complete answer"),
    )
    runtime = await open_runtime()
    run = await runtime.start("hello")
    boundary = await runtime.wait(run.id, timeout=WAIT)
    assert boundary.state is RunState.COMPLETED
    assistant = [m.text for m in await runtime.messages(run.id) if m.role is Role.ASSISTANT]
    assert assistant == ["a complete answer"]
    # The retry sent the same committed history, not the dropped half.
    assert server.requests[0].body["messages"] == server.requests[1].body["messages"]


async def test_cancel_mid_stream_closes_the_http_stream(
    server: FakeAnthropicServer, open_runtime: Factory
) -> None:
    server.add(stream([message_start(), *text_block(0, ["thinking about it"]), gate("hold")]))
    runtime = await open_runtime()
    run = await runtime.start("hello")
    async with asyncio.timeout(WAIT):
        await server.wait_for_gate("hold")
    cancelled = await runtime.cancel(run.id, reason="enough")
    assert cancelled.state is RunState.CANCELLED
    async with asyncio.timeout(WAIT):
        await server.disconnected.wait()
    assert (await runtime.get_run(run.id)).state is RunState.CANCELLED


async def test_a_run_cancelled_mid_stream_counts_its_input_and_estimated_output_and_cost(
    server: FakeAnthropicServer, open_runtime: Factory
) -> None:
    """Claude reports the input and cache tokens as the message starts and the output at its
    end, which a cancelled message never reaches: the run and its job count the input reported
    and an estimate of the output streamed, priced (they used to count 0 tokens and $0.00)."""
    pieces = ["Let me think about this carefully. ", "The answer has three parts: " * 8]
    server.add(
        stream(
            [
                message_start(input_tokens=1200, cache_read=300, cache_write=40),
                *text_block(0, pieces),
                gate("hold"),
            ]
        )
    )
    runtime = await open_runtime()
    streamed = asyncio.Event()

    async def watch() -> None:
        shown = ""
        async for event in runtime.observe():
            if isinstance(event, MessageDelta):
                shown += event.text
                if shown == "".join(pieces):
                    streamed.set()

    watcher = asyncio.create_task(watch())
    await asyncio.sleep(0)  # subscribed before the run starts
    try:
        run = await runtime.start("hello")
        async with asyncio.timeout(WAIT):
            await server.wait_for_gate("hold")
            await streamed.wait()
        cancelled = await runtime.cancel(run.id, reason="Esc")
    finally:
        watcher.cancel()
    assert cancelled.state is RunState.CANCELLED

    estimate = -(-len("".join(pieces)) // CHARS_PER_TOKEN)
    expected = Usage(
        input_tokens=1200, output_tokens=estimate, cache_read_tokens=300, cache_write_tokens=40
    )
    final = await runtime.get_run(run.id)
    job = await runtime.get_job(run.job_id)
    assert final.usage == expected and job.usage == expected
    assert final.cost_usd == pytest.approx(pricing.cost_usd("claude-sonnet-5", expected))
    assert final.cost_usd > 0 and job.cost_usd == pytest.approx(final.cost_usd)


async def test_the_api_key_never_reaches_the_database_logs_or_exports(
    server: FakeAnthropicServer,
    open_runtime: Factory,
    db_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    server.add(thinking_then_tool(), error_response(401, "authentication_error", "bad key"))
    runtime = await open_runtime()
    run = await runtime.start("read the notes")
    await runtime.wait(run.id, timeout=WAIT)
    exports = [
        await runtime.export_job(run.job_id, format="md"),
        await runtime.export_job(run.job_id, format="json"),
    ]
    await runtime.close()
    # The key was really sent to the server...
    assert any(API_KEY in json.dumps(r.headers) for r in server.requests)
    # ...and is nowhere else.
    stored = b"".join(p.read_bytes() for p in db_path.parent.glob(db_path.name + "*"))
    assert API_KEY.encode() not in stored
    assert all(API_KEY not in text for text in exports)
    assert API_KEY not in caplog.text
