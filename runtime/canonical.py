"""The one canonical-JSON hash (sorted keys, no spaces, UTF-8): idempotency keys in the store
and tool-call argument digests in the engine use the same function."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from runtime.errors import InvalidInput


def canonical_json(value: Any) -> str:
    """``value`` as canonical JSON. Raises ``InvalidInput`` for what JSON cannot hold."""
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"not JSON data: {exc}") from exc


def canonical_hash(value: Any) -> str:
    """SHA-256 (hex) of the canonical JSON of ``value``."""
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


def arguments_digest(arguments: Mapping[str, Any]) -> str:
    """A tool call's arguments as an input request records them: a change between the
    request and its answer refuses the answer (DESIGN §4.3)."""
    return canonical_hash(dict(arguments))
