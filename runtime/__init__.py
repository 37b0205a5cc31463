"""agent-tui's durable agent runtime: a library first, with no UI dependencies.

The public surface is ``Runtime`` and ``Boundary`` (``runtime.api``), the domain models
(``runtime.models``), events (``runtime.events``) and errors (``runtime.errors``). Importing
``runtime`` is cheap: the engine, store and providers load when first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runtime.api import Boundary, Runtime

    __version__: str

__all__ = ["Boundary", "Runtime", "__version__"]


def __getattr__(name: str) -> Any:
    # Lazy exports: importing ``runtime`` (as every ``runtime.x`` import does) costs nothing;
    # the engine loads on first use of Runtime, importlib.metadata on first use of the version.
    if name in ("Boundary", "Runtime"):
        from runtime import api

        return getattr(api, name)
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            value = version("agent-tui")
        except PackageNotFoundError:  # running from a source tree that was not installed
            value = "0.0.0"
        globals()["__version__"] = value
        return value
    raise AttributeError(f"module 'runtime' has no attribute {name!r}")
