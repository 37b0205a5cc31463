"""Building and repairing the transcript sent to the model (DESIGN §8).

``repair`` is pure: every ``tool_use`` gets exactly one ``tool_result`` in the message right
after it. Orphans (a run cancelled or crashed while its tools ran) are closed with an error
result; duplicate and stray results are dropped. It returns what it changed so the engine can
record the repair.

``RunHistory`` is the transcript an execution keeps in memory: loaded (and repaired) once when
the execution starts, then extended with what it commits, so a step costs the same at step 500
as at step 5.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from runtime.models import (
    ContentBlock,
    Message,
    Role,
    Run,
    ToolResultBlock,
    ToolUseBlock,
)
from runtime.store.base import Store

_PAGE = 500

ORPHAN_RESULT = (
    "No result was recorded for this tool call (the run was interrupted or cancelled "
    "before it finished). Its outcome is unknown."
)


@dataclass(frozen=True)
class Repair:
    tool_use_id: str
    tool_call_id: str
    name: str
    action: str
    """``closed_orphan``, ``dropped_duplicate`` or ``dropped_stray``."""


def repair(messages: list[Message]) -> tuple[list[Message], list[Repair]]:
    repaired: list[Message] = []
    repairs: list[Repair] = []
    index = 0
    while index < len(messages):
        message = messages[index]
        index += 1
        if message.role is Role.TOOL:
            # Tool messages are consumed right after their assistant message; one here has no
            # tool_use before it.
            for result in message.tool_results:
                repairs.append(Repair(result.tool_use_id, result.tool_call_id, "", "dropped_stray"))
            continue
        repaired.append(message)
        uses = message.tool_uses if message.role is Role.ASSISTANT else []
        if not uses:
            continue
        results: dict[str, ToolResultBlock] = {}
        follower = messages[index] if index < len(messages) else None
        if follower is not None and follower.role is Role.TOOL:
            index += 1
            wanted = {use.id for use in uses}
            for result in follower.tool_results:
                if result.tool_use_id not in wanted:
                    repairs.append(
                        Repair(result.tool_use_id, result.tool_call_id, "", "dropped_stray")
                    )
                elif result.tool_use_id in results:
                    repairs.append(
                        Repair(result.tool_use_id, result.tool_call_id, "", "dropped_duplicate")
                    )
                else:
                    results[result.tool_use_id] = result
        blocks: list[ContentBlock] = []
        for use in uses:
            found = results.get(use.id)
            if found is None:
                found = _orphan_result(use)
                repairs.append(Repair(use.id, use.tool_call_id, use.name, "closed_orphan"))
            blocks.append(found)
        base = follower if follower is not None and follower.role is Role.TOOL else message
        repaired.append(
            Message(
                id=base.id if base is follower else f"{message.id}:repair",
                run_id=message.run_id,
                job_id=message.job_id,
                position=message.position if base is message else base.position,
                role=Role.TOOL,
                content=blocks,
                created_at=base.created_at,
            )
        )
    return repaired, repairs


def _orphan_result(use: ToolUseBlock) -> ToolResultBlock:
    return ToolResultBlock(
        tool_use_id=use.id, tool_call_id=use.tool_call_id, content=ORPHAN_RESULT, is_error=True
    )


async def all_messages(store: Store, run_id: str, *, upto: int | None = None) -> list[Message]:
    """Every message of a run in order (up to position ``upto``), read page by page."""
    messages: list[Message] = []
    after = -1
    while True:
        page = await store.list_messages(run_id, after_position=after, limit=_PAGE)
        for message in page:
            if upto is not None and message.position > upto:
                return messages
            messages.append(message)
        if len(page) < _PAGE:
            return messages
        after = page[-1].position


_LAST = 2**62


async def last_message(store: Store, run_id: str) -> Message | None:
    """The newest message of one run (not of the runs it continues)."""
    found = await store.list_messages(run_id, before_position=_LAST, limit=1)
    return found[-1] if found else None


async def run_history(store: Store, run: Run) -> list[Message]:
    """The run's messages after its history prefix: the chain of runs it continues (a
    follow-up's earlier root runs, a retry's failed run, a fork's source), each up to the
    position the next one starts from. Walked iteratively: chains can be long."""
    segments: list[tuple[str, int | None]] = [(run.id, None)]
    source_id, position = run.history_run_id, run.history_position
    while source_id is not None:
        segments.append((source_id, position))
        source = await store.get_run(source_id)
        source_id, position = source.history_run_id, source.history_position
    messages: list[Message] = []
    for run_id, upto in reversed(segments):
        messages += await all_messages(store, run_id, upto=upto)
    return messages


@dataclass
class RunHistory:
    """A run's transcript in memory: the chain of runs it continues and its own messages,
    repaired once when loaded; then each message the execution commits is appended (the
    engine commits tool_use/tool_result pairs whole, so appends need no repair).

    ``messages`` is what the model is sent. ``last`` is the newest message of the run itself
    (None before its first): an assistant message whose tool calls are not settled yet stays
    out of the repair until its tool message follows."""

    messages: list[Message] = field(default_factory=list)
    last: Message | None = None
    repairs: list[Repair] = field(default_factory=list)

    def append(self, message: Message) -> None:
        self.messages.append(message)
        self.last = message


async def load_history(store: Store, run: Run) -> RunHistory:
    """Read a run's transcript once (the prefix chain, then its own messages) and repair it."""
    raw = await run_history(store, run)
    last = raw[-1] if raw and raw[-1].run_id == run.id else None
    unsettled = last is not None and last.role is Role.ASSISTANT and bool(last.tool_uses)
    repaired, repairs = repair(raw[:-1] if unsettled else raw)
    if unsettled and last is not None:
        repaired.append(last)
    return RunHistory(messages=repaired, last=last, repairs=repairs)


async def retry_position(store: Store, run_id: str) -> int:
    """Where a retry of ``run_id`` continues from: its last checkpoint, else before its first
    message (-1 when it has none)."""
    checkpoints = await store.list_checkpoints(run_id)
    if checkpoints:
        return checkpoints[-1].last_position
    first = await store.list_messages(run_id, limit=1)
    return first[0].position if first else -1
