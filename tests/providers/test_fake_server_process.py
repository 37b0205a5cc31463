"""The fake servers also run as processes, for end-to-end tests of the command line."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from runtime.providers.anthropic import AnthropicProvider
from runtime.providers.base import TextDelta
from runtime.providers.openai import OpenAIProvider
from tests.fakes.anthropic_server import gate, spawn_fake_server, text_response
from tests.fakes.openai_server import openai_text_response, stream
from tests.providers.helpers import collect, request

pytestmark = pytest.mark.slow


async def test_an_anthropic_fake_process_serves_its_script_and_records_requests(
    tmp_path: Path,
) -> None:
    with spawn_fake_server([text_response(["Hi ", "there"])], directory=tmp_path) as server:
        provider = AnthropicProvider("claude-test", api_key="k", base_url=server.base_url)
        try:
            events = await collect(provider, request())
        finally:
            await provider.aclose()
        recorded = server.requests()

    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hi ", "there"]
    assert [(r["method"], r["path"]) for r in recorded] == [("POST", "/v1/messages")]
    assert recorded[0]["body"]["model"] == "claude-test"


async def test_an_openai_fake_process_can_be_released_from_a_gate_over_http(
    tmp_path: Path,
) -> None:
    script = [stream([gate("go"), *openai_text_response("late")["events"]])]
    with spawn_fake_server(script, flavor="openai", directory=tmp_path) as server:
        assert server.base_url.endswith("/v1")
        root = server.base_url.removesuffix("/v1")
        async with httpx.AsyncClient() as client:
            released = await client.post(f"{root}/_fake/release/go")
        provider = OpenAIProvider("m", base_url=server.base_url)
        try:
            events = await collect(provider, request())
        finally:
            await provider.aclose()
        async with httpx.AsyncClient() as client:
            listed = (await client.get(f"{root}/_fake/requests")).json()

    assert released.json() == {"released": "go"}
    assert TextDelta(text="late") in events
    assert [r["path"] for r in listed] == ["/v1/chat/completions"]


def test_a_script_file_can_be_written_by_hand(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"responses": [text_response("x")]}))
    from tests.fakes.anthropic_server import load_script

    assert load_script(script)[0]["events"][0]["event"] == "message_start"
