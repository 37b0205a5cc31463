"""Retrying a run whose last step left a call with an unknown outcome (issue 12 point 10).

The person chooses: run the call again (``rerun``) or continue without it (``skip``: the model
gets a result saying the outcome is unknown and what was attempted); forking from a checkpoint
is the third way (``Runtime.fork``). Either way the new run starts with a copy of the step's
assistant message and its calls: those that ended keep their results, so only the unknown ones
run again (under the approval rules) or are reported unknown."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Literal

from runtime.errors import InvalidInput
from runtime.history import last_message, retry_position
from runtime.ids import new_id
from runtime.interrupted import superseded_error
from runtime.models import (
    ContentBlock,
    Message,
    Run,
    RunState,
    ToolCall,
    ToolCallState,
    ToolUseBlock,
)
from runtime.store.base import NewMessage, NewRun, NewToolCall, Store, ToolStateChange

UnknownChoice = Literal["rerun", "skip"]


def describe_call(call: ToolCall) -> str:
    """The call as a person recognises it: the tool and its command, file or arguments."""
    arguments = call.arguments
    for key in ("command", "path", "url", "task"):
        if isinstance(arguments.get(key), str):
            return f"{call.name} {arguments[key]}"
    return f"{call.name} {json.dumps(arguments, ensure_ascii=False, sort_keys=True)}"


async def unknown_calls(store: Store, run: Run) -> tuple[Message | None, list[ToolCall]]:
    """The run's last assistant message and its calls whose outcome is unknown, if its last step
    left any (nothing when the run went on past that step)."""
    last = await last_message(store, run.id)
    if last is None or not last.tool_uses:
        return None, []
    calls = await store.list_tool_calls(run.id, message_id=last.id)
    return last, [c for c in calls if c.state is ToolCallState.INDETERMINATE]


def skipped_text(call: ToolCall) -> str:
    """What the model is told of a call whose outcome is unknown and that the person chose not
    to run again: why it is unknown as it was recorded (agent-tui stopped, an MCP server
    exited, a timeout after it may have acted), never a guess."""
    reason = (call.error or "").strip().rstrip(".") or "no reason was recorded"
    return (
        f"The outcome of this call is unknown: {reason}. The person chose to continue without "
        f"running it again. It was: {describe_call(call)}. Check its effect before relying on "
        "it."
    )


async def seed_retry(
    store: Store,
    *,
    new_run: Run,
    owner_id: str,
    assistant: Message,
    calls: list[ToolCall],
    choice: UnknownChoice,
) -> None:
    """Give ``new_run`` (queued, its history up to just before ``assistant``) a copy of that
    message with its calls: ended ones settled as they ended; unknown ones left to run again
    (``rerun``) or failed with a result that says what was attempted (``skip``). The run goes
    back to the queue for its execution."""
    claimed = await store.claim_run(new_run.id, owner_id=owner_id)
    token = claimed.execution_token or ""
    by_provider = {c.provider_id: c for c in calls}
    ids = {c.id: new_id() for c in calls}
    content: list[ContentBlock] = []
    for block in assistant.content:
        if isinstance(block, ToolUseBlock) and block.id in by_provider:
            old = by_provider[block.id]
            block = block.model_copy(update={"tool_call_id": ids[old.id]})
        content.append(block)
    await store.commit_message(
        new_run.id,
        token=token,
        message=NewMessage(role=assistant.role, content=content, model=assistant.model, usage=None),
        tool_calls=[
            NewToolCall(
                id=ids[c.id],
                provider_id=c.provider_id,
                name=c.name,
                arguments=c.arguments,
                idempotent=c.idempotent,
            )
            for c in calls
        ],
        step=1,
    )
    await store.set_tool_states(new_run.id, token=token, changes=_settled(calls, ids, choice))
    await store.finish_run(new_run.id, token=token, to=RunState.QUEUED)


def _settled(
    calls: list[ToolCall], ids: dict[str, str], choice: UnknownChoice
) -> list[ToolStateChange]:
    changes: list[ToolStateChange] = []
    for call in calls:
        new_id = ids[call.id]
        if call.state is ToolCallState.COMPLETED:
            changes.append(ToolStateChange(tool_call_id=new_id, to=ToolCallState.RUNNING))
            changes.append(
                ToolStateChange(
                    tool_call_id=new_id, to=ToolCallState.COMPLETED, result=call.result or ""
                )
            )
        elif call.state is ToolCallState.INDETERMINATE and choice == "rerun":
            continue  # stays pending: the execution runs it again (approval rules apply)
        elif call.state is ToolCallState.INDETERMINATE:
            changes.append(
                ToolStateChange(
                    tool_call_id=new_id, to=ToolCallState.FAILED, error=skipped_text(call)
                )
            )
        elif call.state is ToolCallState.PENDING:
            continue
        else:
            error = call.error or f"the call ended {call.state.value}"
            changes.append(
                ToolStateChange(tool_call_id=new_id, to=ToolCallState.FAILED, error=error)
            )
    return changes


def refuse_without_choice(calls: list[ToolCall]) -> InvalidInput:
    names = "; ".join(describe_call(c) for c in calls)
    return InvalidInput(
        f"the outcome of {names} is unknown (it may have acted): choose to run it again or to "
        "continue without it"
    )


async def create_retry_run(
    store: Store,
    run: Run,
    *,
    owner_id: str,
    unknown: UnknownChoice | None,
    ready: Callable[[], Awaitable[None]],
) -> Run:
    """The new run that retries a failed or cancelled ``run`` (queued, for ``owner_id``): from
    its last checkpoint, or, when its last step left calls with an unknown outcome, from that
    step with the choice made for them (``InvalidInput`` without one, before anything is
    written). ``ready`` runs just before the first write (the owner lease). Refused
    (``RunSuperseded``) when later runs of its job went on past it: the retry would not see
    their turns."""
    refusal = superseded_error(
        run, await store.job_runs(run.job_id), await store.list_checkpoints(run.id)
    )
    if refusal is not None:
        raise refusal
    assistant, doubtful = await unknown_calls(store, run)
    if doubtful and unknown is None:
        raise refuse_without_choice(doubtful)
    if assistant is not None and doubtful:
        position = assistant.position - 1
    else:
        position = await retry_position(store, run.id)
    job = await store.get_job(run.job_id)
    await ready()
    new_run = await store.create_run(
        NewRun(
            job_id=run.job_id,
            agent=run.agent,
            model=run.model,
            input=None,
            workspace=job.workspace,
            parent_run_id=run.parent_run_id,
            history_run_id=run.id,
            history_position=position,
            retry_of_run_id=run.id,
            owner_id=owner_id,
            max_steps=run.max_steps,
        )
    )
    if assistant is not None and doubtful and unknown is not None:
        calls = await store.list_tool_calls(run.id, message_id=assistant.id)
        await seed_retry(
            store,
            new_run=new_run,
            owner_id=owner_id,
            assistant=assistant,
            calls=calls,
            choice=unknown,
        )
    return new_run
