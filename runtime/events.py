"""Events (DESIGN §6): one discriminated union for durable and transient events.

Durable events are committed by the store in the same transaction as the change they record and
carry a global increasing ``seq``. Transient events (deltas, progress, notices) live only in the
process running the run. ``EVENT_ADAPTER`` is the single way events are saved and loaded.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from runtime.models import (
    Failure,
    InputRequest,
    Message,
    RunState,
    ToolCallState,
)


class _Event(BaseModel):
    model_config = ConfigDict(
        frozen=True, populate_by_name=True, serialize_by_alias=True, extra="forbid"
    )

    job_id: str
    run_id: str


class _DurableEvent(_Event):
    seq: int = 0
    """Assigned by the store when the event commits; 0 only before that."""
    created_at: float = 0.0


class RunStateChanged(_DurableEvent):
    kind: Literal["run_state_changed"] = "run_state_changed"
    from_state: RunState | None = Field(default=None, alias="from")
    to_state: RunState = Field(alias="to")
    request: InputRequest | None = None
    outcome: str | None = None
    failure: Failure | None = None
    reason: str | None = None
    interrupted: bool = False


class MessageCommitted(_DurableEvent):
    kind: Literal["message_committed"] = "message_committed"
    message: Message


class ToolStateChanged(_DurableEvent):
    kind: Literal["tool_state_changed"] = "tool_state_changed"
    tool_call_id: str
    name: str
    from_state: ToolCallState | None = Field(default=None, alias="from")
    to_state: ToolCallState = Field(alias="to")
    arguments: dict[str, Any] | None = None
    """Set when the call is reserved (``from`` is None)."""
    result: str | None = None
    error: str | None = None


class CheckpointCreated(_DurableEvent):
    kind: Literal["checkpoint_created"] = "checkpoint_created"
    checkpoint_id: str
    step: int


class RepairNote(BaseModel):
    """One change the history repair made to the request (DESIGN §6, §8)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool_use_id: str
    tool_call_id: str
    name: str
    action: str
    """``closed_orphan``, ``dropped_duplicate`` or ``dropped_stray``."""


class HistoryRepaired(_DurableEvent):
    """The transcript sent to the model was repaired (orphaned ``tool_use`` ids closed, results
    dropped); once per execution that had to repair it."""

    kind: Literal["history_repaired"] = "history_repaired"
    repairs: list[RepairNote]


class RunNoted(_DurableEvent):
    """A fact about a run that is neither a message nor a state change (DESIGN §16): the
    instruction files it used (``instructions``), a phase it moved to (``phase``), a compaction of
    its history (``compaction``), the usage of an answer cut short counted in its totals
    (``cut_short``: written after the cancel when another process cancelled the run, so every
    process showing the run reads its totals and its partial answer again). ``text`` is one line
    for people; ``data`` holds the record."""

    kind: Literal["run_noted"] = "run_noted"
    note: Literal["instructions", "phase", "compaction", "cut_short"]
    text: str
    data: dict[str, Any] = Field(default_factory=dict)


class JobArchived(_DurableEvent):
    """A person archived (``archived``) or brought back a job: every browser on the database
    hides or shows it. ``run_id`` is the job's latest root run (every event names a run)."""

    kind: Literal["job_archived"] = "job_archived"
    archived: bool


class MessageDelta(_Event):
    kind: Literal["message_delta"] = "message_delta"
    execution_id: str
    message_id: str
    offset: int
    """Characters of this message's text before this piece."""
    text: str
    thinking: bool = False
    """True for a piece of thinking rather than answer text."""


class ToolProgress(_Event):
    kind: Literal["tool_progress"] = "tool_progress"
    tool_call_id: str
    progress: float
    total: float | None = None
    message: str | None = None


class Notice(_Event):
    """Something a person should see that is not a state change (a retry after a rate limit)."""

    kind: Literal["notice"] = "notice"
    level: Literal["info", "warning", "error"] = "info"
    text: str


DurableEvent = Annotated[
    RunStateChanged
    | MessageCommitted
    | ToolStateChanged
    | CheckpointCreated
    | HistoryRepaired
    | RunNoted
    | JobArchived,
    Field(discriminator="kind"),
]
TransientEvent = Annotated[MessageDelta | ToolProgress | Notice, Field(discriminator="kind")]
Event = Annotated[
    RunStateChanged
    | MessageCommitted
    | ToolStateChanged
    | CheckpointCreated
    | HistoryRepaired
    | RunNoted
    | JobArchived
    | MessageDelta
    | ToolProgress
    | Notice,
    Field(discriminator="kind"),
]

EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)
DURABLE_EVENT_ADAPTER: TypeAdapter[DurableEvent] = TypeAdapter(DurableEvent)

DURABLE_KINDS = frozenset(
    {
        "run_state_changed",
        "message_committed",
        "tool_state_changed",
        "checkpoint_created",
        "history_repaired",
        "run_noted",
        "job_archived",
    }
)

LIVE_DETAIL_KINDS = frozenset({"message_delta", "tool_progress"})
"""Transient events that only matter to whoever watches the run live (not notices: those are
for whoever looks at all)."""


def repair_text(event: HistoryRepaired) -> str:
    """The one line a person reads for a ``history_repaired`` event: which tool calls were
    closed and why, and how many stray results were left out (no "history repaired": a trial
    did not know what that meant)."""
    closed = sorted({r.name or r.tool_use_id for r in event.repairs if r.action == "closed_orphan"})
    left_out = sum(1 for r in event.repairs if r.action != "closed_orphan")
    said: list[str] = []
    if closed:
        one = len(closed) == 1
        said.append(
            f"{', '.join(closed)} had no result (the run stopped while "
            f"{'it' if one else 'they'} ran), so the model was told "
            f"{'its' if one else 'their'} outcome is unknown."
        )
    if left_out:
        results = "result" if left_out == 1 else "results"
        said.append(
            f"{left_out} tool {results} without a matching call "
            f"{'was' if left_out == 1 else 'were'} left out of what the model reads."
        )
    return " ".join(said)


def is_durable(event: Event) -> bool:
    return event.kind in DURABLE_KINDS


def dump_event(event: Event) -> dict[str, Any]:
    """The JSON-ready form of an event, as the CLI prints it and the store saves it."""
    data: dict[str, Any] = EVENT_ADAPTER.dump_python(event, mode="json", by_alias=True)
    return data


def load_event(data: str | bytes | dict[str, Any]) -> Event:
    if isinstance(data, dict):
        return EVENT_ADAPTER.validate_python(data)
    return EVENT_ADAPTER.validate_json(data)
