"""Domain models of the durable runtime (DESIGN §3).

Everything here is plain data: pydantic models that are saved to and loaded from the store and
sent to clients. No model holds a live object or a closure.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum
from functools import cache
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

# Re-exported: the domain's enums live in the pydantic-free ``runtime.kinds``.
from runtime.kinds import TERMINAL_RUN_STATES as TERMINAL_RUN_STATES
from runtime.kinds import DraftKind as DraftKind
from runtime.kinds import InputKind as InputKind
from runtime.kinds import InputRequestState as InputRequestState
from runtime.kinds import Role as Role
from runtime.kinds import RunState as RunState
from runtime.kinds import ToolCallState as ToolCallState


class _Model(BaseModel):
    model_config = ConfigDict(
        frozen=True, populate_by_name=True, serialize_by_alias=True, extra="forbid"
    )


class Usage(_Model):
    """Token counts of one model call, or summed over a run or job."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return trusted(
            Usage,
            {
                "input_tokens": self.input_tokens + other.input_tokens,
                "output_tokens": self.output_tokens + other.output_tokens,
                "cache_read_tokens": self.cache_read_tokens + other.cache_read_tokens,
                "cache_write_tokens": self.cache_write_tokens + other.cache_write_tokens,
            },
        )

    @property
    def total_tokens(self) -> int:
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
        )

    @property
    def context_tokens(self) -> int:
        """Tokens the model saw as its prompt for this call (its context fill)."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens


class Failure(_Model):
    """Why a run failed: a stable code and a message for people."""

    code: str
    message: str


# --- content blocks -------------------------------------------------------------------------


class TextBlock(_Model):
    type: Literal["text"] = "text"
    text: str


class ThinkingBlock(_Model):
    type: Literal["thinking"] = "thinking"
    thinking: str
    # Providers that sign thinking (Anthropic) need the signature sent back unchanged.
    signature: str | None = None
    # Redacted thinking is opaque data that must be echoed back as is.
    redacted: bool = False


class ToolUseBlock(_Model):
    type: Literal["tool_use"] = "tool_use"
    id: str
    """The provider's tool_use id (what the model refers to)."""
    tool_call_id: str
    """Our durable ToolCall id."""
    name: str
    input: dict[str, Any]


class ImageBlock(_Model):
    """An image of a tool result, stored once in the store's blobs by ``sha256``."""

    type: Literal["image"] = "image"
    media_type: str
    sha256: str
    size: int
    width: int | None = None
    height: int | None = None
    data: str | None = Field(default=None, exclude=True)
    """The base64 bytes, loaded only for a model request (never stored with the message)."""

    @property
    def label(self) -> str:
        """``[image: png 640×480, 12 KB]``."""
        from runtime.images import describe_image

        shape = (self.width, self.height) if self.width and self.height else None
        return describe_image(self.media_type, self.size, shape)


class ToolResultBlock(_Model):
    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    tool_call_id: str
    content: str
    is_error: bool = False
    images: list[ImageBlock] = Field(default_factory=list, exclude_if=lambda images: not images)
    """Images the tool returned, sent to the model as images (``content`` describes them)."""


ContentBlock = Annotated[
    TextBlock | ThinkingBlock | ToolUseBlock | ToolResultBlock, Field(discriminator="type")
]
"""Message content. Images live inside tool results (``ToolResultBlock.images``)."""


def text_of(content: Iterable[ContentBlock]) -> str:
    """The text blocks of ``content``, joined: what a message says."""
    return "".join(b.text for b in content if isinstance(b, TextBlock))


class Message(_Model):
    """One message of a run, stored once, at its position in the run."""

    id: str
    run_id: str
    job_id: str
    position: int
    role: Role
    content: list[ContentBlock]
    model: str | None = None
    usage: Usage | None = None
    cost_usd: float = 0.0
    created_at: float

    @property
    def text(self) -> str:
        return text_of(self.content)

    @property
    def tool_uses(self) -> list[ToolUseBlock]:
        return [b for b in self.content if isinstance(b, ToolUseBlock)]

    @property
    def tool_results(self) -> list[ToolResultBlock]:
        return [b for b in self.content if isinstance(b, ToolResultBlock)]


# --- durable records ------------------------------------------------------------------------


class Job(_Model):
    id: str
    title: str
    workspace: str
    agent: str
    created_at: float
    updated_at: float
    usage: Usage = Usage()
    cost_usd: float = 0.0
    archived: bool = False
    latest_run_state: RunState | None = None


class Run(_Model):
    id: str
    job_id: str
    agent: str
    model: str
    state: RunState
    revision: int
    input: str | None
    """The user's prompt, follow-up or delegated task; None when the run continues a history."""
    parent_run_id: str | None = None
    parent_tool_call_id: str | None = None
    history_run_id: str | None = None
    """The run whose messages (up to ``history_position``) come before this run's own."""
    history_position: int | None = None
    forked_from_checkpoint_id: str | None = None
    retry_of_run_id: str | None = None
    idempotency_key: str | None = None
    owner_id: str | None = None
    execution_token: str | None = None
    step: int = 0
    max_steps: int = 50
    interrupted: bool = False
    """Recovered after its owner died; waits for a person to resume it (DESIGN §5)."""
    detached: bool = False
    """Queued for workers (``agent-tui worker``): any worker whose roots reach the workspace
    executes it, and picks it up again when it was interrupted; clients only create, answer
    and watch it (DESIGN §15). Set at creation (children inherit it), never changed."""
    outcome: str | None = None
    failure: Failure | None = None
    cancel_reason: str | None = None
    usage: Usage = Usage()
    cost_usd: float = 0.0
    context_tokens: int = 0
    created_at: float
    updated_at: float


