"""Model references resolve to providers; prices turn usage into dollars."""

from __future__ import annotations

import pytest

from runtime.errors import ConfigError
from runtime.models import Usage
from runtime.providers.anthropic import AnthropicProvider, context_window_for
from runtime.providers.openai import DEFAULT_OPENAI_BASE_URL, OpenAIProvider
from runtime.providers.pricing import cost_usd, price_for, reference_cost_usd
from runtime.providers.registry import (
    DEFAULT_CLAUDE_MODEL,
    default_model_reference,
    resolve_provider,
)


async def test_anthropic_reference_builds_a_claude_provider_from_the_given_environment() -> None:
    provider = resolve_provider(
        "anthropic:claude-opus-4-8",
        env={"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"},
    )
    try:
        assert isinstance(provider, AnthropicProvider)
        assert provider.reference == "anthropic:claude-opus-4-8"
        assert provider.context_window == 1_000_000
    finally:
        await provider.aclose()


def test_anthropic_without_a_key_is_a_config_error_that_suggests_demo() -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_provider("anthropic:claude-sonnet-5", env={})

    assert "ANTHROPIC_API_KEY" in str(caught.value)
    assert "demo" in str(caught.value)


async def test_openai_reference_uses_openai_base_url_or_else_ollama() -> None:
    configured = resolve_provider(
        "openai:llama3.1", env={"OPENAI_BASE_URL": "http://10.0.0.5:8000/v1/"}
    )
    default = resolve_provider("openai:qwen3", env={})
    try:
        assert isinstance(configured, OpenAIProvider)
        assert configured.base_url == "http://10.0.0.5:8000/v1"
        assert configured.reference == "openai:llama3.1"
        assert isinstance(default, OpenAIProvider)
        assert default.base_url == DEFAULT_OPENAI_BASE_URL == "http://localhost:11434/v1"
    finally:
        await configured.aclose()
        await default.aclose()


def test_demo_references_build_the_demo_provider() -> None:
    assert resolve_provider("demo", env={}).reference == "demo"
    assert resolve_provider("demo:instant", env={}).reference == "demo:instant"


@pytest.mark.parametrize(
    ("reference", "words"),
    [
        ("gemini:pro", "unknown model provider 'gemini'"),
        ("anthropic", "names no model"),
        ("openai:", "names no model"),
        ("demo:slow", "unknown demo model"),
        ("", "unknown model provider"),
    ],
)
def test_bad_references_are_config_errors_with_clear_words(reference: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_provider(reference, env={"ANTHROPIC_API_KEY": "k"})

    assert words in str(caught.value)


def test_the_default_model_is_claude_with_a_key_and_demo_without() -> None:
    assert (
        default_model_reference({"ANTHROPIC_API_KEY": "k"}) == f"anthropic:{DEFAULT_CLAUDE_MODEL}"
    )
    assert default_model_reference({"ANTHROPIC_API_KEY": "  "}) == "demo"
    assert default_model_reference({}) == "demo"


def test_the_default_claude_model_is_one_the_installed_sdk_knows_and_has_not_deprecated() -> None:
    import typing

    from anthropic._data import DEPRECATED_MODELS
    from anthropic.types.model import Model

    known = typing.get_args(typing.get_args(Model)[0])
    assert DEFAULT_CLAUDE_MODEL in known
    assert DEFAULT_CLAUDE_MODEL not in DEPRECATED_MODELS


@pytest.mark.parametrize(
    ("model", "input_price", "output_price"),
    [
        ("claude-sonnet-5", 3.0, 15.0),
        ("claude-sonnet-4-5-20250929", 3.0, 15.0),
        ("claude-opus-4-8", 5.0, 25.0),
        ("claude-opus-4-1-20250805", 15.0, 75.0),
        ("claude-haiku-4-5-20251001", 1.0, 5.0),
    ],
)
def test_prices_match_models_by_family_prefix(
    model: str, input_price: float, output_price: float
) -> None:
    price = price_for(model)
    assert price is not None
    assert (price.input, price.output) == (input_price, output_price)
    assert price.cache_write == pytest.approx(input_price * 1.25)
    assert price.cache_read == pytest.approx(input_price * 0.1)


def test_cost_adds_input_output_and_cache_tokens_and_unknown_models_cost_nothing() -> None:
    usage = Usage(
        input_tokens=1_000_000,
        output_tokens=1_000_000,
        cache_read_tokens=1_000_000,
        cache_write_tokens=1_000_000,
    )
    assert cost_usd("claude-sonnet-5", usage) == pytest.approx(3 + 15 + 0.3 + 3.75)
    assert cost_usd("anthropic:claude-haiku-4-5", Usage(output_tokens=2000)) == pytest.approx(0.01)
    assert cost_usd("llama3.1", usage) == 0.0


def test_a_runs_model_reference_is_priced_as_its_provider_prices_it() -> None:
    """Recovery prices an answer a dead process streamed by the run's reference alone."""
    usage = Usage(input_tokens=1_000, output_tokens=2_000)
    for reference in ("anthropic:claude-haiku-4-5", "openai:claude-haiku-4-5", "demo"):
        provider = resolve_provider(reference, env={"ANTHROPIC_API_KEY": "k"})
        assert reference_cost_usd(reference, usage) == pytest.approx(provider.cost_usd(usage))
    assert reference_cost_usd("anthropic:claude-haiku-4-5", usage) == pytest.approx(0.011)


def test_context_windows_default_to_200k() -> None:
    assert context_window_for("claude-haiku-4-5") == 200_000
    assert context_window_for("claude-sonnet-5") == 1_000_000
    assert context_window_for("something-else") == 200_000


def test_retry_after_is_read_from_seconds_milliseconds_or_an_http_date() -> None:
    from email.utils import formatdate

    from runtime.providers.anthropic import parse_retry_after

    assert parse_retry_after({"retry-after": "12"}) == 12.0
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    right_now = parse_retry_after({"retry-after": formatdate(usegmt=True, timeval=None)})
    assert right_now is not None and 0.0 <= right_now <= 1.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None
