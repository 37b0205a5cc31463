"""The model provider interface: a stream of typed events, errors marked retryable or not.

A provider turns a ``ModelRequest`` (our messages, our tool specs) into its wire format, streams
the answer, and yields ``ModelEvent`` values. It raises only ``runtime.errors.ModelError``; vendor
exception types never reach the engine. Providers plug in by model reference ``provider:model``
(DESIGN §9) through ``runtime.providers.registry``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from runtime.models import Message, Usage


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TextDelta(_Event):
    kind: Literal["text_delta"] = "text_delta"
    text: str


class ThinkingDelta(_Event):
    """A piece of thinking. The last piece of a thinking block may carry only its signature."""

    kind: Literal["thinking_delta"] = "thinking_delta"
    text: str = ""
    signature: str | None = None


class RedactedThinking(_Event):
    kind: Literal["redacted_thinking"] = "redacted_thinking"
    data: str


class ToolCallStart(_Event):
    kind: Literal["tool_call_start"] = "tool_call_start"
    index: int
    """Index of the call within this response (0, 1, ...)."""
    id: str
    """The provider's tool_use id."""
    name: str


class ToolCallDelta(_Event):
    kind: Literal["tool_call_delta"] = "tool_call_delta"
    index: int
    json_fragment: str


class ToolCallEnd(_Event):
    kind: Literal["tool_call_end"] = "tool_call_end"
    index: int


class UsageReport(_Event):
    """Usage so far for this call; later reports replace earlier ones field by field."""

    kind: Literal["usage"] = "usage"
    usage: Usage


StopReasonName = Literal[
    "end_turn", "tool_use", "max_tokens", "refusal", "pause_turn", "stop_sequence"
]


class StopReason(_Event):
    kind: Literal["stop"] = "stop"
    reason: StopReasonName


ModelEvent = Annotated[
    TextDelta
    | ThinkingDelta
    | RedactedThinking
    | ToolCallStart
    | ToolCallDelta
    | ToolCallEnd
    | UsageReport
    | StopReason,
    Field(discriminator="kind"),
]


class ToolSpec(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    input_schema: dict[str, Any]


class ModelRequest(BaseModel):
    model_config = ConfigDict(frozen=True)

    model: str
    """The model name without the provider prefix."""
    system: str
    messages: list[Message]
    """The repaired history: user / assistant / tool messages (tool results are role tool)."""
    tools: list[ToolSpec] = []
    max_tokens: int = 8192
    thinking_budget: int | None = None
    workspace: str = "."
    """The run's workspace (the demo model reads it to plan; real providers ignore it)."""


class ModelProvider(Protocol):
    """One configured model. ``stream`` is an async generator of ``ModelEvent``."""

    @property
    def reference(self) -> str:
        """The full model reference, e.g. ``anthropic:claude-sonnet-4-5`` or ``demo``."""
        ...

    @property
    def context_window(self) -> int: ...

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream one model call. Raises ``ModelError`` (``retryable`` set) on failure."""
        ...

    def cost_usd(self, usage: Usage) -> float:
        """Estimated cost of a call with this usage (0.0 when unknown or free)."""
        ...

    async def aclose(self) -> None: ...
