"""A ToolContext that records the progress a tool reports; whether a process still runs."""

from __future__ import annotations

import os
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


def is_gone(pid: int) -> bool:
    """The process no longer runs. A zombie counts as gone: it has exited and only waits for
    its parent to collect it (in some containers init never does)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return True
    return stat[stat.rfind(b")") + 2 :].split()[0] == b"Z"
