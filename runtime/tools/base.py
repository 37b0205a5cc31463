"""The tool interface. A tool validates nothing itself: the engine checks arguments against
``input_schema`` before ``run`` is called, and turns ``ToolError`` into a failed tool call whose
message the model sees."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from runtime.images import ToolImage
from runtime.store.base import NewInputRequest

ApprovalDefault = Literal["allow", "ask", "deny"]

ProgressCallback = Callable[[float, float | None, str | None], None]
"""``progress(done, total, message)``: publishes a transient ``tool_progress`` event."""

InputCallback = Callable[[NewInputRequest], Awaitable[Any]]
"""Ask the person something while the tool runs (MCP elicitation); returns the answer."""


@dataclass(frozen=True)
class ToolOutput:
    content: str
    is_error: bool = False
    structured: dict[str, Any] | None = None
    images: tuple[ToolImage, ...] = ()
    """Images for the model (``content`` describes each as ``[image: png 640×480, 12 KB]``)."""


def _no_progress(done: float, total: float | None, message: str | None) -> None:
    return None


async def _no_input(request: NewInputRequest) -> Any:
    raise RuntimeError("this tool context cannot ask for input")


@dataclass
class ToolContext:
    workspace: Path
    run_id: str = ""
    job_id: str = ""
    tool_call_id: str = ""
    progress: ProgressCallback = _no_progress
    request_input: InputCallback = _no_input
    shell_network: bool = False
    """``[permissions] shell_network`` of the job's workspace, as the engine read it: whether
    the shell's sandbox lets commands use the network."""
    extra: dict[str, Any] = field(default_factory=dict)


class Tool(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def input_schema(self) -> dict[str, Any]: ...

    @property
    def read_only(self) -> bool:
        """Reads only: allowed by default and safe to re-run on recovery."""
        ...

    @property
    def approval_default(self) -> ApprovalDefault:
        """What the approval policy does when no rule matches."""
        ...

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        """Run the tool. Raise ``ToolError`` for a failure the model should see."""
        ...

    def approval_detail(self, arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        """What an approval prompt shows besides name and arguments (e.g. ``{"diff": ...}``)."""
        ...