class ToolCall(_Model):
    id: str
    run_id: str
    job_id: str
    message_id: str
    index: int
    """Order of the call in its assistant message; results are committed in this order."""
    provider_id: str
    name: str
    arguments: dict[str, Any]
    state: ToolCallState
    idempotent: bool = False
    """Read-only or idempotent: may be re-run on recovery instead of becoming indeterminate."""
    step: int
    result: str | None = None
    error: str | None = None
    child_run_id: str | None = None
    created_at: float
    started_at: float | None = None
    finished_at: float | None = None


class InputRequest(_Model):
    id: str
    run_id: str
    job_id: str
    kind: InputKind
    prompt: str
    options: list[str] = []
    answer_schema: dict[str, Any] = Field(default_factory=dict, alias="schema")
    tool_call_id: str | None = None
    arguments_digest: str | None = None
    """SHA-256 of the canonical JSON of the tool call's arguments when the request was made."""
    detail: dict[str, Any] = Field(default_factory=dict)
    """Presentation data: tool name, arguments, a diff for writes, the MCP server name."""
    state: InputRequestState = InputRequestState.PENDING
    answer: Any = None
    created_at: float
    answered_at: float | None = None


class Boundary(_Model):
    """Where ``Runtime.wait`` returns: a terminal state, or ``input_required`` with its request.

    ``run`` is the run that reached the boundary: the waited-for run, or one of its
    descendants when a delegated child waits for a person."""

    run: Run
    request: InputRequest | None = None

    @property
    def state(self) -> RunState:
        return self.run.state


class Checkpoint(_Model):
    id: str
    run_id: str
    job_id: str
    step: int
    last_position: int
    """Position of the last message of the run this checkpoint covers; history is not copied."""
    usage: Usage = Usage()
    pending_tool_call_ids: list[str] = []
    created_at: float


class Draft(_Model):
    """What streamed of a message not yet committed (its text and its thinking), saved within
    250 ms of being shown."""

    run_id: str
    message_id: str
    text: str
    updated_at: float
    thinking: str = ""
    before_position: int | None = None
    """None while it is the draft of the run's latest attempt (its execution may still commit
    it, or it ended and the run waits). Once the run goes on (claimed again after a crash or a
    close), the partial answer of an attempt that ended: kept in the run, before the message at
    this position (the first one the run committed after it)."""


class SearchHit(_Model):
    message_id: str
    run_id: str
    job_id: str
    job_title: str
    snippet: str
    """The words around the match, the matched terms between ``«`` and ``»``."""
    created_at: float
    position: int | None = None
    """The message's position in its run (None from a store that did not say)."""
    role: Role | None = None
    """Who wrote the message (the person, the agent, a tool's result); None from a store that
    did not say. Hits of similar jobs read alike without it."""


# --- records from trusted values ---------------------------------------------------------------

_Record = TypeVar("_Record", bound=BaseModel)
_IMMUTABLE = (type(None), bool, int, float, str, bytes, Enum, tuple, frozenset)


@cache
def _construction(cls: type[BaseModel]) -> tuple[frozenset[str], dict[str, Any], tuple[str, ...]]:
    """``cls``'s field names, the defaults that may be shared (immutable), and the fields whose
    default must be made for each record (a factory, or a mutable value pydantic copies)."""
    shared: dict[str, Any] = {}
    made: list[str] = []
    for name, info in cls.model_fields.items():
        if info.is_required():
            continue
        if info.default_factory is None and isinstance(info.default, _IMMUTABLE):
            shared[name] = info.default
        else:
            made.append(name)
    return frozenset(cls.model_fields), shared, tuple(made)


def trusted(cls: type[_Record], values: dict[str, Any], /) -> _Record:
    """``cls.model_validate(values)`` without validating, for values already valid: fields of
    records and inputs that were validated, of rows the store wrote. What ``model_construct``
    makes (fields by name, defaults for those left out; ``values`` is the record's dict when it
    names every field) in under half of its time: it loops over the fields in Python, so it
    cost more than validating (4.3 against 2.3 us a ``ToolCall``, pydantic 2.14); this takes
    1.3. A name that is no field, or a required field left out, is a ``TypeError``."""
    names, shared, made = _construction(cls)
    given = set(values)
    if len(values) != len(names):
        values = shared | values
        for name in made:
            if name not in values:
                values[name] = cls.model_fields[name].get_default(call_default_factory=True)
    if values.keys() != names:
        unknown, missing = sorted(values.keys() - names), sorted(names - values.keys())
        raise TypeError(f"{cls.__name__}: unknown fields {unknown}, missing fields {missing}")
    record = cls.__new__(cls)
    object.__setattr__(record, "__dict__", values)
    object.__setattr__(record, "__pydantic_fields_set__", given)
    object.__setattr__(record, "__pydantic_extra__", None)
    object.__setattr__(record, "__pydantic_private__", None)
    return record


def replaced(record: _Record, /, **changes: Any) -> _Record:
    """``record.model_copy(update=changes)`` for a record with no private attributes nor extra
    fields (every model here): the copy of its dict updated, without ``copy.copy``'s protocol
    (1.4 against 2.1 us). The changes are trusted, as ``model_copy``'s are."""
    cls = type(record)
    data = {**record.__dict__, **changes}
    copied = cls.__new__(cls)
    object.__setattr__(copied, "__dict__", data)
    object.__setattr__(
        copied, "__pydantic_fields_set__", record.__pydantic_fields_set__ | changes.keys()
    )
    object.__setattr__(copied, "__pydantic_extra__", None)
    object.__setattr__(copied, "__pydantic_private__", None)
    return copied
