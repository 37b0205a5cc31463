"""Every failure of the Anthropic API reaches the engine as a ModelError, never a vendor type."""

from __future__ import annotations

import asyncio
import logging

import anthropic
import pytest

from runtime.errors import ModelError
from runtime.providers.anthropic import AnthropicProvider
from runtime.providers.base import TextDelta
from tests.fakes.anthropic_server import (
    FakeAnthropicServer,
    drop,
    error_event,
    error_response,
    gate,
    message_start,
    stream,
    text_block,
    text_response,
)
from tests.providers.helpers import API_KEY, collect, collect_until_error, request


async def _error_of(provider: AnthropicProvider) -> tuple[list[object], ModelError]:
    events, error = await collect_until_error(provider.stream(request()))
    assert type(error) is ModelError, f"expected a ModelError, got {error!r}"
    assert not isinstance(error, anthropic.AnthropicError)
    return list(events), error


@pytest.mark.parametrize("status", [401, 403])
async def test_a_refused_key_fails_for_good_and_says_which_variable_to_check(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider, status: int
) -> None:
    kind = "authentication_error" if status == 401 else "permission_error"
    anthropic_server.add(error_response(status, kind, "invalid x-api-key"))

    _, error = await _error_of(anthropic_provider)

    assert (error.code, error.retryable, error.status) == ("auth_failed", False, status)
    assert "ANTHROPIC_API_KEY" in error.message
    assert API_KEY not in error.message


@pytest.mark.parametrize("status", [400, 404, 413, 422])
async def test_an_invalid_request_fails_for_good_with_the_apis_own_message(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider, status: int
) -> None:
    anthropic_server.add(
        error_response(status, "invalid_request_error", "messages.1: tool_use ids must be unique")
    )

    _, error = await _error_of(anthropic_provider)

    assert (error.code, error.retryable, error.status) == ("invalid_request", False, status)
    assert "messages.1: tool_use ids must be unique" in error.message


async def test_a_rate_limit_is_retryable_after_the_servers_retry_after(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider
) -> None:
    anthropic_server.add(
        error_response(429, "rate_limit_error", "Number of requests exceeded", retry_after=7)
    )

    _, error = await _error_of(anthropic_provider)

    assert (error.code, error.retryable, error.status) == ("rate_limited", True, 429)
    assert error.retry_after == 7.0


async def test_an_overloaded_api_is_retryable_after_the_servers_retry_after(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider
) -> None:
    anthropic_server.add(error_response(529, "overloaded_error", "Overloaded", retry_after="2.5"))

    _, error = await _error_of(anthropic_provider)

    assert (error.code, error.retryable, error.status) == ("overloaded", True, 529)
    assert error.retry_after == 2.5


@pytest.mark.parametrize("status", [500, 502, 503])
async def test_server_errors_are_retryable_without_a_hint_when_there_is_no_retry_after(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider, status: int
) -> None:
    anthropic_server.add(error_response(status, "api_error", "Internal server error"))

    _, error = await _error_of(anthropic_provider)

    assert (error.code, error.retryable, error.retry_after) == ("server_error", True, None)


async def test_an_overloaded_error_event_in_the_middle_of_a_stream_is_retryable(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider
) -> None:
    anthropic_server.add(
        stream([message_start(), *text_block(0, ["Partial"])[:2], error_event("overloaded_error")])
    )

    events, error = await _error_of(anthropic_provider)

    assert TextDelta(text="Partial") in events
    assert (error.code, error.retryable) == ("overloaded", True)


async def test_a_connection_dropped_mid_stream_is_a_retryable_interruption(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider
) -> None:
    anthropic_server.add(stream([message_start(), *text_block(0, ["Hal"])[:2], drop()]))

    events, error = await _error_of(anthropic_provider)

    assert TextDelta(text="Hal") in events
    assert (error.code, error.retryable) == ("stream_interrupted", True)


async def test_a_server_that_is_not_there_is_a_retryable_interruption() -> None:
    async with FakeAnthropicServer() as server:
        base_url = server.base_url  # the port is free again once the server is closed
    provider = AnthropicProvider("claude-test", api_key=API_KEY, base_url=base_url)
    try:
        _, error = await _error_of(provider)
    finally:
        await provider.aclose()

    assert (error.code, error.retryable) == ("stream_interrupted", True)


async def test_the_next_call_after_an_error_succeeds_on_the_same_provider(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider
) -> None:
    anthropic_server.add(error_response(429, "rate_limit_error", "slow down"), text_response("ok"))

    await _error_of(anthropic_provider)
    events = await collect(anthropic_provider, request())

    assert TextDelta(text="ok") in events


async def test_cancelling_mid_stream_closes_the_connection_promptly(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider
) -> None:
    anthropic_server.add(stream([message_start(), *text_block(0, ["first"])[:2], gate("hold")]))
    first_text = asyncio.Event()

    async def consume() -> None:
        async for model_event in anthropic_provider.stream(request()):
            if isinstance(model_event, TextDelta):
                first_text.set()

    task = asyncio.create_task(consume())
    async with asyncio.timeout(5):
        await anthropic_server.wait_for_gate("hold")
        await first_text.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    async with asyncio.timeout(1):
        await anthropic_server.disconnected.wait()
    assert anthropic_server.disconnects == 1


async def test_abandoning_a_stream_early_closes_the_connection(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider
) -> None:
    anthropic_server.add(stream([message_start(), *text_block(0, ["first"])[:2], gate("hold")]))

    events = anthropic_provider.stream(request())
    async with asyncio.timeout(5):
        async for model_event in events:
            if isinstance(model_event, TextDelta):
                break
        await events.aclose()  # type: ignore[attr-defined]
        await anthropic_server.disconnected.wait()


async def test_the_api_key_never_appears_in_logs_errors_or_reprs(
    anthropic_server: FakeAnthropicServer,
    anthropic_provider: AnthropicProvider,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    anthropic_server.add(
        text_response("fine"),
        error_response(401, "authentication_error", "invalid x-api-key"),
        error_response(429, "rate_limit_error", "slow", retry_after=1),
        stream([message_start(), drop()]),
    )

    await collect(anthropic_provider, request())
    errors = [(await _error_of(anthropic_provider))[1] for _ in range(3)]

    assert caplog.records, "debug logging was captured"
    assert API_KEY not in caplog.text
    for record in caplog.records:
        assert API_KEY not in repr(record.__dict__)
    for error in errors:
        assert API_KEY not in str(error)
        assert API_KEY not in repr(error.__dict__)
    assert API_KEY not in repr(anthropic_provider)
