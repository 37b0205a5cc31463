"""Identifiers: random version 4 UUIDs in the 32-hex-digit form every table keys by."""

from __future__ import annotations

import uuid

from runtime.ids import new_id


def test_new_ids_are_distinct_version_4_uuids_in_hex() -> None:
    ids = [new_id() for _ in range(2_000)]
    assert len(set(ids)) == len(ids)
    for value in ids:
        parsed = uuid.UUID(hex=value)
        assert parsed.hex == value
        assert parsed.version == 4
        assert parsed.variant == uuid.RFC_4122
