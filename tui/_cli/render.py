"""Plain-text formatting for the command line: tables, requests, transcripts. Pure functions,
and the terminal-safe writer every plain-text stream of the CLI goes through."""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from runtime.form_fields import Choice, FieldKind, form_fields
from runtime.interrupted import needs_resume, owner_gone
from runtime.models import (
    Checkpoint,
    InputKind,
    InputRequest,
    Job,
    Message,
    Run,
    RunState,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResultBlock,
    ToolUseBlock,
)
from runtime.steps import step_shown
from runtime.textsafe import terminal_safe
from tui._cli import listing
from tui._cli.listing import format_cost as format_cost
from tui._cli.listing import one_line as one_line
from tui._cli.listing import table as table
from tui.formatting import format_tokens

if TYPE_CHECKING:
    from runtime.transcript import PartialAnswer

MAX_VALUE_LINES = 40


class TerminalSafeWriter:
    """A text stream that makes control characters visible before they reach the terminal
    (``runtime.textsafe``): what the CLI prints as plain text — answers streamed by ``run``,
    ``show``, ``runs``, diagnostics — comes from models, files and tools, and must not retitle
    the window, clear the screen or write the clipboard. JSON output is not wrapped: it is
    exact, and ``json.dumps`` escapes control characters itself."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(terminal_safe(text))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def compact_json(value: Any, width: int = 80) -> str:
    return one_line(json.dumps(value, ensure_ascii=False, sort_keys=True), width)


def _clip_lines(text: str, limit: int = MAX_VALUE_LINES) -> list[str]:
    lines = text.splitlines() or [""]
    if len(lines) > limit:
        hidden = len(lines) - limit
        lines = [*lines[:limit], f"… ({hidden} more lines)"]
    return lines


def run_state_label(run: Run, *, owner_gone: bool = False) -> str:
    """The state line of ``show``: a run whose process is gone says what happens next."""
    return listing.state_label(
        run.state.value, run.interrupted, owner_gone=owner_gone, explained=True
    )


def runs_table(
    runs: Sequence[Run], titles: dict[str, str], *, now: float, gone: Collection[str] = ()
) -> list[str]:
    """``gone``: the owners that are provably gone (``runtime.interrupted.owner_gone``)."""
    return listing.runs_table(
        (
            listing.RunLine(
                run_id=run.id,
                state=run.state.value,
                interrupted=run.interrupted,
                agent=run.agent,
                model=run.model,
                created_at=run.created_at,
                total_tokens=run.usage.total_tokens,
                cost_usd=run.cost_usd,
                parent_run_id=run.parent_run_id,
                job_title=titles.get(run.job_id, ""),
                owner_gone=owner_gone(run, gone),
            )
            for run in runs
        ),
        now=now,
    )


def schema_fields(schema: dict[str, Any]) -> list[tuple[str, dict[str, Any], bool]]:
    """(name, property schema, required) of an object schema's top-level fields."""
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return []
    required = set(schema.get("required") or [])
    return [
        (str(name), prop if isinstance(prop, dict) else {}, name in required)
        for name, prop in properties.items()
    ]


def choice_text(choice: Choice) -> str:
    """A choice as the command line shows it: its value, and its title when that differs
    (``hero-1 (Superman)``): the value is what a JSON answer holds."""
    value = str(choice.value)
    return value if choice.title == value else f"{value} ({choice.title})"


def field_type(prop: dict[str, Any]) -> str:
    """What one form field takes, in words: its type, or the choices it offers (titled
    ``oneOf``/``anyOf``/``enumNames`` choices with their titles, as the TUI's form shows them:
    a trial's ``hero`` read "string", and "Superman" was refused as not valid)."""
    [field] = form_fields({"properties": {"field": prop}})
    choices = ", ".join(choice_text(choice) for choice in field.choices)
    if field.kind is FieldKind.ONE_OF:
        return f"one of {choices}"
    if field.kind is FieldKind.MANY_OF:
        low, high = field.min_items, field.max_items
        bounds = "" if low is None and high is None else f"; {low or 0} to {high or 'all'} of them"
        return f"a list of {choices}{bounds}"
    kind = prop.get("type", "string")
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    return str(kind)


