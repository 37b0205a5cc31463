"""The offline demo model (DESIGN §9): deterministic, no key, no network.

It plays a real agent's part on a real workspace so that a new user sees agent-tui work on the
first launch: it streams a Markdown plan, lists the workspace, reads a few files and searches them
(the search reports progress), asks the person a question with options, asks to write a notes
file (which needs approval), and ends with a summary built from what it read. With delegate tools
(``delegate_to_*``) it hands parts of the task to sub-agents in parallel instead. A prompt that
names tools (an MCP tool's ``server__tool``, any tool in backticks) has it call those, so an MCP
server's tools, forms and approvals can be tried without a key.

The model decides from the conversation alone — the turns since the latest user prompt — so it is
resumable from any committed state, exactly like a real model.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime.compaction import (
    CHARS_PER_TOKEN,
    SUMMARISER_SYSTEM,
    SUMMARY_HEADER,
    tool_specs_chars,
)
from runtime.models import (
    Message,
    Role,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from runtime.providers.base import (
    ModelEvent,
    ModelRequest,
    StopReason,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolSpec,
    UsageReport,
)

NOTES_FILE = "agent-notes.md"
DELEGATE_PREFIX = "delegate_to_"
FOCUS_OPTIONS = ["A short overview", "The files, one by one", "Open questions and TODOs"]
_WORD = re.compile(r"\S+\s*")
_STREAM_COMMAND = re.compile(r"^/stream\s+(\d{1,6})\s*$")
"""``/stream N``: answer with N KiB of Markdown and nothing else (benchmarks, UI tests)."""


def _filler(size: int) -> str:
    paragraph = (
        "The durable runtime commits every message as it happens, so **nothing committed is "
        "lost**. Deltas stream to every observer; the committed message replaces them. "
    )
    lines: list[str] = []
    total = 0
    number = 0
    while total < size:
        number += 1
        line = f"{number}. {paragraph}\n" if number % 8 else f"\n## Section {number // 8}\n\n"
        lines.append(line)
        total += len(line)
    return "".join(lines)[:size]


class DemoProvider:
    """``demo`` streams at reading speed; ``demo:instant`` streams with no delay."""

    def __init__(self, instant: bool = False, *, chunk_delay: float = 0.012) -> None:
        self._instant = instant
        self._delay = 0.0 if instant else chunk_delay

    @property
    def reference(self) -> str:
        return "demo:instant" if self._instant else "demo"

    @property
    def context_window(self) -> int:
        return 200_000

    def cost_usd(self, usage: Usage) -> float:
        return 0.0

    async def aclose(self) -> None:
        return None

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        turn = _plan_turn(request)
        # The tool definitions are part of the prompt too, counted as `/context` counts them.
        prompt_chars = (
            sum(len(_message_text(m)) for m in request.messages)
            + len(request.system)
            + tool_specs_chars(request.tools)
        )
        if turn.thinking:
            async for event in self._stream_text(turn.thinking, thinking=True):
                yield event
        async for event in self._stream_text(turn.text, thinking=False):
            yield event
        for index, (name, arguments) in enumerate(turn.tool_calls):
            call_id = f"demo_{len(request.messages)}_{index}"
            yield ToolCallStart(index=index, id=call_id, name=name)
            encoded = json.dumps(arguments)
            # Arguments arrive in pieces, as they do from real providers.
            for start in range(0, len(encoded), 24):
                yield ToolCallDelta(index=index, json_fragment=encoded[start : start + 24])
            yield ToolCallEnd(index=index)
        output_chars = (
            len(turn.text)
            + len(turn.thinking)
            + sum(len(json.dumps(a)) for _, a in turn.tool_calls)
        )
        yield UsageReport(
            usage=Usage(
                input_tokens=max(1, prompt_chars // CHARS_PER_TOKEN),
                output_tokens=output_chars // CHARS_PER_TOKEN,
            )
        )
        yield StopReason(reason="tool_use" if turn.tool_calls else "end_turn")

    async def _stream_text(self, text: str, *, thinking: bool) -> AsyncIterator[ModelEvent]:
        for count, match in enumerate(_WORD.finditer(text)):
            piece = match.group(0)
            yield ThinkingDelta(text=piece) if thinking else TextDelta(text=piece)
            if self._delay:
                await asyncio.sleep(self._delay)
            elif count % 64 == 63:
                await asyncio.sleep(0)


class _Turn:
    def __init__(
        self,
        text: str,
        tool_calls: Iterable[tuple[str, dict[str, Any]]] = (),
        thinking: str = "",
    ) -> None:
        self.text = text
        self.tool_calls = list(tool_calls)
        self.thinking = thinking


def _message_text(message: Message) -> str:
    parts: list[str] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            parts.append(block.text)
        elif isinstance(block, ToolResultBlock):
            parts.append(block.content)
    return "".join(parts)


def _current_turns(messages: list[Message]) -> tuple[str, list[Message]]:
    """The latest user prompt and the messages after it (this run's work so far)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role is Role.USER and message.text.strip():
            return message.text.strip(), messages[index + 1 :]
    return "", messages


_ResultsByTool = dict[str, list[tuple[ToolUseBlock, ToolResultBlock]]]
"""Each tool's (call, result) pairs since the latest user prompt, by tool name."""


def _results_by_tool(after: list[Message]) -> _ResultsByTool:
    uses: dict[str, ToolUseBlock] = {}
    for message in after:
        for use in message.tool_uses:
            uses[use.id] = use
    found: _ResultsByTool = {}
    for message in after:
        for result in message.tool_results:
            matched = uses.get(result.tool_use_id)
            if matched is not None:
                found.setdefault(matched.name, []).append((matched, result))
    return found


def _spec(tools: list[ToolSpec], name: str) -> ToolSpec | None:
    return next((t for t in tools if t.name == name), None)


def _first_required_string(spec: ToolSpec) -> str:
    schema = spec.input_schema
    properties: dict[str, Any] = schema.get("properties", {})
    for key in schema.get("required", []):
        if properties.get(key, {}).get("type") == "string":
            return str(key)
    return "query"


def _args(spec: ToolSpec, **values: Any) -> dict[str, Any]:
    """Only the arguments the tool's schema knows, so the demo fits whatever tools it has."""
    properties: dict[str, Any] = spec.input_schema.get("properties", {})
    return {k: v for k, v in values.items() if k in properties}


def _listed_files(listing: str, workspace: Path) -> list[str]:
    """File paths mentioned in a list_dir result that exist in the workspace."""
    files: list[str] = []
    for line in listing.splitlines():
        for token in reversed(line.replace("\t", " ").split(" ")):
            token = token.strip().rstrip("/")
            if not token or token in files:
                continue
            candidate = workspace / token
            try:
                if candidate.is_file():
                    files.append(token)
                    break
            except OSError:
                continue
    return files


_ATTACHED = re.compile(r"^📎 Attached: (.+) — read with read_file$", re.MULTILINE)
"""The line the TUI adds under a message that mentions files with ``@`` (``with_attachments``
in ``tui/file_index.py``): each file's path in backticks, then its size."""


def _attached(prompt: str) -> list[str]:
    """The paths of the files the prompt attached (``@src/app.py``)."""
    return [path for line in _ATTACHED.findall(prompt) for path in re.findall(r"`([^`]+)`", line)]


def _pick_files(files: list[str]) -> list[str]:
    def rank(name: str) -> tuple[int, int, str]:
        lower = name.lower()
        if lower.startswith("readme"):
            return (0, name.count("/"), name)
        if lower.endswith((".md", ".txt", ".toml", ".py", ".json", ".cfg", ".rst")):
            return (1, name.count("/"), name)
        return (2, name.count("/"), name)

    readable = [f for f in files if Path(f).name != NOTES_FILE]
    return sorted(readable, key=rank)[:2]


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _matching_lines(result: ToolResultBlock) -> list[str]:
    """The hits of a `search` result: its lines but the last, a summary ("no matches for 'TODO'
    in 3 files") that names the pattern and is not a hit."""
    return [line for line in result.content.splitlines()[:-1] if line]


def _search_stopped(result: ToolResultBlock) -> bool:
    """Whether a `search` stopped before the end (its limit of matches or files, its output
    cut): its count of matching lines is then a lower bound. Read from its summary, the last
    line (``runtime.tools.builtin``'s words), and the cut mark's line before it: a matching
    line may say anything."""
    lines = result.content.splitlines()
    summary = lines[-1] if lines else ""
    cut = len(lines) > 1 and lines[-2].startswith("… [output cut;")
    return cut or "; stopped at max_results=" in summary or "files were searched" in summary


def _first_line(text: str) -> str:
    for line in text.splitlines():
        # Numbered listings ("   1→text" or "1: text") keep only the text.
        stripped = re.sub(r"^\d+\s*[:→|\t]\s*", "", line.strip())
        stripped = stripped.lstrip("#").strip()
        if stripped:
            return stripped[:100]
    return "(empty)"


_ROUTE_HINT = re.compile(
    r"^# Current phase: (\S+)$.*?phases you may move to: ([^)]*)\)", re.M | re.S
)


def _summary_turn(request: ModelRequest) -> _Turn:
    """A summary of the ``<conversation>`` it was given: the person's requests, the tools
    called, and the last answer (what a real summary keeps, deterministically)."""
    text = request.messages[-1].text if request.messages else ""
    inside = text.partition("<conversation>")[2].partition("</conversation>")[0]
    asked: list[str] = []
    called: list[str] = []
    answered = ""
    for line in inside.splitlines():
        if line.startswith("user: ") and not line.startswith("user: [result"):
            asked.append(_first_line(line[6:]))
        elif line.startswith("assistant: "):
            answered = _first_line(line[11:]) or answered
        called += re.findall(r"\[called (\w+)", line)
    previous = text.partition("An earlier summary, to fold in:\n")[2].partition("\n\n")[0]
    lines = ["- Earlier: " + _first_line(previous)] if previous.strip() else []
    lines += [f"- The person asked: {a}" for a in asked if a] or ["- The person asked nothing yet"]
    if called:
        lines.append("- Tools called: " + ", ".join(dict.fromkeys(called)))
    if answered:
        lines.append(f"- Last answer: {answered}")
    return _Turn("\n".join(lines))


def _after_compaction_turn(summary: str, after: list[Message]) -> _Turn:
    """The person's prompt was summarised away: answer from the summary and what came since
    (the demo cannot redo work it no longer sees, and must not start over)."""
    recent = [u.name for m in after for u in m.tool_uses]
    lines = [
        "Continuing from the summary of the earlier conversation:",
        "",
        summary.removeprefix(SUMMARY_HEADER).strip(),
    ]
    if recent:
        lines += ["", "Since then I called: " + ", ".join(dict.fromkeys(recent)) + "."]
    return _Turn("\n".join(lines))


def _plan_turn(request: ModelRequest) -> _Turn:
    if request.system == SUMMARISER_SYSTEM:
        return _summary_turn(request)
    prompt, after = _current_turns(request.messages)
    if prompt.startswith(SUMMARY_HEADER):
        return _after_compaction_turn(prompt, after)
    tools = request.tools
    done = _results_by_tool(after)
    route_turn = _route_turn(request.system, tools, done)
    if route_turn is not None:
        return route_turn
    delegates = [t for t in tools if t.name.startswith(DELEGATE_PREFIX)]
    earlier_runs = len(request.messages) - len(after) > 1

    bench = _STREAM_COMMAND.match(prompt)
    if bench:
        return _Turn(_filler(int(bench.group(1)) * 1024))
    named = _named_tools(prompt, tools)
    if named:
        return _named_tools_turn(named, done)
    if delegates:
        return _coordinator_turn(prompt, delegates, done)
    if request.system.startswith("You are a sub-agent"):
        return _child_turn(prompt, tools, done)
    if earlier_runs:
        return _follow_up_turn(prompt, tools, done)
    return _tour_turn(prompt, tools, done, Path(request.workspace))


_BACKTICKED = re.compile(r"`([A-Za-z0-9_.-]+)`")
_MCP_NAME = re.compile(r"(?<![\w.-])([A-Za-z0-9_.-]+__[A-Za-z0-9_.-]*[A-Za-z0-9_])")
_JOINING_WORDS = re.compile(r"[\s,]+(?:and|then|and then)$")
_SHOWN_RESULT = 2_000
"""Characters of a named tool's result the demo quotes back."""


def _named_tools(prompt: str, tools: list[ToolSpec]) -> list[tuple[ToolSpec, str]]:
    """The offered tools the prompt names, each with the words after its name up to the next
    name or the end of the line (its argument, or a JSON object of arguments): an MCP tool by
    its ``server__tool`` name as it is, any tool by its name in backticks (`` `shell` ls ``)."""
    offered = {t.name: t for t in tools}
    mentions: list[tuple[int, int, str]] = []
    for pattern in (_BACKTICKED, _MCP_NAME):
        for match in pattern.finditer(prompt):
            if match.group(1) in offered:
                mentions.append((match.start(), match.end(), match.group(1)))
    kept: list[tuple[int, int, str]] = []
    for mention in sorted(mentions):  # `basic__echo` is one mention, not two
        if not kept or mention[0] >= kept[-1][1]:
            kept.append(mention)
    named: dict[str, tuple[ToolSpec, str]] = {}
    for index, (_, end, name) in enumerate(kept):
        stop = kept[index + 1][0] if index + 1 < len(kept) else len(prompt)
        given = prompt[end:stop].split("\n", 1)[0].strip(" `:,.")
        given = _JOINING_WORDS.sub("", given)  # "echo hi and basic__add": "hi"
        named.setdefault(name, (offered[name], given))
    return list(named.values())


def _example_value(schema: dict[str, Any]) -> Any:
    if "default" in schema:
        return schema["default"]
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    examples: dict[str, Any] = {"integer": 1, "number": 1, "boolean": True, "array": []}
    return examples.get(str(kind), {} if kind == "object" else "example")


def _arguments_for(spec: ToolSpec, given: str) -> dict[str, Any]:
    """A named tool's arguments: the JSON object typed after its name, else its required
    parameters, the first string one taking the words typed after the name and the others
    an example of their type."""
    if given.startswith("{"):
        try:
            typed, _ = json.JSONDecoder().raw_decode(given)  # words may follow it
        except ValueError:
            typed = None
        if isinstance(typed, dict):
            return typed
    words = re.sub(r"^(with|using)\s+", "", given)
    properties: dict[str, Any] = spec.input_schema.get("properties", {})
    arguments: dict[str, Any] = {}
    for key in spec.input_schema.get("required", []):
        schema = properties.get(key, {})
        if words and schema.get("type") == "string" and "enum" not in schema:
            arguments[key], words = words, ""
        else:
            arguments[key] = _example_value(schema)
    return arguments


def _named_tools_turn(named: list[tuple[ToolSpec, str]], done: _ResultsByTool) -> _Turn:
    """Call the tools the person named (each once), then say what each returned."""
    waiting = [(spec, given) for spec, given in named if spec.name not in done]
    if waiting:
        calls = [(spec.name, _arguments_for(spec, given)) for spec, given in waiting]
        names = ", ".join(f"`{name}`" for name, _ in calls)
        return _Turn(
            f"You named {names}: calling {'it' if len(calls) == 1 else 'them'} with the "
            "arguments below.\n\n_This is the offline demo model: it calls the tools you "
            "name, with the words after each name as its argument (or a JSON object of "
            "arguments)._",
            calls,
        )
    lines: list[str] = []
    for spec, _ in named:
        _, result = done[spec.name][-1]
        text = result.content.strip() or "(nothing)"
        if len(text) > _SHOWN_RESULT:
            text = text[:_SHOWN_RESULT] + f"\n… ({len(result.content):,} characters in all)"
        verb = "failed" if result.is_error else "returned"
        lines += [f"`{spec.name}` {verb}:", "", "```text", text.replace("```", "ʼʼʼ"), "```", ""]
    return _Turn("\n".join(lines).rstrip())


def _route_turn(system: str, tools: list[ToolSpec], done: _ResultsByTool) -> _Turn | None:
    """The move to the next phase, when the system prompt names the current phase and the
    ``route`` tool has not been called yet; ``None`` otherwise."""
    route = _spec(tools, "route")
    hint = _ROUTE_HINT.search(system) if route else None
    if route and hint and "route" not in done:
        phase, targets = hint.group(1), [t.strip() for t in hint.group(2).split(",")]
        if len(targets) > 1:
            return _Turn(
                f"I am in the **{phase}** phase; its work splits up, so "
                f"{', '.join(f'**{t}**' for t in targets)} run in parallel.",
                [("route", {"phase": targets, "reason": f"{phase} is split up"})],
            )
        return _Turn(
            f"I am in the **{phase}** phase; its work is planned, so I move on to "
            f"**{targets[0]}**.",
            [("route", {"phase": targets[0], "reason": f"{phase} is done"})],
        )
    return None


def _tour_turn(prompt: str, tools: list[ToolSpec], done: _ResultsByTool, workspace: Path) -> _Turn:
    """The first run's next step: list the workspace, read and search it, ask the person,
    write notes, summarise — each step only with the tool it needs."""
    list_dir = _spec(tools, "list_dir")
    read_file = _spec(tools, "read_file")
    search = _spec(tools, "search")
    ask_user = _spec(tools, "ask_user")
    write_file = _spec(tools, "write_file")

    if list_dir and "list_dir" not in done:
        return _plan_and_list_turn(prompt, list_dir)

    listing = done.get("list_dir", [])
    files = _listed_files(listing[0][1].content, workspace) if listing else []
    if "read_file" not in done and "search" not in done and (read_file or search):
        return _read_and_search_turn(files, read_file, search, _attached(prompt))

    if ask_user and "ask_user" not in done:
        return _ask_focus_turn(ask_user)

    findings = _findings(done, workspace, files)
    if write_file and "write_file" not in done:
        return _write_notes_turn(prompt, findings, write_file)
    return _final_summary_turn(findings, done.get("write_file", []))


def _quoted(prompt: str) -> str:
    """The task as a Markdown quote, every line of it: in ``*…*`` a task of several
    paragraphs (a paste, an attached file) showed its stars as typed."""
    return "\n".join(f"> {line}".rstrip() for line in prompt.strip().splitlines())


def _plan_and_list_turn(prompt: str, list_dir: ToolSpec) -> _Turn:
    return _Turn(
        f"## Plan\n\nYou asked:\n\n{_quoted(prompt)}\n\n"
        "1. **List** the files of this workspace.\n"
        "2. **Read** the most telling ones and **search** them for open work.\n"
        "3. **Ask you** what the notes should focus on.\n"
        f"4. **Write** `{NOTES_FILE}` — only with your approval.\n"
        "5. **Summarise** what I found.\n\n"
        "_This is the offline demo model: set `ANTHROPIC_API_KEY` to use Claude._\n\n"
        "Listing the workspace first.",
        [("list_dir", _args(list_dir, path=".", recursive=True))],
        thinking="The person wants an overview. Start from the file listing.",
    )


def _read_and_search_turn(
    files: list[str], read_file: ToolSpec | None, search: ToolSpec | None, attached: list[str]
) -> _Turn:
    # The files the person attached first: the demo read two others (a new-user trial's
    # "explain @src/app.py" read README.md and notes.txt, never src/app.py).
    chosen = list(dict.fromkeys([*attached, *_pick_files(files)]))[: max(2, len(attached))]
    calls: list[tuple[str, dict[str, Any]]] = []
    if read_file:
        calls += [("read_file", _args(read_file, path=f)) for f in chosen]
    if search:
        key = _first_required_string(search)
        calls.append(("search", _args(search, **{key: "TODO"}, path=".")))
    plan = f"read {', '.join(f'`{f}`' for f in chosen)} and search" if chosen else "search"
    return _Turn(
        f"The workspace has **{_count(len(files), 'file')}**. I will {plan} "
        "every file for `TODO` markers.",
        calls,
    )


def _ask_focus_turn(ask_user: ToolSpec) -> _Turn:
    return _Turn(
        "I have read enough to write notes. One question before I do.",
        [
            (
                "ask_user",
                _args(
                    ask_user,
                    question="What should the notes focus on?",
                    options=FOCUS_OPTIONS,
                    allow_free_text=True,
                ),
            )
        ],
    )


@dataclass(frozen=True)
class _Findings:
    """What the tour learned, for the notes file and the final summary."""

    workspace: Path
    files: list[str]
    focus: str
    lines: list[str]
    """One Markdown list item per file read."""
    todo_hits: str
    """How many ``TODO`` lines the search found: "at least N" when it stopped before the end."""


def _findings(done: _ResultsByTool, workspace: Path, files: list[str]) -> _Findings:
    focus = done["ask_user"][0][1].content.strip() if "ask_user" in done else FOCUS_OPTIONS[0]
    reads = [(u.input.get("path", "?"), r) for u, r in done.get("read_file", [])]
    searches = [r for _, r in done.get("search", [])]
    todo_hits = "0"
    if searches and not searches[0].is_error:
        found = sum(1 for line in _matching_lines(searches[0]) if "TODO" in line)
        todo_hits = f"at least {found}" if _search_stopped(searches[0]) else str(found)

    lines = [
        f"- `{path}`: {'could not be read' if r.is_error else _first_line(r.content)}"
        for path, r in reads
    ]
    return _Findings(workspace, files, focus, lines, todo_hits)


def _write_notes_turn(prompt: str, findings: _Findings, write_file: ToolSpec) -> _Turn:
    notes = "\n".join(
        [
            f"# Notes on {findings.workspace.name}",
            "",
            f"Task: {prompt}",
            f"Focus: {findings.focus}",
            "",
            f"The workspace has {_count(len(findings.files), 'file')}.",
            *findings.lines,
            f"- `TODO` markers found: {findings.todo_hits}",
            "",
            "_Written by the agent-tui demo model._",
            "",
        ]
    )
    # An answer typed in its own words is not one of the options: "You chose …" misread it.
    answer = "You chose" if findings.focus in FOCUS_OPTIONS else "You answered:"
    return _Turn(
        f"{answer} **{findings.focus}**. I would like to save these notes to `{NOTES_FILE}`.",
        [("write_file", _args(write_file, path=NOTES_FILE, content=notes))],
    )


def _final_summary_turn(
    findings: _Findings, written: list[tuple[ToolUseBlock, ToolResultBlock]]
) -> _Turn:
    if written and not written[0][1].is_error:
        notes_line = f"I saved the notes to `{NOTES_FILE}`."
    elif written:
        notes_line = f"I did not write `{NOTES_FILE}`: {written[0][1].content.strip()}"
    else:
        notes_line = "I had no tool to write notes with."
    summary = "\n".join(
        [
            "## Summary",
            "",
            f"**{findings.workspace.name}** holds {_count(len(findings.files), 'file')}. "
            "What I read:",
            "",
            *(findings.lines or ["- nothing could be read"]),
            "",
            f"`TODO` markers found: **{findings.todo_hits}**. Focus you asked for: "
            f"*{findings.focus}*.",
            "",
            notes_line,
        ]
    )
    return _Turn(summary)


def _follow_up_turn(prompt: str, tools: list[ToolSpec], done: dict[str, Any]) -> _Turn:
    attached, read_file = _attached(prompt), _spec(tools, "read_file")
    prompt = _ATTACHED.sub("", prompt).strip()  # its words: "read_file" was the keyword
    if attached and read_file:
        return _read_attached_turn(prompt, attached, read_file, done)
    search = _spec(tools, "search")
    words = [w for w in re.findall(r"[A-Za-z_]{4,}", prompt)]
    keyword = words[-1] if words else "TODO"
    if search and "search" not in done:
        key = _first_required_string(search)
        return _Turn(
            f"Following up on *{prompt}*. Let me search the workspace for `{keyword}`.",
            [("search", _args(search, **{key: keyword}, path="."))],
        )
    hits = 0
    for _, result in done.get("search", []):
        hits = 0 if result.is_error else len(_matching_lines(result))
    return _Turn(
        f"## Follow-up\n\nYou asked:\n\n{_quoted(prompt)}\n\n"
        f"The search for `{keyword}` gave **{hits}** matching line(s). "
        "Everything from the earlier runs of this job is still in my context."
    )


def _read_attached_turn(
    prompt: str, attached: list[str], read_file: ToolSpec, done: dict[str, Any]
) -> _Turn:
    """A follow-up that attached files: read them, then say what each begins with."""
    if "read_file" not in done:
        return _Turn(
            f"Following up on:\n\n{_quoted(prompt)}\n\nReading what you attached first.",
            [("read_file", _args(read_file, path=path)) for path in attached],
        )
    lines = [
        f"- `{use.input.get('path', '?')}`: "
        f"{'could not be read' if result.is_error else _first_line(result.content)}"
        for use, result in done["read_file"]
    ]
    return _Turn(
        f"## Follow-up\n\nYou asked:\n\n{_quoted(prompt)}\n\nWhat you attached begins:\n\n"
        + "\n".join(lines)
        + "\n\nEverything from the earlier runs of this job is still in my context."
    )


def _coordinator_turn(prompt: str, delegates: list[ToolSpec], done: dict[str, Any]) -> _Turn:
    if not any(name.startswith(DELEGATE_PREFIX) for name in done):
        calls = [
            (spec.name, {"task": f"Part {i + 1} of: {prompt}"})
            for i, spec in enumerate(delegates[:2])
        ]
        names = ", ".join(f"**{s.name.removeprefix(DELEGATE_PREFIX)}**" for s in delegates[:2])
        return _Turn(
            f"## Plan\n\nI will split *{prompt}* between {names}, working in parallel.",
            calls,
        )
    lines = []
    for name, pairs in done.items():
        if not name.startswith(DELEGATE_PREFIX):
            continue
        for _, result in pairs:
            status = "failed" if result.is_error else "reported"
            lines.append(
                f"- **{name.removeprefix(DELEGATE_PREFIX)}** {status}: "
                f"{_first_line(result.content)}"
            )
    return _Turn("## Summary\n\nMy sub-agents are done.\n\n" + "\n".join(lines))


def _child_turn(prompt: str, tools: list[ToolSpec], done: dict[str, Any]) -> _Turn:
    ask_user = _spec(tools, "ask_user")
    list_dir = _spec(tools, "list_dir")
    if ask_user and "ask_user" not in done and prompt.startswith("Part 1"):
        return _Turn(
            "Before I start my part, one question.",
            [
                (
                    "ask_user",
                    _args(
                        ask_user,
                        question="Which part of the workspace matters most?",
                        options=["The code", "The docs"],
                        allow_free_text=True,
                    ),
                )
            ],
        )
    if list_dir and "list_dir" not in done:
        return _Turn(f"Working on: *{prompt}*.", [("list_dir", _args(list_dir, path="."))])
    answer = ""
    if "ask_user" in done:
        answer = f" You said {done['ask_user'][0][1].content.strip()!r} matters most."
    count = 0
    for _, result in done.get("list_dir", []):
        count = len([ln for ln in result.content.splitlines() if ln.strip()])
    return _Turn(f"Done with {prompt.split(':')[0].lower()}: {count} entries listed.{answer}")
