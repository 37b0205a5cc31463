"""Records made from trusted values (``trusted``, ``replaced``): the same records validation and
``model_copy`` make, without validating again what the store already validated."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.events import CheckpointCreated, ToolStateChanged
from runtime.models import (
    Checkpoint,
    Run,
    RunState,
    ToolCall,
    ToolCallState,
    Usage,
    replaced,
    trusted,
)


def _call_values() -> dict[str, Any]:
    return {
        "id": "c1",
        "run_id": "r1",
        "job_id": "j1",
        "message_id": "m1",
        "index": 0,
        "provider_id": "toolu_1",
        "name": "read_file",
        "arguments": {"path": "a.py"},
        "state": ToolCallState.PENDING,
        "idempotent": True,
        "step": 3,
        "result": None,
        "error": None,
        "child_run_id": None,
        "created_at": 1.5,
        "started_at": None,
        "finished_at": None,
    }


def test_a_trusted_record_equals_the_validated_one_and_dumps_the_same() -> None:
    made, validated = trusted(ToolCall, _call_values()), ToolCall.model_validate(_call_values())
    assert made == validated
    assert made.model_dump_json() == validated.model_dump_json()
    assert made.model_fields_set == validated.model_fields_set


def test_fields_left_out_take_their_defaults_and_are_not_marked_set() -> None:
    values = {"job_id": "j1", "run_id": "r1", "checkpoint_id": "k1", "step": 2}
    made = trusted(CheckpointCreated, dict(values))
    assert made == CheckpointCreated.model_validate(values)
    assert made.seq == 0 and made.created_at == 0.0
    assert made.model_fields_set == set(values)
    event = trusted(
        ToolStateChanged,
        {
            "job_id": "j",
            "run_id": "r",
            "tool_call_id": "c",
            "name": "n",
            "to_state": ToolCallState.RUNNING,
        },
    )
    assert event.from_state is None and event.result is None


def test_a_mutable_default_is_made_for_each_record() -> None:
    values = {"id": "k", "run_id": "r", "job_id": "j", "step": 1, "last_position": 0}
    first = trusted(Checkpoint, {**values, "created_at": 1.0})
    second = trusted(Checkpoint, {**values, "created_at": 2.0})
    assert first.pending_tool_call_ids == [] and first.usage == Usage()
    assert first.pending_tool_call_ids is not second.pending_tool_call_ids


def test_an_unknown_or_missing_field_is_a_type_error() -> None:
    with pytest.raises(TypeError, match=r"unknown fields \['colour'\]"):
        trusted(ToolCall, {**_call_values(), "colour": "red"})
    values = _call_values()
    del values["name"]
    with pytest.raises(TypeError, match=r"missing fields \['name'\]"):
        trusted(ToolCall, values)


def test_a_replaced_record_equals_model_copy_and_leaves_the_original_alone() -> None:
    run = Run(
        id="r",
        job_id="j",
        agent="a",
        model="m",
        state=RunState.RUNNING,
        revision=4,
        input=None,
        created_at=1.0,
        updated_at=1.0,
    )
    changes = {"revision": 5, "updated_at": 2.0, "usage": Usage(input_tokens=3)}
    changed = replaced(run, **changes)
    assert changed == run.model_copy(update=changes)
    assert changed.model_fields_set == run.model_copy(update=changes).model_fields_set
    assert run.revision == 4 and changed.revision == 5
    with pytest.raises(ValueError, match="frozen"):
        changed.revision = 6  # type: ignore[misc]


def test_usage_sums_are_usage_records() -> None:
    total = Usage(input_tokens=1, output_tokens=2) + Usage(input_tokens=10, cache_read_tokens=4)
    assert total == Usage(input_tokens=11, output_tokens=2, cache_read_tokens=4)
    assert total.context_tokens == 15


def test_filling_defaults_leaves_the_values_given_as_they_were() -> None:
    values: dict[str, Any] = {"job_id": "j1", "run_id": "r1", "checkpoint_id": "k1", "step": 2}
    given = dict(values)
    made = trusted(CheckpointCreated, values)
    assert values == given
    assert made.seq == 0
