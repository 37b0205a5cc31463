"""Identifiers of jobs, runs, messages, tool calls and checkpoints."""

from __future__ import annotations

import os


def new_id() -> str:
    """A random (version 4) UUID as 32 hex digits, what ``uuid.uuid4().hex`` gives, in a third
    of its time (a step makes half a dozen: its message, tool calls, checkpoint)."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # the RFC 4122 variant
    return raw.hex()
