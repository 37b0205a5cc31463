"""What a job's context holds (``/context`` in the TUI): its next request's system prompt, tool
definitions, a compaction's summary and its messages by who wrote them, each estimated the way
compaction estimates a request (characters / ``CHARS_PER_TOKEN``; the tool definitions with the
same ``tool_specs_tokens`` compaction counts), beside what the job's latest model call measured
and the model's window; and whether compacting could bring the request under ``compact_at``
at all, asked as the engine asks it (``compaction_room``, ``compaction_can_help``).

Read only: the request is put together from the job's latest root run as the executor would
(its history read once, the compaction applied, its phase found from its route calls), but
nothing is recorded, no model is called and no MCP server is started: the tools of those running
are counted, and the report names the others."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from runtime.compaction import (
    CHARS_PER_TOKEN,
    DEFAULT_SHARE,
    MESSAGE_TOKENS,
    compaction_can_help,
    compaction_room,
    message_chars,
    summary_allowance,
    tool_specs_tokens,
)
from runtime.engine.catalog import Catalog, tool_allowed
from runtime.engine.executor import system_prompt
from runtime.engine.extensions import (
    Extensions,
    ExtensionState,
    applied_compaction,
    compacted_messages,
    scan_routes,
)
from runtime.errors import InvalidInput
from runtime.history import load_history
from runtime.instructions import load_instructions
from runtime.models import Message, Role
from runtime.phases import discover_phases
from runtime.skills import discover_skills
from runtime.store.base import Store
from runtime.tools.base import Tool

_WRITERS = {Role.USER: "you", Role.ASSISTANT: "the agent", Role.TOOL: "tool results"}


@dataclass(frozen=True)
class ContextUsage:
    """Tokens, estimated unless said otherwise."""

    window: int
    """The model's context window (``[defaults] context_window`` or the provider's)."""
    measured: int
    """What the job's latest model call reported as its context (0 before the first)."""
    system: int
    tools: int
    tool_count: int
    summary: int
    """A compaction's summary, sent in place of the messages it covers."""
    summarised: int
    """Messages the summary stands for (not sent)."""
    by_writer: dict[str, int] = field(default_factory=dict)
    """The messages sent: "you", "the agent", "tool results"."""
    messages: int = 0
    mcp_not_counted: list[str] = field(default_factory=list)
    """MCP servers not running: their tools' definitions are not counted."""
    compact_at: float = DEFAULT_SHARE
    """``[defaults] compact_at``: the share of the window past which the engine compacts."""
    summary_allowance: int = 0
    """What the next compaction's summary is expected to take (``summary_allowance``)."""

    @property
    def estimated(self) -> int:
        return self.system + self.tools + self.summary + sum(self.by_writer.values())

    @property
    def threshold(self) -> int:
        """The tokens ``compact_at`` of the window allows a request."""
        return int(self.window * self.compact_at)

    @property
    def compaction_can_help(self) -> bool:
        """Whether a compaction could leave the recent history room below ``compact_at``, as
        the engine decides before compacting: not when the system prompt and the tool
        definitions, with the summary, take (almost) all the threshold allows."""
        room = compaction_room(
            self.system + self.tools,
            context_window=self.window,
            share=self.compact_at,
            summary_tokens=self.summary_allowance,
        )
        return compaction_can_help(room, context_window=self.window)


def _tokens(chars: int) -> int:
    return chars // CHARS_PER_TOKEN


async def _tools(
    catalog: Catalog, run_agent: str, workspace: str
) -> tuple[dict[str, Tool], list[str]]:
    """The agent's tools as offered now, and the MCP servers whose tools are not counted: only
    the servers running already are asked (a report does not start a server, nor an HTTP
    server's sign-in)."""
    agent = catalog.agent(run_agent, workspace)
    tools = await catalog.tools_for(agent, workspace=workspace, with_mcp=False)
    mcp = catalog.mcp_for(workspace)
    if mcp is None:
        return tools, []
    running, idle = mcp.running_tools()
    tools.update((tool.name, tool) for tool in running if tool_allowed(agent, tool.name))
    return tools, idle


def _by_writer(messages: Sequence[Message]) -> dict[str, int]:
    """Each writer's messages as ``estimate_tokens`` counts them: their characters, and
    ``MESSAGE_TOKENS`` a message."""
    chars = dict.fromkeys(_WRITERS.values(), 0)
    count = dict.fromkeys(_WRITERS.values(), 0)
    for message in messages:
        chars[_WRITERS[message.role]] += message_chars(message)
        count[_WRITERS[message.role]] += 1
    return {w: _tokens(chars[w]) + MESSAGE_TOKENS * count[w] for w in _WRITERS.values()}


