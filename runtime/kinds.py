"""The states and kinds of the domain (DESIGN §3, §4): plain enums, without pydantic.

``runtime.models`` re-exports them beside its models; the TUI's first screen imports them from
here, so that it is drawn before pydantic and the models are imported (DESIGN §13).
"""

from __future__ import annotations

from enum import StrEnum


class RunState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    INPUT_REQUIRED = "input_required"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_RUN_STATES


TERMINAL_RUN_STATES = frozenset({RunState.COMPLETED, RunState.FAILED, RunState.CANCELLED})


class ToolCallState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    INDETERMINATE = "indeterminate"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        return self not in (ToolCallState.PENDING, ToolCallState.RUNNING)


class InputRequestState(StrEnum):
    PENDING = "pending"
    ANSWERED = "answered"
    CANCELLED = "cancelled"


class InputKind(StrEnum):
    APPROVAL = "approval"
    QUESTION = "question"
    ELICITATION = "elicitation"


class Role(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class DraftKind(StrEnum):
    """What a part of a streaming message's draft holds (DESIGN §5: every character shown)."""

    TEXT = "text"
    THINKING = "thinking"
