"""Hooks around a tool call and on notifications (DESIGN §16), in the engine's terms: a call
and its outcome in, an outcome out. The hooks themselves run in ``runtime.hooks``.

A before-tool deny becomes the call's failure the way a person's deny does ("… denied this tool
call: reason"), naming the hook; a hook that breaks (bad exit, bad output, timeout) stops the call
with that failure. After a tool, a hook may rewrite what the model sees; one that breaks leaves
the result and adds a line saying so."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from runtime.denials import by_hook, did_not_run
from runtime.engine.delegation import Outcome
from runtime.hooks import (
    HookEntry,
    HooksConfig,
    fire_and_forget,
    matching_hooks,
    run_after_tool,
    run_before_tool,
)
from runtime.models import Run, RunState, ToolCall, ToolCallState

__all__ = [
    "checked_first",
    "checking_text",
    "hooked_after",
    "hooked_before",
    "notify_input_required",
    "notify_run_finished",
]


def checked_first(hooks: HooksConfig, tool_name: str) -> bool:
    """Whether a call of ``tool_name`` waits for before-tool hooks: it stays ``pending`` until
    they let it through, and is ``running`` only once the tool runs (DESIGN §4.2)."""
    return bool(matching_hooks(hooks.before_tool, tool_name))


def checking_text(entry: HookEntry) -> str:
    """What a call shows while the before-tool hook ``entry`` decides about it."""
    return f"checking with hook `{entry.shown_command()}`…"


async def hooked_before(
    hooks: HooksConfig,
    run: Run,
    call: ToolCall,
    workspace: Path,
    *,
    checking: Callable[[str], None] | None = None,
) -> str | None:
    """None when the call may run, else the error it fails with. ``checking`` is told what the
    call waits for as each hook starts (``checking_text``)."""
    outcome = await run_before_tool(
        hooks,
        tool_name=call.name,
        arguments=call.arguments,
        workspace=workspace,
        run_id=run.id,
        job_id=run.job_id,
        starting=None if checking is None else lambda entry: checking(checking_text(entry)),
    )
    if outcome.decision == "deny":
        return by_hook(outcome.hook, outcome.reason)
    if outcome.failure:
        return did_not_run(outcome.failure)
    return None


async def hooked_after(
    hooks: HooksConfig, run: Run, call: ToolCall, workspace: Path, outcome: Outcome
) -> Outcome:
    state, result, error = outcome
    failed = state is not ToolCallState.COMPLETED
    after = await run_after_tool(
        hooks,
        tool_name=call.name,
        arguments=call.arguments,
        result=(error if failed else result) or "",
        is_error=failed,
        workspace=workspace,
        run_id=run.id,
        job_id=run.job_id,
    )
    text = after.result if after.result is not None else ((error if failed else result) or "")
    if after.failure:
        text = f"{text}\n\n[{after.failure}]"
    if after.result is None and not after.failure:
        return outcome
    return (state, None, text) if failed else (state, text, None)


def _payload(run: Run, workspace: str, **extra: Any) -> dict[str, Any]:
    return {"run_id": run.id, "job_id": run.job_id, "workspace": workspace, **extra}


def notify_input_required(hooks: HooksConfig, run: Run, call: ToolCall, workspace: str) -> None:
    entries: list[HookEntry] = hooks.on_input_required
    if entries:
        fire_and_forget(
            entries,
            "on_input_required",
            _payload(run, workspace, tool_name=call.name, arguments=call.arguments),
            Path(workspace),
        )


def notify_run_finished(
    hooks: HooksConfig, run: Run, workspace: str, state: RunState, outcome: str = ""
) -> None:
    entries: list[HookEntry] = hooks.on_run_finished
    if entries:
        fire_and_forget(
            entries,
            "on_run_finished",
            _payload(run, workspace, state=state.value, outcome=outcome[:2000]),
            Path(workspace),
        )
