"""Durable storage: the ``Store`` protocol and its SQLite implementation."""

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
