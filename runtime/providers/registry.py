"""Model references (``provider:model``) to providers (DESIGN §9).

    anthropic:MODEL   Claude through the official SDK; needs ANTHROPIC_API_KEY
                      (ANTHROPIC_BASE_URL optional)
    openai:MODEL      any OpenAI-compatible server; OPENAI_BASE_URL (default: Ollama on
                      http://localhost:11434/v1), OPENAI_API_KEY optional
    demo              the offline demo model; ``demo:instant`` streams with no delay

Both functions read the environment only through the ``env`` mapping they are given (the
process environment when None), so callers and tests decide what is visible.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
from collections.abc import Mapping

from runtime.model_refs import check_reference
from runtime.providers.base import ModelProvider

__all__ = [
    "DEFAULT_CLAUDE_MODEL",
    "check_reference",
    "default_model_reference",
    "preload_provider",
    "preload_provider_soon",
    "resolve_provider",
]

log = logging.getLogger(__name__)

DEFAULT_CLAUDE_MODEL = "claude-sonnet-5"
"""The Claude model used when a key is set and no model is configured."""


def default_model_reference(env: Mapping[str, str] | None = None) -> str:
    """Claude when ANTHROPIC_API_KEY is set, else the offline ``demo`` model."""
    env = os.environ if env is None else env
    if env.get("ANTHROPIC_API_KEY", "").strip():
        return f"anthropic:{DEFAULT_CLAUDE_MODEL}"
    return "demo"


def preload_provider(reference: str) -> None:
    """Import the module of ``reference``'s provider (and its vendor SDK) without building it.

    A program that will soon call the model imports it ahead, on a thread of its own: the
    ``anthropic`` SDK takes about a second to import, which the first task would otherwise wait
    for on its event loop. A reference that names no provider imports nothing; the error is
    ``resolve_provider``'s to report when the model is used."""
    provider_name = reference.strip().partition(":")[0].strip().lower()
    if not provider_name:
        return
    module = {"demo": "demo", "anthropic": "anthropic"}.get(provider_name, "openai")
    importlib.import_module(f"runtime.providers.{module}")


def preload_provider_soon(reference: str) -> asyncio.Future[None]:
    """``preload_provider`` on the running event loop's default executor, not waited for (the
    future is done once the import is); a failure is logged (the first use of the model reports
    it to the person)."""

    def preload() -> None:
        try:
            preload_provider(reference)
        except Exception:  # the top of this thread
            log.exception("importing the provider of %s failed", reference)

    return asyncio.get_running_loop().run_in_executor(None, preload)


def resolve_provider(reference: str, *, env: Mapping[str, str] | None = None) -> ModelProvider:
    """The provider for ``reference``; ConfigError with a clear message when it cannot be built."""
    env = os.environ if env is None else env
    check_reference(reference, env=env)
    provider_name, _, model = reference.strip().partition(":")
    provider_name = provider_name.strip().lower()
    model = model.strip()
    if provider_name == "demo":
        from runtime.providers.demo import DemoProvider

        return DemoProvider(instant=model == "instant")
    if provider_name == "anthropic":
        from runtime.providers.anthropic import AnthropicProvider

        return AnthropicProvider(
            model,
            api_key=env.get("ANTHROPIC_API_KEY", "").strip(),
            base_url=env.get("ANTHROPIC_BASE_URL") or None,
        )

    from runtime.providers.openai import DEFAULT_OPENAI_BASE_URL, OpenAIProvider

    return OpenAIProvider(
        model,
        base_url=env.get("OPENAI_BASE_URL") or DEFAULT_OPENAI_BASE_URL,
        api_key=env.get("OPENAI_API_KEY") or None,
    )
