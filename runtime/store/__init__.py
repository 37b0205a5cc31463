"""Durable storage: the ``Store`` protocol and its SQLite implementation.

Everything loads on first use: the SQLite store (``runtime.store.base`` is imported by light
modules such as ``runtime.transcript``, which the TUI's first frame needs without the database
code), and ``runtime.store.base`` itself (pydantic), so that the standard-library-only modules of
this package (``migrations``, ``schema``, ``checks``) serve ``agent-tui runs`` without it.
"""

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from runtime.store.base import (
        NewInputRequest,
        NewMessage,
        NewRun,
        NewToolCall,
        Page,
        RecoveryReport,
        StepCommit,
        Store,
        ToolStateChange,
    )
    from runtime.store.sqlite import SqliteStore, open_sqlite_store

__all__ = [
    "NewInputRequest",
    "NewMessage",
    "NewRun",
    "NewToolCall",
    "Page",
    "RecoveryReport",
    "SqliteStore",
    "StepCommit",
    "Store",
    "ToolStateChange",
    "open_sqlite_store",
]

_FROM_BASE = frozenset(
    {
        "NewInputRequest",
        "NewMessage",
        "NewRun",
        "NewToolCall",
        "Page",
        "RecoveryReport",
        "StepCommit",
        "Store",
        "ToolStateChange",
    }
)


def __getattr__(name: str) -> "Any":
    if name in _FROM_BASE:
        from runtime.store import base

        return getattr(base, name)
    if name in ("SqliteStore", "open_sqlite_store"):
        from runtime.store import sqlite

        return getattr(sqlite, name)
    raise AttributeError(f"module 'runtime.store' has no attribute {name!r}")
