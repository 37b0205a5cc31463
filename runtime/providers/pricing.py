"""Estimated prices of Claude models, in US dollars per million tokens (DESIGN §8).

Prices are the standard (non-batch) rates with 5-minute cache writes. A model name is matched
against the table by its longest matching prefix, so dated snapshots (``claude-haiku-4-5-20251001``)
and future point releases of a family find their family's price. Unknown models cost 0.0: the cost
shown is then an honest "unknown", not a guess.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime.models import Usage

__all__ = ["ModelPrice", "cost_usd", "price_for", "reference_cost_usd"]


@dataclass(frozen=True)
class ModelPrice:
    """US dollars per million tokens."""

    input: float
    output: float
    cache_write: float
    cache_read: float


def _price(input_price: float, output_price: float) -> ModelPrice:
    # Anthropic's rule: a 5-minute cache write costs 1.25× input, a cache hit 0.1× input.
    return ModelPrice(
        input=input_price,
        output=output_price,
        cache_write=round(input_price * 1.25, 6),
        cache_read=round(input_price * 0.1, 6),
    )


_OPUS_4_0 = _price(15.0, 75.0)

# Longest prefix wins; keep specific entries (older, pricier snapshots) next to their family.
PRICES: dict[str, ModelPrice] = {
    # Opus: 4 and 4.1 at the old price, 4.5 and later at the new one.
    "claude-opus-4-0": _OPUS_4_0,
    "claude-opus-4-1": _OPUS_4_0,
    "claude-opus-4-2025": _OPUS_4_0,
    "claude-4-opus": _OPUS_4_0,
    "claude-opus-": _price(5.0, 25.0),
    # Sonnet 4.x and 5.
    "claude-sonnet-": _price(3.0, 15.0),
    "claude-4-sonnet": _price(3.0, 15.0),
    "claude-3-7-sonnet": _price(3.0, 15.0),
    # Haiku.
    "claude-haiku-": _price(1.0, 5.0),
    "claude-3-5-haiku": _price(0.8, 4.0),
    "claude-3-haiku": _price(0.25, 1.25),
}


def price_for(model: str) -> ModelPrice | None:
    """The price of ``model`` (a name without provider prefix), or None when unknown."""
    name = model.strip().lower()
    if ":" in name:
        name = name.split(":", 1)[1]
    best: str | None = None
    for prefix in PRICES:
        if name.startswith(prefix) and (best is None or len(prefix) > len(best)):
            best = prefix
    return PRICES[best] if best is not None else None


def cost_usd(model: str, usage: Usage) -> float:
    """Estimated cost of one call (or a sum of calls) of ``model``; 0.0 when unknown."""
    price = price_for(model)
    if price is None:
        return 0.0
    total = (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + usage.cache_write_tokens * price.cache_write
        + usage.cache_read_tokens * price.cache_read
    )
    return total / 1_000_000


def reference_cost_usd(reference: str, usage: Usage) -> float:
    """What ``usage`` of the model ``reference`` (``provider:model``, as a run records it) cost,
    as its provider prices it, without building the provider: Claude models by the table,
    the other providers' models at 0.0 (unknown, as ``OpenAIProvider.cost_usd`` says)."""
    provider, _, model = reference.strip().partition(":")
    if provider.strip().lower() != "anthropic":
        return 0.0
    return cost_usd(model, usage)