async def context_usage(store: Store, catalog: Catalog, job_id: str) -> ContextUsage:
    """The context of ``job_id``'s next request, from its latest root run."""
    job = await store.get_job(job_id)
    roots = [r for r in await store.job_runs(job_id) if r.parent_run_id is None]
    if not roots:
        raise InvalidInput(f"job {job_id} has no run yet")
    run = roots[-1]
    workspace = Path(job.workspace)
    history = (await load_history(store, run)).messages
    state = ExtensionState()
    state.instructions = load_instructions(workspace)
    state.skills = list(discover_skills(workspace).skills.values())
    state.phases = discover_phases(workspace, run.agent)
    if state.phases.phases:
        initial = state.phases.initial
        state.phase, _ = scan_routes(history, 0, initial.id if initial else None)
    runs = list(dict.fromkeys([m.run_id for m in history] + [run.id]))
    state.compaction = applied_compaction(await store.list_notes(run_ids=runs), history)
    tools, mcp_not_counted = await _tools(catalog, run.agent, job.workspace)
    agent = catalog.agent(run.agent, job.workspace)
    system, _, specs = Extensions.step_setup(state, system_prompt(run, agent, workspace), tools)
    specs = catalog.offered(specs, job.workspace)
    sent, kept = compacted_messages(state.compaction, history)
    summary = sent[: len(sent) - len(kept)]
    window = catalog.context_window(catalog.provider(run.model), job.workspace)
    return ContextUsage(
        window=window,
        measured=run.context_tokens or max((r.context_tokens for r in roots), default=0),
        system=_tokens(len(system)),
        tools=tool_specs_tokens(specs),
        tool_count=len(specs),
        summary=_tokens(sum(message_chars(m) for m in summary)) + MESSAGE_TOKENS * len(summary),
        summarised=len(history) - len(kept),
        by_writer=_by_writer(kept),
        messages=len(kept),
        mcp_not_counted=mcp_not_counted,
        compact_at=catalog.config_for(job.workspace).defaults.compact_at,
        summary_allowance=summary_allowance(
            context_window=window,
            previous_summary=state.compaction.summary if state.compaction else None,
        ),
    )


def _no_room(usage: ContextUsage) -> str:
    """Why compacting cannot bring ``usage``'s requests under ``compact_at``."""
    overhead = usage.system + usage.tools
    allowed = f"compact_at ({usage.compact_at:.0%}) of the window allows"
    taken = (
        f"take ~{overhead:,} tokens, more than the {usage.threshold:,} {allowed}"
        if overhead > usage.threshold
        else f"take ~{overhead:,} of the {usage.threshold:,} tokens {allowed}"
    )
    return (
        f"the system prompt and the tool definitions {taken}, leaving too little room for a"
        f" summary (~{usage.summary_allowance:,}) and recent messages; the history is not"
        " compacted: offer fewer tools (MCP servers, the agent's tools) or use a larger window"
    )


def usage_lines(usage: ContextUsage) -> list[str]:
    """The report for people: each part with its share of the window."""

    def part(name: str, tokens: int, note: str = "") -> str:
        share = 100 * tokens / usage.window if usage.window else 0.0
        return f"  {name:<24} ~{tokens:>9,}  {share:5.1f}%{note}"

    counted = (
        f"the model counted {usage.measured:,} tokens at its latest call"
        if usage.measured
        else "no model call yet"
    )
    lines = [
        "Context of this job:",
        f"  {counted}; its window: {usage.window:,} tokens",
        f"  the next request, estimated from its characters (~{CHARS_PER_TOKEN} a token):",
    ]
    lines.append(part("system prompt", usage.system))
    tools_note = f"  ({usage.tool_count} tools" + (
        f"; not those of {', '.join(usage.mcp_not_counted)}: not running)"
        if usage.mcp_not_counted
        else ")"
    )
    lines.append(part("tool definitions", usage.tools, tools_note))
    if usage.summarised:
        lines.append(
            part("compaction summary", usage.summary, f"  (for {usage.summarised} messages)")
        )
    for writer, tokens in usage.by_writer.items():
        lines.append(part(f"messages: {writer}", tokens))
    free = max(0, usage.window - usage.estimated)
    lines.append(part("free", free, f"  ({usage.messages} messages in the next request)"))
    if usage.window and not usage.compaction_can_help:
        # The engine says so once an execution, in a notice; the report says it every time.
        lines.append(f"  compaction cannot help: {_no_room(usage)}")
    return lines
