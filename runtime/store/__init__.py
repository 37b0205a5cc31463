"""Durable storage: the ``Store`` protocol and its SQLite implementation."""

from runtime.store.base import (
    NewInputRequest,
    NewMessage,
    NewRun,
    NewToolCall,
    Page,
    RecoveryReport,
    Store,
)

__all__ = [
    "NewInputRequest",
    "NewMessage",
    "NewRun",
    "NewToolCall",
    "Page",
    "RecoveryReport",
    "Store",
]
