"""A ToolContext that records what a tool reports and answers its questions from a script."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime.mcp import McpManager, McpTool
from runtime.store.base import NewInputRequest
from runtime.tools.base import ToolContext


@dataclass
class Recorder:
    progress: list[tuple[float, float | None, str | None]] = field(default_factory=list)
    requests: list[NewInputRequest] = field(default_factory=list)
    answer: Callable[[NewInputRequest], Awaitable[Any]] | None = None

    def context(self, workspace: Path, *, tool_call_id: str = "call-1") -> ToolContext:
        async def request_input(request: NewInputRequest) -> Any:
            self.requests.append(request)
            if self.answer is None:
                raise RuntimeError("no answer scripted")
            return await self.answer(request)

        def progress(done: float, total: float | None, message: str | None) -> None:
            self.progress.append((done, total, message))

        return ToolContext(
            workspace=workspace,
            run_id="run-1",
            tool_call_id=tool_call_id,
            progress=progress,
            request_input=request_input,
        )


def answering(value: Any) -> Callable[[NewInputRequest], Awaitable[Any]]:
    async def answer(request: NewInputRequest) -> Any:
        return value

    return answer


async def tool_named(manager: McpManager, name: str) -> McpTool:
    tools = {tool.name: tool for tool in await manager.tools()}
    assert name in tools, f"{name} not in {sorted(tools)} (errors: {manager.errors})"
    return tools[name]
