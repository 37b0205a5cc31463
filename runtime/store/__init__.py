"""Durable storage: the ``Store`` protocol and its SQLite implementation.

The SQLite store loads on first use (``runtime.store.base`` is imported by light modules such as
``runtime.transcript``, which the TUI's first frame needs without the database code).
"""

from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
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


def __getattr__(name: str) -> Any:
    if name in ("SqliteStore", "open_sqlite_store"):
        from runtime.store import sqlite

        return getattr(sqlite, name)
    raise AttributeError(f"module 'runtime.store' has no attribute {name!r}")