def describe_request(request: InputRequest) -> list[str]:
    """What a person needs to see to answer ``request``."""
    lines: list[str] = []
    detail = request.detail or {}
    match request.kind:
        case InputKind.APPROVAL:
            tool = detail.get("tool") or detail.get("tool_name") or detail.get("name") or "a tool"
            server = detail.get("server")
            where = f" (MCP server {server})" if server else ""
            lines.append(f"Approval needed: the agent wants to run {tool}{where}.")
            if server and detail.get("description"):
                lines.append(f"What it does, as the server says: {detail['description']}")
            if request.prompt:
                lines.append(request.prompt)
            arguments = detail.get("arguments")
            diff = detail.get("diff")
            if arguments is not None and isinstance(diff, str) and diff:
                # The diff shows the content; the arguments only need to say where.
                brief = {
                    key: value
                    for key, value in arguments.items()
                    if not (isinstance(value, str) and len(value) > 60)
                }
                lines.append("Arguments: " + compact_json(brief, 100) + " (content in the diff)")
            elif arguments is not None:
                lines.append("Arguments:")
                text = json.dumps(arguments, ensure_ascii=False, indent=2, sort_keys=True)
                lines.extend("  " + line for line in _clip_lines(text))
            if detail.get("changed_since_asked"):
                lines.append(
                    "The file changed since the agent asked: the changes below are what"
                    " allowing does to it now."
                )
            if isinstance(diff, str) and diff:
                lines.append("Changes:")
                lines.extend("  " + line for line in _clip_lines(diff, 80))
        case InputKind.QUESTION:
            lines.append(f"Question: {request.prompt}")
            for number, option in enumerate(request.options, start=1):
                lines.append(f"  {number}. {option}")
        case InputKind.ELICITATION:
            server = detail.get("server")
            source = f"MCP server {server}" if server else "A tool"
            lines.append(f"{source} asks for input: {request.prompt}")
            for name, prop, required in schema_fields(request.answer_schema):
                flag = "required" if required else "optional"
                # The title is the field's label, the description its help.
                label = ": ".join(
                    str(part) for part in (prop.get("title"), prop.get("description")) if part
                )
                suffix = f" — {label}" if label else ""
                lines.append(f"  {name} ({field_type(prop)}, {flag}){suffix}")
    return lines


def answer_hint(request: InputRequest) -> str:
    match request.kind:
        case InputKind.APPROVAL:
            return "allow, allow-run, allow-always or deny[:reason]"
        case InputKind.QUESTION:
            if request.options:
                return f"an option number (1-{len(request.options)}) or the answer text"
            return "the answer text"
        case InputKind.ELICITATION:
            return "a JSON object with the fields above, decline or cancel"
    return "an answer"  # pragma: no cover


COMMAND = "agent-tui"
"""How hints name the command: with ``--db PATH`` when a non-default database is in use (set
once by the CLI's entry point)."""


def how_to_answer(run_id: str, request: InputRequest) -> list[str]:
    example = {
        InputKind.APPROVAL: "allow",
        InputKind.QUESTION: "1" if request.options else "'your answer'",
        InputKind.ELICITATION: "'{...}'",
    }[request.kind]
    return [
        f"Run {run_id} is waiting for input. Answer with:",
        f"  {COMMAND} respond {run_id} ANSWER      (ANSWER: {answer_hint(request)})",
        f"  e.g. {COMMAND} respond {run_id} {example}",
    ]


def _block_lines(block: Any, calls: dict[str, ToolCall]) -> list[str]:
    if isinstance(block, TextBlock):
        return block.text.splitlines() or [""]
    if isinstance(block, ThinkingBlock):
        if block.redacted:
            return ["[thinking redacted]"]
        return ["[thinking] " + one_line(block.thinking, 100)]
    if isinstance(block, ToolUseBlock):
        call = calls.get(block.tool_call_id)
        state = f" [{call.state.value}]" if call else ""
        return [f"→ {block.name}{state} {compact_json(block.input, 100)}"]
    if isinstance(block, ToolResultBlock):
        marker = "✗" if block.is_error else "←"
        lines = _clip_lines(block.content, 12)
        return [f"{marker} result: {lines[0]}", *("    " + line for line in lines[1:])]
    return []  # pragma: no cover


