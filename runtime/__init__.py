"""agent-tui's durable agent runtime: a library first, with no UI dependencies.

The public surface is ``Runtime`` and ``Boundary`` (``runtime.api``), the domain models
(``runtime.models``), events (``runtime.events``) and errors (``runtime.errors``). Importing
``runtime`` is cheap: the engine, store and providers load when first used.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: every ``runtime.x`` import (and ``--version``) pays here
if TYPE_CHECKING:
    from typing import Any

    from runtime.api import Boundary, Runtime

    __version__: str

__all__ = ["Boundary", "Runtime", "__version__"]


def __getattr__(name: str) -> Any:
    # Lazy exports: importing ``runtime`` (as every ``runtime.x`` import does) costs nothing;
    # the engine loads on first use of Runtime.
    if name in ("Boundary", "Runtime"):
        from runtime import api

        return getattr(api, name)
    if name == "__version__":
        from runtime.version import VERSION

        globals()["__version__"] = VERSION
        return VERSION
    raise AttributeError(f"module 'runtime' has no attribute {name!r}")
