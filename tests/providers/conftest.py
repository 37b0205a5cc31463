"""Fake model servers on loopback and providers pointed at them (the real SDK, unmodified)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from runtime.providers.anthropic import AnthropicProvider
from runtime.providers.openai import OpenAIProvider
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.fakes.openai_server import FakeOpenAIServer
from tests.providers.helpers import API_KEY


@pytest.fixture
async def anthropic_server() -> AsyncIterator[FakeAnthropicServer]:
    async with FakeAnthropicServer() as server:
        yield server


@pytest.fixture
async def anthropic_provider(
    anthropic_server: FakeAnthropicServer,
) -> AsyncIterator[AnthropicProvider]:
    provider = AnthropicProvider("claude-test", api_key=API_KEY, base_url=anthropic_server.base_url)
    yield provider
    await provider.aclose()


@pytest.fixture
async def openai_server() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
async def openai_provider(openai_server: FakeOpenAIServer) -> AsyncIterator[OpenAIProvider]:
    provider = OpenAIProvider("llama3.1", base_url=openai_server.base_url, api_key=API_KEY)
    yield provider
    await provider.aclose()
