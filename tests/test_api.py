"""The public API protocol (DESIGN §7) is what ``Runtime`` implements, method by method."""

from __future__ import annotations

import inspect

from runtime.api import Runtime, RuntimeApi


def test_the_runtime_has_every_operation_of_the_api_with_the_same_parameters() -> None:
    operations = {
        name: member
        for name, member in vars(RuntimeApi).items()
        if callable(member) and not name.startswith("_")
    }
    assert {"start", "wait", "observe", "respond", "cancel", "retry", "fork"} <= set(operations)
    for name, declared in operations.items():
        implemented = getattr(Runtime, name)
        assert inspect.iscoroutinefunction(implemented) == inspect.iscoroutinefunction(declared)
        expected = inspect.signature(declared).parameters
        actual = inspect.signature(implemented).parameters
        assert list(actual) == list(expected), name
        for parameter, spec in expected.items():
            assert (actual[parameter].kind, actual[parameter].default) == (
                spec.kind,
                spec.default,
            ), f"{name}({parameter})"
