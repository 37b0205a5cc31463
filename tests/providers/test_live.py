"""One call to the real Anthropic API; runs only with ``-m live`` and ANTHROPIC_API_KEY set."""

from __future__ import annotations

import os

import pytest

from runtime.providers.base import StopReason, TextDelta, UsageReport
from runtime.providers.registry import DEFAULT_CLAUDE_MODEL, resolve_provider
from tests.providers.helpers import collect, request


@pytest.mark.live
@pytest.mark.skipif(not os.environ.get("ANTHROPIC_API_KEY"), reason="ANTHROPIC_API_KEY is not set")
async def test_the_real_api_streams_an_answer_with_usage() -> None:
    model = os.environ.get("AGENT_TUI_LIVE_MODEL", DEFAULT_CLAUDE_MODEL)
    provider = resolve_provider(f"anthropic:{model}")
    try:
        events = await collect(provider, request(model=model, max_tokens=64))
    finally:
        await provider.aclose()

    assert "".join(e.text for e in events if isinstance(e, TextDelta)).strip()
    assert any(isinstance(e, UsageReport) and e.usage.output_tokens > 0 for e in events)
    assert isinstance(events[-1], StopReason)
