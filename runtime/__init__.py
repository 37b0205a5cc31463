"""agent-tui's durable agent runtime: a library first, with no UI dependencies.

The public surface is ``Runtime`` and ``Boundary`` (``runtime.api``), the domain models
(``runtime.models``), events (``runtime.events``) and errors (``runtime.errors``). Importing
``runtime`` is cheap: the engine, store and providers load when first used.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runtime.api import Boundary, Runtime

try:
    __version__ = version("agent-tui")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0"

__all__ = ["Boundary", "Runtime", "__version__"]


def __getattr__(name: str) -> Any:
    if name in ("Boundary", "Runtime"):
        from runtime import api

        return getattr(api, name)
    raise AttributeError(f"module 'runtime' has no attribute {name!r}")
