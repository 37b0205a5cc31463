"""A scripted model for engine tests: each call to ``stream`` plays the next scripted turn and
records the request it was given, so tests can assert on what the model saw."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime.errors import ModelError
from runtime.models import RunState, Usage
from runtime.providers.base import (
    ModelEvent,
    ModelRequest,
    StopReason,
    StopReasonName,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageReport,
)

if TYPE_CHECKING:
    from runtime.api import Runtime
    from runtime.mcp.manager import McpManager


@dataclass
class Turn:
    text: str = ""
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    thinking: str = ""
    stop: StopReasonName | None = None
    error: ModelError | None = None
    """Raised after the text has streamed (a failure mid-stream)."""
    gate: asyncio.Event | None = None
    """When set, the stream waits on it after the first text piece (for cancel/crash tests)."""
    raw_arguments: list[str] | None = None
    """JSON fragments to send instead of json.dumps(arguments) (for broken-JSON tests)."""
    usage: Usage = field(default_factory=lambda: Usage(input_tokens=10, output_tokens=5))
    pause_until: Path | None = None
    """When set, the stream pauses after all its text until this file exists (crash tests:
    the process is killed during the pause); ``ScriptedProvider.paused`` is set meanwhile."""


ScriptItem = Turn | Callable[[ModelRequest], Turn]


class ScriptedProvider:
    def __init__(self, script: list[ScriptItem], *, reference: str = "scripted:test") -> None:
        self.script = list(script)
        self.requests: list[ModelRequest] = []
        self.started = asyncio.Event()
        self.paused = asyncio.Event()
        self.closed_streams = 0
        self._reference = reference

    @property
    def reference(self) -> str:
        return self._reference

    @property
    def context_window(self) -> int:
        return 100_000

    def cost_usd(self, usage: Usage) -> float:
        return usage.input_tokens * 1e-6 + usage.output_tokens * 5e-6

    async def aclose(self) -> None:
        return None

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        if not self.script:
            raise AssertionError("the scripted model was called more often than scripted")
        item = self.script.pop(0)
        turn = item(request) if callable(item) else item
        try:
            if turn.thinking:
                yield ThinkingDelta(text=turn.thinking)
                yield ThinkingDelta(signature="sig-" + str(len(self.requests)))
            pieces = [turn.text[i : i + 7] for i in range(0, len(turn.text), 7)]
            for index, piece in enumerate(pieces):
                yield TextDelta(text=piece)
                if index == 0:
                    self.started.set()
                    if turn.gate is not None:
                        await turn.gate.wait()
            self.started.set()
            if turn.pause_until is not None:
                self.paused.set()
                while not turn.pause_until.exists():
                    await asyncio.sleep(0.05)
            if turn.error is not None:
                raise turn.error
            for index, (name, arguments) in enumerate(turn.tool_calls):
                yield ToolCallStart(
                    index=index, id=f"toolu_{len(self.requests)}_{index}", name=name
                )
                fragments = (
                    turn.raw_arguments
                    if turn.raw_arguments is not None
                    else [
                        json.dumps(arguments)[i : i + 5]
                        for i in range(0, len(json.dumps(arguments)), 5)
                    ]
                )
                for fragment in fragments:
                    yield ToolCallDelta(index=index, json_fragment=fragment)
                yield ToolCallEnd(index=index)
            yield UsageReport(usage=turn.usage)
            yield StopReason(reason=turn.stop or ("tool_use" if turn.tool_calls else "end_turn"))
        finally:
            self.closed_streams += 1


class TickCounting(ScriptedProvider):
    """Streams its text pieces without ever waiting (as a local model flat out) and notes, at
    each piece, how many times a ticker task had turned the event loop by then."""

    def __init__(self, script: list[ScriptItem]) -> None:
        super().__init__(script)
        self.ticks = 0
        self.seen: list[int] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        async for event in super().stream(request):
            if isinstance(event, TextDelta):
                self.seen.append(self.ticks)
            yield event


async def turns_while_it_streams(runtime: Runtime, provider: TickCounting) -> int:
    """The event loop's turns taken by another task from the stream's first piece to its last."""

    async def tick() -> None:
        while True:
            provider.ticks += 1
            await asyncio.sleep(0)

    provider.seen.clear()
    ticker = asyncio.create_task(tick())
    try:
        run = await runtime.start("go")
        boundary = await runtime.wait(run.id, timeout=60)
    finally:
        ticker.cancel()
    assert boundary.state is RunState.COMPLETED
    return provider.seen[-1] - provider.seen[0]


async def open_scripted(
    provider: ScriptedProvider, db_path: Path, workspace: Path, *, mcp: McpManager | None = None
) -> Runtime:
    """A runtime on ``db_path`` whose model, whatever the reference, is ``provider`` (and whose
    MCP servers are ``mcp``'s, when given)."""
    from runtime.api import Runtime
    from runtime.config import Config

    return await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=Config(),
        model="scripted:test",
        providers=lambda reference: provider,
        mcp=mcp,
    )
