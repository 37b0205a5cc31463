"""A ToolContext that records the progress a tool reports."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from runtime.tools.base import ToolContext


@dataclass
class ProgressLog:
    calls: list[tuple[float, float | None, str | None]] = field(default_factory=list)

    def __call__(self, done: float, total: float | None, message: str | None) -> None:
        self.calls.append((done, total, message))

    @property
    def messages(self) -> list[str]:
        return [message for _, _, message in self.calls if message is not None]


def context(workspace: Path, progress: ProgressLog | None = None) -> ToolContext:
    return ToolContext(workspace=workspace, progress=progress or ProgressLog())
