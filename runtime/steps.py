"""The step a run is on, numbered one way for every client: the status line of every agent-tui
on the database (the one executing the run and any watching it) and `agent-tui show`.

A step is one model call and the tool calls its message asks for. The run counts a step
(``Run.step``) when the step's message is committed: after its model call, before its tools
run (they belong to it: ``ToolCall.step``, and its checkpoint is written when they end). So the
step in progress while the run works is

- ``Run.step + 1`` while its model call runs (the step is not counted yet);
- ``Run.step`` while the tool calls of the last counted step are open (pending or running).

A run that does not work (queued, waiting for a person, interrupted, ended) shows the steps it
took, ``Run.step``. Plain data in, a number out: no pydantic, no store (the TUI's first screen
imports it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from runtime.models import Run


def step_shown(run: Run, *, working: bool, calls_open: bool) -> int:
    """The step to show for ``run`` ("step N of at most M"): while it ``working``, the step in
    progress (``calls_open``: tool calls of its last counted step are pending or running),
    else the steps it took; never past ``run.max_steps``."""
    if working and not calls_open:
        return min(run.step + 1, run.max_steps)
    return run.step