def show_text(
    run: Run,
    job: Job | None,
    messages: Sequence[Message],
    tool_calls: Sequence[ToolCall],
    request: InputRequest | None,
    checkpoints: Sequence[Checkpoint],
    context_window: int | None = None,
    *,
    inherited: Sequence[Message] = (),
    inherited_label: str | None = None,
    partial: PartialAnswer | None = None,
    kept: Sequence[PartialAnswer] = (),
    owner_gone: bool = False,
    unwritable: str | None = None,
) -> list[str]:
    """``inherited``: messages a fork inherited from another job, shown first under
    ``inherited_label``; ``partial``: what a stopped run streamed and never committed;
    ``kept``: the partial answers of attempts that stopped before the run went on, each shown
    where it was cut short;
    ``owner_gone``: the process that ran it is gone (``runtime.interrupted.owner_gone``);
    ``unwritable``: the database's folder when this process cannot write it (an open request
    cannot be answered here, so no ``respond`` is suggested)."""
    calls = {call.id: call for call in tool_calls}
    in_progress = step_in_progress(run, tool_calls, owner_gone=owner_gone)
    return [
        *_run_summary_lines(run, job, context_window, owner_gone=owner_gone, step=in_progress),
        *_inherited_lines(inherited, inherited_label),
        *_message_lines(messages, calls, partial, kept),
        *_tool_call_lines(tool_calls),
        *_checkpoint_lines(checkpoints),
        *_open_request_lines(run.id, request, unwritable),
    ]


def step_in_progress(run: Run, tool_calls: Sequence[ToolCall], *, owner_gone: bool) -> int | None:
    """The step ``run`` works on, numbered as every agent-tui's status line numbers it
    (``runtime.steps``; the step of its ``tool_calls`` while any is open); None when nothing
    works on it (not running, waiting for a retry, or its process is gone)."""
    if run.state is not RunState.RUNNING or needs_resume(run) or owner_gone:
        return None
    calls_open = any(not call.state.is_terminal for call in tool_calls)
    return step_shown(run, working=True, calls_open=calls_open)


def _run_summary_lines(
    run: Run,
    job: Job | None,
    context_window: int | None,
    *,
    owner_gone: bool = False,
    step: int | None = None,
) -> list[str]:
    """``step``: the step in progress (``step_in_progress``)."""
    usage = run.usage
    steps = f"{run.step} of at most {run.max_steps}"
    counted = ""
    if step is not None:
        # The tokens are those counted (a model call counts when it ends; an agent-tui showing
        # the run as it streams adds an estimate, marked "~").
        steps += f" (step {step} in progress)"
        counted = " (counted as each model call ends)"
    if context_window:
        fill = f"{run.context_tokens} tokens, {run.context_tokens / context_window:.0%} of "
        fill += f"the model's {format_tokens(context_window)} window"
    else:
        fill = f"{run.context_tokens} tokens"
    lines = [
        f"Run {run.id}",
        f"  job:     {run.job_id}" + (f" — {one_line(job.title, 60)}" if job else ""),
        f"  state:   {run_state_label(run, owner_gone=owner_gone)}",
        f"  agent:   {run.agent}",
        f"  model:   {run.model}",
        f"  steps:   {steps}",
        f"  tokens:  {usage.input_tokens} in, {usage.output_tokens} out, "
        f"{usage.cache_read_tokens} cache read, {usage.cache_write_tokens} cache write{counted}",
        f"  cost:    {format_cost(run.cost_usd)}",
        f"  context: {fill}",
    ]
    if run.parent_run_id:
        lines.append(f"  parent:  {run.parent_run_id} (tool call {run.parent_tool_call_id})")
    if run.history_run_id:
        if run.history_position is None:
            upto = ""
        elif run.history_position < 0:  # it had no message yet: nothing of it comes first
            upto = ", none of its messages,"
        else:
            upto = f" up to message [{run.history_position}]"
        lines.append(f"  history: run {run.history_run_id}{upto} comes first")
    if run.retry_of_run_id:
        lines.append(f"  retries: {run.retry_of_run_id}")
    if run.forked_from_checkpoint_id:
        lines.append(f"  forked from checkpoint {run.forked_from_checkpoint_id}")
    if run.outcome:
        lines.append(f"  outcome: {one_line(run.outcome, 100)}")
    if run.failure:
        lines.append(f"  failure: {run.failure.code}: {run.failure.message}")
    if run.cancel_reason:
        lines.append(f"  cancelled: {run.cancel_reason}")
    return lines


