"""Model references (``provider:model``, DESIGN §9) checked without importing any provider:
the standard library only, so a command line's ``--model`` (or ``AGENT_TUI_MODEL``) is checked
before the TUI draws its first frame at no cost to it (``runtime.providers`` brings pydantic:
75 ms of the first frame when this lived there)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from runtime.errors import ConfigError

__all__ = ["PROVIDER_NAMES", "check_reference"]

PROVIDER_NAMES = ("anthropic", "openai", "demo")


def check_reference(reference: str, *, env: Mapping[str, str] | None = None) -> None:
    """ConfigError when ``reference`` cannot be used (unknown provider, no model, no key),
    without importing any provider's SDK: cheap enough to run before a task is stored."""
    env = os.environ if env is None else env
    provider_name, _, model = reference.strip().partition(":")
    provider_name = provider_name.strip().lower()
    model = model.strip()
    if provider_name == "demo":
        if model not in ("", "instant"):
            raise ConfigError(f"unknown demo model {reference!r}: use `demo` or `demo:instant`")
        return
    if provider_name not in PROVIDER_NAMES:
        raise ConfigError(
            f"unknown model provider {provider_name!r} in {reference!r}: "
            "use anthropic:MODEL, openai:MODEL or demo"
        )
    if not model:
        raise ConfigError(
            f"model reference {reference!r} names no model: write {provider_name}:MODEL"
        )
    if provider_name == "anthropic" and not env.get("ANTHROPIC_API_KEY", "").strip():
        raise ConfigError(
            f"ANTHROPIC_API_KEY is not set, so {reference!r} cannot be used: "
            "set ANTHROPIC_API_KEY, or use the offline model `demo`"
        )
