"""Exporting a job as Markdown or JSON. Exports hold the conversation only: no keys, no config.

A fork's export starts with the history it inherited from its source job, labelled as such; a
run that stopped while text streamed ends with that text, marked as a partial answer; one that
went on after a crash or a close keeps the stopped attempt's partial answer where it was cut.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from runtime.events import RunNoted
from runtime.history import all_messages
from runtime.interrupted import gone_owners_of, owner_gone
from runtime.models import (
    Message,
    Role,
    Run,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from runtime.store.base import Store
from runtime.textsafe import terminal_safe, terminal_safe_line
from runtime.transcript import (
    PartialAnswer,
    inherited_history,
    kept_partials,
    partial_answer,
    with_kept_partials,
)

_RESULT_LIMIT = 4000


async def export_job(store: Store, job_id: str, *, format: Literal["md", "json"] = "md") -> str:
    job = await store.get_job(job_id)
    runs = await store.job_runs(job_id)
    origin, inherited = (None, []) if not runs else await inherited_history(store, runs[0])
    # A run whose process is gone (killed, nothing recovered it yet) streams nothing: its
    # draft is the answer cut short, exported as `show` prints it.
    gone = await gone_owners_of(store, runs)
    if format == "json":
        data: dict[str, Any] = {"job": job.model_dump(mode="json"), "runs": []}
        if origin is not None:
            data["inherited"] = {
                "label": origin.label(),
                "source_job_id": origin.source_job.id,
                "source_run_id": origin.source_run.id,
                "checkpoint_id": origin.checkpoint_id,
                "checkpoint_step": origin.checkpoint_step,
                "messages": [item.message.model_dump(mode="json") for item in inherited],
            }
        data["runs"] = [await _run_json(store, run, gone=owner_gone(run, gone)) for run in runs]
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    if format != "md":
        raise ValueError(f"unknown export format {format!r}")
    lines = [
        f"# {terminal_safe_line(job.title)}",
        "",
        f"- Job: `{job.id}`",
        f"- Workspace: `{job.workspace}`",
        f"- Tokens: {job.usage.total_tokens}, cost: ${job.cost_usd:.4f}",
        "",
    ]
    if origin is not None:
        lines += [
            f"## Inherited history — {origin.label()}",
            "",
            f"_The messages below come from run `{origin.source_run.id}` of job "
            f"`{origin.source_job.id}`; this job starts after them._",
            "",
        ]
        for item in inherited:
            lines += _message_lines(item.message, suffix=" (inherited)")
    for run in runs:
        parent = f", delegated by `{run.parent_run_id}`" if run.parent_run_id else ""
        lines += [
            f"## Run `{run.id}` — {run.agent} ({run.state.value}{parent})",
            "",
            f"Model: `{run.model}` · steps: {run.step} · tokens: {run.usage.total_tokens}",
            "",
        ]
        if run.failure:
            lines += [f"> **Failed** ({run.failure.code}): {run.failure.message}", ""]
        notes = await store.list_notes(run_ids=[run.id])
        messages = await all_messages(store, run.id)
        for shown in with_kept_partials(messages, await kept_partials(store, run)):
            at = shown.updated_at if isinstance(shown, PartialAnswer) else shown.created_at
            while notes and notes[0].created_at <= at:
                lines += _note_lines(notes.pop(0))
            if isinstance(shown, PartialAnswer):
                lines += _partial_lines(shown)
            else:
                lines += _message_lines(shown)
        for note in notes:
            lines += _note_lines(note)
        partial = await partial_answer(store, run, owner_gone=owner_gone(run, gone))
        if partial is not None:
            lines += _partial_lines(partial)
    # Markdown is read in terminals (cat, less -R): control characters are made visible.
    return terminal_safe("\n".join(lines).rstrip()) + "\n"


async def _run_json(store: Store, run: Run, *, gone: bool) -> dict[str, Any]:
    """One run in a JSON export: its row, messages, tool calls, notes and partial answers
    (``gone``: its process is, so its draft is a partial answer)."""
    partial = await partial_answer(store, run, owner_gone=gone)
    return {
        "run": run.model_dump(mode="json"),
        "messages": [m.model_dump(mode="json") for m in await all_messages(store, run.id)],
        "tool_calls": [c.model_dump(mode="json") for c in await store.list_tool_calls(run.id)],
        "notes": [
            n.model_dump(mode="json", by_alias=True)
            for n in await store.list_notes(run_ids=[run.id])
        ],
        "partial_answer": None if partial is None else partial.as_json(),
        "kept_partial_answers": [kept.as_json() for kept in await kept_partials(store, run)],
    }


def _note_lines(note: RunNoted) -> list[str]:
    """A run's note (instructions used, a phase move, a compaction) where it happened; a
    compaction shows its summary, and the messages it covered stay above it in full."""
    lines = [f"> _{note.text}_", ""]
    if note.note == "compaction":
        summary = "\n".join(f"> {line}" for line in str(note.data.get("summary", "")).splitlines())
        lines += [
            "<details><summary>Compaction summary</summary>",
            "",
            summary,
            "",
            "</details>",
            "",
        ]
    return lines


def _partial_lines(partial: PartialAnswer) -> list[str]:
    lines = ["### Assistant (partial)", "", f"> _{partial.label()}_", ""]
    if partial.thinking:
        lines += _thinking_lines(partial.thinking)
    return [*lines, partial.text, ""]


def _thinking_lines(thinking: str) -> list[str]:
    quoted = "\n".join(f"> {line}" for line in thinking.splitlines())
    return ["<details><summary>Thinking</summary>", "", quoted, "", "</details>", ""]


_HEADING = re.compile(r"^( {0,3})(#{1,6})(?=\s|$)")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def _nested_headings(text: str) -> str:
    """``text`` with its Markdown headings three levels down (at most six), under the export's
    own (``# job``, ``## Run``, ``### Assistant``): a model's ``## Summary`` sat beside the runs'
    sections and flattened the outline (a new-user trial). Lines in code fences stay."""
    out: list[str] = []
    fence: str | None = None
    for line in text.split("\n"):
        opened = _FENCE.match(line)
        if fence is None and opened:
            fence = opened.group(1)[0] * len(opened.group(1))
        elif fence is not None and line.strip().startswith(fence):
            fence = None
        elif fence is None:
            heading = _HEADING.match(line)
            if heading:
                level = min(6, len(heading.group(2)) + 3)
                line = heading.group(1) + "#" * level + line[heading.end() :]
        out.append(line)
    return "\n".join(out)


def _message_lines(message: Message, *, suffix: str = "") -> list[str]:
    heading = {Role.USER: "User", Role.ASSISTANT: "Assistant", Role.TOOL: "Tool results"}
    lines = [f"### {heading[message.role]}{suffix}", ""]
    for block in message.content:
        if isinstance(block, TextBlock):
            lines += [_nested_headings(block.text), ""]
        elif isinstance(block, ThinkingBlock):
            if not block.redacted:
                lines += _thinking_lines(block.thinking)
        elif isinstance(block, ToolUseBlock):
            arguments = json.dumps(block.input, ensure_ascii=False, indent=2)
            lines += [f"**Tool call** `{block.name}`", "", "```json", arguments, "```", ""]
        elif isinstance(block, ToolResultBlock):
            content = block.content
            if len(content) > _RESULT_LIMIT:
                content = content[:_RESULT_LIMIT] + "\n… (truncated)"
            label = "error" if block.is_error else "result"
            lines += [f"**{label}**", "", "```", content, "```", ""]
    return lines