def _inherited_lines(inherited: Sequence[Message], inherited_label: str | None) -> list[str]:
    if not inherited:
        return []
    lines = ["", f"Inherited history ({inherited_label or 'from another job'}):"]
    for message in inherited:
        lines.append(f"[{message.position}] {message.role.value} (inherited):")
        for block in message.content:
            lines.extend(("    " + line).rstrip() for line in _block_lines(block, {}))
    return lines


def _message_lines(
    messages: Sequence[Message],
    calls: dict[str, ToolCall],
    partial: PartialAnswer | None,
    kept: Sequence[PartialAnswer] = (),
) -> list[str]:
    from runtime.transcript import PartialAnswer, with_kept_partials

    lines = ["", "Messages:"]
    for message in with_kept_partials(messages, kept):
        if isinstance(message, PartialAnswer):
            lines += _partial_lines(message)
            continue
        label = message.role.value
        if message.model:
            label += f" ({message.model})"
        lines.append(f"[{message.position}] {label}:")
        for block in message.content:
            lines.extend(("    " + line).rstrip() for line in _block_lines(block, calls))
    if partial is not None:
        lines += _partial_lines(partial)
    return lines


def _partial_lines(partial: PartialAnswer) -> list[str]:
    mark = "[streaming]" if partial.live else "[partial]"
    lines = [f"{mark} assistant ({partial.label()}):"]
    if partial.thinking:
        lines.append("    [thinking] " + one_line(partial.thinking, 100))
    lines.extend(("    " + line).rstrip() for line in partial.text.splitlines())
    return lines


def _tool_call_lines(tool_calls: Sequence[ToolCall]) -> list[str]:
    if not tool_calls:
        return []
    lines = ["", "Tool calls:"]
    for call in tool_calls:
        lines.append(
            f"  {call.id}  {call.name}  {call.state.value}  {compact_json(call.arguments, 70)}"
        )
        if call.error:
            lines.append(f"      error: {one_line(call.error, 100)}")
        elif call.result is not None:
            lines.append(f"      result: {one_line(call.result, 100)}")
    return lines


def _checkpoint_lines(checkpoints: Sequence[Checkpoint]) -> list[str]:
    if not checkpoints:
        return []
    lines = ["", "Checkpoints:"]
    for checkpoint in checkpoints:
        lines.append(
            f"  {checkpoint.id}  step {checkpoint.step}  "
            f"(messages up to {checkpoint.last_position})"
        )
    return lines


def _open_request_lines(
    run_id: str, request: InputRequest | None, unwritable: str | None = None
) -> list[str]:
    if request is None:
        return []
    lines = ["", f"Open request {request.id} ({request.kind.value}):"]
    lines.extend("  " + line for line in describe_request(request))
    if request.kind is InputKind.ELICITATION and request.answer_schema:
        lines.append("  schema: " + compact_json(request.answer_schema, 200))
    if unwritable is not None:
        lines.append(
            f"  Answering needs a writable copy: {unwritable} is not writable here (copy the "
            "database with its -wal file to a writable folder and answer it there)."
        )
        return lines
    lines.extend("  " + line for line in how_to_answer(run_id, request))
    return lines
