"""The three state machines of DESIGN §4, one table each. Code asks these tables; it never
re-decides a transition on its own.

The store's rules (``runtime.store.rules``) are the only callers: a new record starts in the
table's one initial state (``RUN_INITIAL`` …), and every change is checked from the state the
store read (``check_run(run.state, …)``), never from a state written into the call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runtime.errors import IllegalTransition
from runtime.models import InputRequestState, RunState, ToolCallState

R = RunState
RUN_TRANSITIONS: Mapping[RunState | None, frozenset[RunState]] = {
    None: frozenset({R.QUEUED}),
    R.QUEUED: frozenset({R.RUNNING, R.CANCELLED}),
    R.RUNNING: frozenset({R.INPUT_REQUIRED, R.COMPLETED, R.FAILED, R.QUEUED, R.CANCELLED}),
    # input_required → failed: the request can no longer be answered and its call may have acted.
    R.INPUT_REQUIRED: frozenset({R.QUEUED, R.CANCELLED, R.FAILED}),
    R.COMPLETED: frozenset(),
    R.FAILED: frozenset(),
    R.CANCELLED: frozenset(),
}

T = ToolCallState
TOOL_TRANSITIONS: Mapping[ToolCallState | None, frozenset[ToolCallState]] = {
    None: frozenset({T.PENDING}),
    # pending → failed: denied, unknown tool, invalid arguments; pending → cancelled: run cancelled.
    T.PENDING: frozenset({T.RUNNING, T.FAILED, T.CANCELLED}),
    # running → pending only when recovery re-queues a call that declared itself idempotent.
    T.RUNNING: frozenset({T.COMPLETED, T.FAILED, T.INDETERMINATE, T.CANCELLED, T.PENDING}),
    T.COMPLETED: frozenset(),
    T.FAILED: frozenset(),
    T.INDETERMINATE: frozenset(),
    T.CANCELLED: frozenset(),
}

I = InputRequestState  # noqa: E741
INPUT_TRANSITIONS: Mapping[InputRequestState | None, frozenset[InputRequestState]] = {
    None: frozenset({I.PENDING}),
    I.PENDING: frozenset({I.ANSWERED, I.CANCELLED}),
    I.ANSWERED: frozenset(),
    I.CANCELLED: frozenset(),
}


def _initial(table: Mapping[Any, frozenset[Any]]) -> Any:
    [state] = table[None]
    return state


RUN_INITIAL: RunState = _initial(RUN_TRANSITIONS)
TOOL_INITIAL: ToolCallState = _initial(TOOL_TRANSITIONS)
INPUT_INITIAL: InputRequestState = _initial(INPUT_TRANSITIONS)


def check_run(from_state: RunState | None, to_state: RunState) -> None:
    if to_state not in RUN_TRANSITIONS[from_state]:
        raise IllegalTransition("run", from_state, to_state)


def check_tool(from_state: ToolCallState | None, to_state: ToolCallState) -> None:
    if to_state not in TOOL_TRANSITIONS[from_state]:
        raise IllegalTransition("tool_call", from_state, to_state)


def check_input(from_state: InputRequestState | None, to_state: InputRequestState) -> None:
    if to_state not in INPUT_TRANSITIONS[from_state]:
        raise IllegalTransition("input_request", from_state, to_state)
