"""The extension points of DESIGN §16 as one execution sees them: project instructions and the
skill list in the system prompt, the ``use_skill`` and ``route`` tools, the current phase (read
from the history, so it is as durable as the checkpoint that covers it), and compaction of the
request's history. The pure rules live in ``runtime.instructions``, ``runtime.skills``,
``runtime.phases`` and ``runtime.compaction``; this module calls them and records what they
decided as ``run_noted`` events.

What is durable, and where:

- the instruction files a run used: an ``instructions`` note when the execution starts and the
  set differs from the one the run last recorded (a resumed run notes what changed);
- the phase: the last successful ``route`` call of the history (a checkpoint covers it, a fork
  or follow-up inherits it); each move also gets a ``phase`` note, written once per call even
  if the process dies between the tool result and the note; a ``route`` to several phases
  runs each as a child run (created under the key ``route:<call>:<phase>``, so a resumed
  parent re-attaches to them), which works in that phase, and the parent stays where it was;
- a compaction: a ``compaction`` note with the summary and the last message it covers. The
  messages are never touched; a request applies the latest compaction whose message is in its
  history, so a fork from before it sees everything."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime.commands import CustomCommand, invocables
from runtime.compaction import (
    SUMMARISER_SYSTEM,
    SUMMARY_MAX_TOKENS,
    CompactionPlan,
    HistoryTally,
    compacted_history,
    compaction_can_help,
    compaction_room,
    estimate_tokens,
    kept_share,
    message_chars,
    plan_compaction,
    summary_allowance,
    summary_request_text,
)
from runtime.engine.catalog import Catalog
from runtime.engine.delegation import Outcome
from runtime.engine.pump import Pump
from runtime.errors import InvalidInput, ModelError, RunStateConflict, ToolError
from runtime.events import Notice, RunNoted
from runtime.hooks import ClaudeHookReport, HooksConfig
from runtime.instructions import (
    InstructionFile,
    instructions_prompt,
    load_instructions,
    shown_path,
)
from runtime.models import Message, Role, Run, TextBlock, ToolCallState, Usage
from runtime.phases import (
    ROUTE_TOOL_NAME,
    Phase,
    PhaseSet,
    decide_route,
    requested_targets,
    route_tool_schema,
)
from runtime.providers.base import (
    ModelProvider,
    ModelRequest,
    TextDelta,
    ToolSpec,
    UsageReport,
)
from runtime.skills import USE_SKILL_NAME, Skill, UseSkillTool, discover_skills, skills_prompt
from runtime.store.base import Store
from runtime.tools.base import ApprovalDefault, Tool, ToolContext, ToolOutput

log = logging.getLogger("runtime.engine")

__all__ = [
    "AppliedCompaction",
    "ExtensionState",
    "RouteTool",
    "applied_compaction",
    "current_phase",
    "phase_prompt",
    "summarise",
]


@dataclass
class AppliedCompaction:
    summary: str
    through_message_id: str
    cut: int | None = None
    """Index in the history of the first message kept (found once, then kept)."""
    head: tuple[Message, list[Message]] | None = None
    """The first message kept, and what requests send in its place (the summary merged into
    it, or the summary then it): made once, not at every step."""


@dataclass
class ExtensionState:
    """What one execution knows of its run's extensions."""

    instructions: list[InstructionFile] = field(default_factory=list)
    skills: list[Skill] = field(default_factory=list)
    phases: PhaseSet = field(default_factory=PhaseSet)
    phase: str | None = None
    phase_scanned: int = 0
    """Messages of the history already scanned for route calls."""
    noted_routes: set[str] = field(default_factory=set)
    """Route calls (tool call ids) that have their ``phase`` note."""
    compaction: AppliedCompaction | None = None
    tally: HistoryTally = field(default_factory=HistoryTally)
    """The history's size in characters, each message counted once (``request_messages``)."""
    branch: bool = False
    """A child run of a ``route`` to several phases: it stays in its phase (no ``route``)."""
    no_room_at: int | None = None
    """The overhead (system prompt and tool definitions, in tokens) of requests compacting was
    found unable to make room for: not tried again until the overhead changes (a phase move)."""
    told_no_room: bool = False
    """This execution said that compacting cannot make room (it says so once)."""

    @property
    def current(self) -> Phase | None:
        return self.phases.phases.get(self.phase) if self.phase else None


# --- phases ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PhaseMove:
    tool_call_id: str
    source: str
    target: str
    reason: str
    payload: str
    parallel: tuple[str, ...] = ()
    """A route to several phases: they ran as child runs, and ``target`` is ``source``."""


BRANCH_KEY = "route:"
"""The idempotency key of a child run of a parallel route: ``route:<tool call id>:<phase>``."""


def branch_key(tool_call_id: str, phase: str) -> str:
    return f"{BRANCH_KEY}{tool_call_id}:{phase}"


def branch_phase(run: Run) -> str | None:
    """The phase a child run of a parallel route works in (None for any other run)."""
    key = run.idempotency_key or ""
    if run.parent_run_id is None or not key.startswith(BRANCH_KEY):
        return None
    return key.rpartition(":")[2] or None


def branch_input(source: str, target: str, arguments: Mapping[str, Any]) -> str:
    """What a child run of a parallel route is asked (the same for the same call, so that a
    resumed parent finds the child it created)."""
    reason = str(arguments.get("reason") or "").strip()
    payload = str(arguments.get("payload") or "").strip()
    lines = [
        f"You are one of several runs working in parallel, each in one phase; yours is phase "
        f"{target} (the run routed here from phase {source}"
        + (f": {reason}" if reason else "")
        + "). Do this phase's work and answer with its result; your answer is handed back "
        "to the run in phase " + source + "."
    ]
    if payload:
        lines += ["", payload]
    return "\n".join(lines)


def fan_out_result(source: str, ended: Sequence[tuple[str, Run, Outcome]]) -> Outcome:
    """The route call's result: each phase's answer (or failure), back in ``source``. It fails
    only when every phase failed."""
    lines = [
        f"Ran phases {', '.join(phase for phase, _, _ in ended)} in parallel as child runs; "
        f"back in phase {source}."
    ]
    for phase, child, (state, result, error) in ended:
        ok = state is ToolCallState.COMPLETED
        lines += [
            "",
            f"## Phase {phase} ({'completed' if ok else 'failed'}, run {child.id})",
            (result if ok else error) or "",
        ]
    text = "\n".join(lines).strip()
    if all(state is not ToolCallState.COMPLETED for _, _, (state, _, _) in ended):
        return ToolCallState.FAILED, None, text
    return ToolCallState.COMPLETED, text, None


def scan_routes(
    messages: Sequence[Message], start: int, phase: str | None
) -> tuple[str | None, list[PhaseMove]]:
    """The phase after ``messages[start:]`` and the moves made there: a ``route`` call whose
    result is not an error moved the run to the phase it named."""
    moves: list[PhaseMove] = []
    pending: dict[str, tuple[str, dict[str, Any]]] = {}
    for message in messages[start:]:
        if message.role is Role.ASSISTANT:
            for use in message.tool_uses:
                if use.name == ROUTE_TOOL_NAME:
                    pending[use.id] = (use.tool_call_id, dict(use.input))
        elif message.role is Role.TOOL:
            for result in message.tool_results:
                found = pending.pop(result.tool_use_id, None)
                if found is None or result.is_error:
                    continue
                call_id, arguments = found
                targets = requested_targets(arguments.get("phase"))
                if not targets:
                    continue
                parallel = len(targets) > 1
                target = (phase or "") if parallel else targets[0]
                moves.append(
                    PhaseMove(
                        tool_call_id=call_id,
                        source=phase or "",
                        target=target,
                        reason=str(arguments.get("reason") or ""),
                        payload=str(arguments.get("payload") or ""),
                        parallel=targets if parallel else (),
                    )
                )
                phase = target
    return phase, moves


def current_phase(messages: Sequence[Message], phases: PhaseSet) -> str | None:
    """The phase a run with this history is in (the initial one before any move)."""
    initial = phases.initial
    phase, _ = scan_routes(messages, 0, initial.id if initial else None)
    return phase


def phase_prompt(phases: PhaseSet, phase: Phase, *, can_route: bool = True) -> str:
    targets = phase.targets or tuple(p for p in sorted(phases.phases) if p != phase.id)
    lines = [
        f"# Current phase: {phase.id}",
        "",
        phase.directive,
    ]
    if targets and can_route:
        lines += [
            "",
            f"When this phase's work is done, call the {ROUTE_TOOL_NAME} tool to move on "
            f"(phases you may move to: {', '.join(targets)}). Name several phases to have "
            "them worked on in parallel, each as a run of its own: their results come back "
            "to this phase.",
        ]
    return "\n".join(lines).strip()


class RouteTool:
    """``route(phase, payload?, reason?)``: moves the run to another phase. The engine reads
    the move back from the history (``scan_routes``); the tool only checks it is allowed."""

    name = ROUTE_TOOL_NAME
    read_only = True
    approval_default: ApprovalDefault = "allow"

    def __init__(self, state: ExtensionState) -> None:
        self._state = state
        self.description = (
            "Move this run to another phase of its work. The next phase's directive replaces "
            "the current one; pass what it should know as payload."
        )
        self.input_schema: dict[str, Any] = route_tool_schema(state.phases)

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        current = self._state.phase or ""
        requested = arguments.get("phase")
        if not isinstance(requested, str | list):
            raise ToolError("phase must be a phase id")
        decision = decide_route(self._state.phases, current, requested)
        if decision.kind == "refused":
            raise ToolError(decision.error)
        if decision.kind == "fan_out":
            raise ToolError("a route to several phases is run by the engine")
        target = self._state.phases.phases[decision.targets[0]]
        lines = [f"Moved from phase {current} to phase {target.id}."]
        payload = str(arguments.get("payload") or "").strip()
        if payload:
            lines.append(f"Payload: {payload}")
        lines += ["", target.directive]
        return ToolOutput(content="\n".join(lines).strip())

    def approval_detail(self, arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        return {}

    def parallel_targets(self, arguments: Mapping[str, Any]) -> tuple[str, ...] | None:
        """The phases a call routes to at once (each then runs as a child run), or None when
        it moves to one phase or is refused (``run`` says why)."""
        requested = arguments.get("phase")
        if not isinstance(requested, list):
            return None
        decision = decide_route(self._state.phases, self._state.phase or "", requested)
        return decision.targets if decision.kind == "fan_out" else None

    @property
    def source(self) -> str:
        return self._state.phase or ""


# --- compaction ------------------------------------------------------------------------------


def applied_compaction(
    notes: Sequence[RunNoted], messages: Sequence[Message]
) -> AppliedCompaction | None:
    """The latest compaction made at a point ``messages`` reach (its last summarised message
    and the last message of the history it was made from are both in it). A fork from a
    checkpoint before the compaction does not reach that point, and sees the whole history."""
    ids = {m.id for m in messages}
    for note in reversed(notes):
        if note.note != "compaction":
            continue
        through = str(note.data.get("through_message_id", ""))
        made_at = str(note.data.get("made_at_message_id") or through)
        if through in ids and made_at in ids:
            return AppliedCompaction(
                summary=str(note.data.get("summary", "")), through_message_id=through
            )
    return None


def _cut_of(compaction: AppliedCompaction, messages: Sequence[Message]) -> int | None:
    cut = compaction.cut
    if (
        cut is not None
        and 0 < cut <= len(messages)
        and (messages[cut - 1].id == compaction.through_message_id)
    ):
        return cut
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].id == compaction.through_message_id:
            compaction.cut = index + 1
            return compaction.cut
    return None


def compacted_messages(
    compaction: AppliedCompaction | None, messages: Sequence[Message]
) -> tuple[list[Message], list[Message]]:
    """(what the request sends, the originals after the compaction's cut)."""
    if compaction is None:
        whole = list(messages)
        return whole, whole
    cut = _cut_of(compaction, messages)
    if cut is None or cut >= len(messages):
        whole = list(messages)
        return whole, whole
    kept = list(messages[cut:])
    head = compaction.head
    if head is not None and head[0] is kept[0]:
        return [*head[1], *kept[1:]], kept
    plan = CompactionPlan(summarised=list(messages[:cut]), kept=kept)
    sent = compacted_history(compaction.summary, plan)
    compaction.head = (kept[0], sent[: len(sent) - len(kept) + 1])
    return sent, kept


async def summarise(
    provider: ModelProvider,
    plan: CompactionPlan,
    *,
    previous_summary: str | None,
    model: str,
    workspace: str,
) -> tuple[str, Usage]:
    """Ask the model for a summary of ``plan.summarised`` (no tools): (the summary, what the
    call used). Raises ``ModelError``."""
    anchor = plan.kept[0]
    request = ModelRequest.model_construct(
        model=model,
        system=SUMMARISER_SYSTEM,
        messages=[
            Message(
                id=f"{anchor.id}:compaction-request",
                run_id=anchor.run_id,
                job_id=anchor.job_id,
                position=0,
                role=Role.USER,
                content=[
                    TextBlock(text=summary_request_text(plan, previous_summary=previous_summary))
                ],
                created_at=anchor.created_at,
            )
        ],
        tools=[],
        max_tokens=SUMMARY_MAX_TOKENS,
        thinking_budget=None,
        workspace=workspace,
    )
    pieces: list[str] = []
    usage = Usage()
    async for event in provider.stream(request):
        if isinstance(event, TextDelta):
            pieces.append(event.text)
        elif isinstance(event, UsageReport):
            usage = event.usage
    summary = "".join(pieces).strip()
    if not summary:
        raise ModelError("the model returned an empty summary", retryable=False)
    return summary, usage


# --- the engine piece ------------------------------------------------------------------------


class Extensions:
    """Called by the executor: at the start of an execution (``start``), for each request's
    system prompt, tools and messages, and after each step (``note_phase_moves``)."""

    def __init__(self, *, store: Store, pump: Pump, env: Mapping[str, str] | None = None) -> None:
        self._store = store
        self._pump = pump
        self._env = env

    @property
    def env(self) -> Mapping[str, str]:
        return os.environ if self._env is None else self._env

    async def start(
        self, run: Run, *, workspace: Path, token: str, history: Sequence[Message]
    ) -> ExtensionState:
        from runtime.phases import discover_phases

        state = ExtensionState()
        state.instructions = load_instructions(workspace, env=self.env)
        state.skills = list(discover_skills(workspace, env=self.env).skills.values())
        branch = branch_phase(run)
        if run.parent_run_id is None or branch is not None:
            state.phases = discover_phases(workspace, run.agent, env=self.env)
        if branch is not None and branch not in state.phases.phases:
            state.phases = PhaseSet()  # its phase is gone: an ordinary child run
        history_runs = list(dict.fromkeys([m.run_id for m in history] + [run.id]))
        notes = await self._store.list_notes(run_ids=history_runs)
        own = [n for n in notes if n.run_id == run.id]
        await self._note_instructions(run, token, state.instructions, own, workspace)
        state.compaction = applied_compaction(notes, history)
        state.noted_routes = {
            str(n.data.get("tool_call_id")) for n in notes if n.note == "phase" and n.data
        }
        if state.phases.phases:
            initial = state.phases.initial
            state.phase = initial.id if initial else None
            if branch is not None:
                state.phase, state.branch = branch, True
            if not any(n.note == "phase" for n in notes):
                await self._record(
                    run,
                    token,
                    RunNoted(
                        job_id=run.job_id,
                        run_id=run.id,
                        note="phase",
                        text=f"phase: starts in {state.phase}"
                        + (" (one of several run in parallel)" if state.branch else ""),
                        data={"from": None, "to": state.phase, "tool_call_id": None},
                    ),
                )
            await self.note_phase_moves(run, token, state, history)
        return state

    async def _note_instructions(
        self,
        run: Run,
        token: str,
        files: Sequence[InstructionFile],
        own_notes: Sequence[RunNoted],
        workspace: Path,
    ) -> None:
        used = [{"path": f.path, "sha256": f.sha256} for f in files]
        recorded = [n for n in own_notes if n.note == "instructions"]
        previous = recorded[-1].data.get("files") if recorded else None
        if previous == used or (previous is None and not used):
            return  # no note: no file was used, and none was before
        home = self.env.get("HOME")
        if previous is None:
            shown = [shown_path(f.path, workspace, home=home) for f in files]
            text = "instructions: " + ", ".join(shown)
            changed: list[str] = []
        else:
            before = {str(p["path"]): str(p["sha256"]) for p in previous}
            now = {f.path: f.sha256 for f in files}
            changed = sorted(p for p in before.keys() | now.keys() if before.get(p) != now.get(p))
            shown = [shown_path(p, workspace, home=home) for p in changed]
            text = "instructions changed since the run last started: " + ", ".join(shown)
        await self._record(
            run,
            token,
            RunNoted(
                job_id=run.job_id,
                run_id=run.id,
                note="instructions",
                text=text,
                data={"files": used, "changed": changed},
            ),
        )

    async def _record(self, run: Run, token: str, note: RunNoted) -> RunNoted:
        return await self._store.record_note(run.id, token=token, note=note)

    @staticmethod
    def system_prompt(state: ExtensionState, base: str, with_skills: bool = True) -> str:
        sections = [base, instructions_prompt(state.instructions)]
        current = state.current
        offered = state.skills
        if current is not None and current.skills:
            offered = [s for s in offered if s.name in current.skills]
        if with_skills:
            sections.append(skills_prompt(offered))
        if current is not None:
            sections.append(phase_prompt(state.phases, current, can_route=not state.branch))
        return "\n\n".join(s for s in sections if s.strip())

    @staticmethod
    def tools(state: ExtensionState, tools: dict[str, Tool]) -> dict[str, Tool]:
        """The run's tools in its current phase, with ``use_skill`` and ``route`` when they
        have something to offer."""
        current = state.current
        chosen = dict(tools)
        if current is not None and current.skills and USE_SKILL_NAME in chosen:
            # The catalog offers every skill; this phase offers some.
            offered = [s for s in state.skills if s.model_invocable and s.name in current.skills]
            if offered:
                chosen[USE_SKILL_NAME] = UseSkillTool(offered)
            else:
                del chosen[USE_SKILL_NAME]
        if state.phases.phases and len(state.phases.phases) > 1 and not state.branch:
            chosen[ROUTE_TOOL_NAME] = RouteTool(state)
        if current is not None:
            chosen = {n: t for n, t in chosen.items() if current.allows_tool(n)}
        return chosen

    @staticmethod
    def step_setup(
        state: ExtensionState, base: str, tools: dict[str, Tool]
    ) -> tuple[str, dict[str, Tool], list[ToolSpec]]:
        """The system prompt, tools and tool specs of the next requests (until a phase move)."""
        chosen = Extensions.tools(state, tools)
        specs = [
            ToolSpec(name=t.name, description=t.description, input_schema=t.input_schema)
            for t in chosen.values()
        ]
        return Extensions.system_prompt(state, base, USE_SKILL_NAME in chosen), chosen, specs

    async def note_phase_moves(
        self, run: Run, token: str, state: ExtensionState, history: Sequence[Message]
    ) -> bool:
        """Follow the route calls the history gained; True when the phase changed."""
        if not state.phases.phases:
            return False
        before = state.phase
        # From the last message scanned: an assistant message there may have its route call
        # answered by the tool message that came after (an execution that resumed between).
        start = max(0, state.phase_scanned - 1)
        state.phase, moves = scan_routes(history, start, state.phase)
        state.phase_scanned = len(history)
        for move in moves:
            if move.tool_call_id in state.noted_routes:
                continue
            reason = f" ({move.reason})" if move.reason else ""
            moved = (
                f"{', '.join(move.parallel)} in parallel, back in {move.target}"
                if move.parallel
                else move.target
            )
            await self._record(
                run,
                token,
                RunNoted(
                    job_id=run.job_id,
                    run_id=run.id,
                    note="phase",
                    text=f"phase: {move.source} → {moved}{reason}",
                    data={
                        "from": move.source,
                        "to": move.target,
                        "parallel": list(move.parallel),
                        "reason": move.reason,
                        "payload": move.payload,
                        "tool_call_id": move.tool_call_id,
                    },
                ),
            )
            state.noted_routes.add(move.tool_call_id)
        return state.phase != before

    async def request_messages(
        self,
        run: Run,
        token: str,
        state: ExtensionState,
        *,
        provider: ModelProvider,
        history: Sequence[Message],
        system: str,
        specs: Sequence[ToolSpec],
        context_window: int,
        share: float,
        workspace: str,
        force: bool = False,
    ) -> list[Message]:
        """The messages of the next request: the history with the latest compaction applied,
        compacted again first when the request (``system``, the tool definitions ``specs`` and
        the messages) would take more than ``share`` of the window, unless compacting cannot
        make room (``compaction_can_help``, or a compaction that left the request past
        ``share``): then the run is told, and nothing is compacted until the system prompt and
        the tool definitions change."""
        messages, originals = compacted_messages(state.compaction, history)
        tokens = state.tally.estimate(messages, history, system=system, tools=specs)
        if not force and tokens <= context_window * share:
            return messages
        overhead = state.tally.overhead(system=system, tools=specs)
        room = compaction_room(
            overhead,
            context_window=context_window,
            share=share,
            summary_tokens=summary_allowance(
                context_window=context_window,
                previous_summary=state.compaction.summary if state.compaction else None,
            ),
        )
        if not force and (
            state.no_room_at == overhead
            or not compaction_can_help(room, context_window=context_window)
        ):
            self._tell_no_room(run, state, overhead, len(specs), window=context_window, share=share)
            return messages
        compacted = await self._compact(
            run,
            token,
            state,
            provider=provider,
            history=history,
            messages=messages,
            plan=plan_compaction(
                originals,
                context_window=context_window,
                keep_share=kept_share(room, context_window=context_window),
                chars_of=state.tally.chars_of,
            ),
            workspace=workspace,
        )
        after = state.tally.estimate(compacted, history, system=system, tools=specs)
        if compacted is not messages and not force and after > context_window * share:
            self._tell_no_room(
                run, state, overhead, len(specs), window=context_window, share=share, after=after
            )
        return compacted

    async def _compact(
        self,
        run: Run,
        token: str,
        state: ExtensionState,
        *,
        provider: ModelProvider,
        history: Sequence[Message],
        messages: list[Message],
        plan: CompactionPlan | None,
        workspace: str,
    ) -> list[Message]:
        """Summarise ``plan.summarised`` and record the compaction: the messages of the request
        with it applied (``messages``, the request without it, when there is nothing to
        summarise or the model fails)."""
        if plan is None:
            return messages
        previous = state.compaction.summary if state.compaction else None
        self._pump.publish(
            Notice(
                job_id=run.job_id,
                run_id=run.id,
                level="info",
                text=f"compacting {len(plan.summarised)} earlier messages of the history",
            )
        )
        try:
            summary, usage = await summarise(
                provider,
                plan,
                previous_summary=previous,
                model=run.model.partition(":")[2] or run.model,
                workspace=workspace,
            )
        except ModelError as exc:
            self._pump.publish(
                Notice(
                    job_id=run.job_id,
                    run_id=run.id,
                    level="warning",
                    text=f"the history could not be compacted ({exc}); sending it whole",
                )
            )
            return messages
        note = compaction_note(
            run,
            plan,
            summary,
            messages,
            previous_through=state.compaction,
            usage=usage,
            chars_of=state.tally.chars_of,
        )
        await self._store.record_note(
            run.id, token=token, note=note, usage=usage, cost_usd=provider.cost_usd(usage)
        )
        state.compaction = AppliedCompaction(
            summary=summary, through_message_id=plan.through_message_id
        )
        return compacted_messages(state.compaction, history)[0]

    def _tell_no_room(
        self,
        run: Run,
        state: ExtensionState,
        overhead: int,
        tool_count: int,
        *,
        window: int,
        share: float,
        after: int | None = None,
    ) -> None:
        """Compacting cannot make room for the requests of this overhead (``after``: a
        compaction left the request at that many tokens, still past the threshold): not tried
        again until the overhead changes, and said once an execution."""
        state.no_room_at = overhead
        if state.told_no_room:
            return
        state.told_no_room = True
        threshold = f"compact_at ({share:.0%}) of the {window:,}-token context window"
        definitions = f"the system prompt and the {tool_count} tool definitions"
        if after is None:
            cause = (
                f"{definitions} alone take about {overhead:,} tokens, too close to {threshold} "
                "to leave room for a summary and recent messages"
            )
        else:
            cause = (
                f"after compacting, the request still takes about {after:,} tokens, more than "
                f"{threshold} ({definitions} take {overhead:,})"
            )
        text = (
            f"{cause}: compacting cannot make room, so the history is not compacted (again "
            "while the tools stay the same); offer fewer tools (MCP servers, the agent's tools) "
            "or use a larger window"
        )
        self._pump.publish(Notice(job_id=run.job_id, run_id=run.id, level="warning", text=text))


async def compact_finished_run(
    store: Store, provider: ModelProvider, run: Run, *, workspace: str, context_window: int
) -> RunNoted:
    """``/compact``: summarise all but the last turn of a finished run's history now, so the
    next run of the job starts from the summary. ``InvalidInput`` when there is nothing older
    than the last turn; ``ModelError`` when the model fails (nothing is recorded then)."""
    from runtime.history import load_history

    if not run.state.is_terminal:
        from runtime.interrupted import state_as_seen

        raise RunStateConflict(
            f"run {run.id} is {state_as_seen(run)}; compact a job when its run has ended"
        )
    history = (await load_history(store, run)).messages
    runs = list(dict.fromkeys([m.run_id for m in history] + [run.id]))
    applied = applied_compaction(await store.list_notes(run_ids=runs), history)
    _, originals = compacted_messages(applied, history)
    plan = plan_compaction(originals, context_window=context_window, keep_share=0.0)
    if plan is None:
        raise InvalidInput("there is nothing to compact yet: the history is one turn long")
    summary, usage = await summarise(
        provider,
        plan,
        previous_summary=applied.summary if applied else None,
        model=run.model.partition(":")[2] or run.model,
        workspace=workspace,
    )
    note = compaction_note(run, plan, summary, history, previous_through=applied, usage=usage)
    return await store.record_note(
        run.id, token=None, note=note, usage=usage, cost_usd=provider.cost_usd(usage)
    )


def compaction_note(
    run: Run,
    plan: CompactionPlan,
    summary: str,
    before: Sequence[Message],
    *,
    previous_through: AppliedCompaction | None,
    usage: Usage | None = None,
    chars_of: Callable[[Message], int] = message_chars,
) -> RunNoted:
    """``chars_of`` as for ``estimate_tokens``."""
    after = compacted_history(summary, plan)
    tokens_before = estimate_tokens(before, chars_of=chars_of)
    tokens_after = estimate_tokens(after, chars_of=chars_of)
    return RunNoted(
        job_id=run.job_id,
        run_id=run.id,
        note="compaction",
        text=(
            f"compacted {len(plan.summarised)} earlier messages into a summary "
            f"(about {tokens_before} → {tokens_after} tokens); the originals are kept"
        ),
        data={
            "summary": summary,
            "through_message_id": plan.through_message_id,
            "first_message_id": plan.summarised[0].id,
            "made_at_message_id": before[-1].id if before else plan.through_message_id,
            "summarised_messages": len(plan.summarised),
            "previous_through_message_id": (
                previous_through.through_message_id if previous_through else None
            ),
            "tokens_before": tokens_before,
            "tokens_after": tokens_after,
            "usage": usage.model_dump() if usage is not None else None,
        },
    )


@dataclass(frozen=True)
class ExtensionReport:
    """What is in effect in a workspace (``/context``, ``doctor``, the palette)."""

    instructions: list[InstructionFile]
    skills: list[Skill]
    commands: list[CustomCommand]
    hooks: HooksConfig
    claude_hooks: ClaudeHookReport
    phases: PhaseSet
    skill_problems: list[str]
    command_problems: list[str]


def describe_extensions(
    workspace: Path,
    *,
    agent: str,
    hooks: HooksConfig,
    claude_hooks: ClaudeHookReport,
    env: Mapping[str, str] | None = None,
) -> ExtensionReport:
    from runtime.commands import discover_commands
    from runtime.phases import discover_phases

    skills = discover_skills(workspace, env=env)
    commands = discover_commands(workspace, env=env)
    phases = discover_phases(workspace, agent, env=env)
    return ExtensionReport(
        instructions=load_instructions(workspace, env=env),
        skills=list(skills.skills.values()),
        commands=list(commands.commands.values()),
        hooks=hooks,
        claude_hooks=claude_hooks,
        phases=phases,
        skill_problems=[problem.shown() for problem in skills.problems],
        command_problems=[problem.shown() for problem in commands.problems],
    )


def _skill_and_command_lines(report: ExtensionReport) -> list[str]:
    """Skills and commands, each shadowed one said to be (``runtime.commands.invocables``): the
    TUI and ``run`` never run it, so a list saying it is in effect misled."""
    found = invocables(report.skills, report.commands)
    lines = ["Skills:"]
    for skill in report.skills:
        by = found.shadowed_by(skill.path)
        if by is not None:
            use = "the model may still load it" if skill.model_invocable else "unusable"
            note = f" (/{skill.name} is shadowed by {by}: {use})"
        else:
            note = "" if skill.model_invocable else f" (only as /{skill.name})"
        lines.append(f"  {skill.name}: {skill.description}{note} — {skill.path}")
    if not report.skills:
        lines.append("  none")
    lines += [f"  warning: {problem}" for problem in report.skill_problems]
    lines.append("Commands:")
    for command in report.commands:
        by = found.shadowed_by(command.path)
        note = "" if by is None else f" (shadowed by {by}: never runs; rename it to use it)"
        lines.append(f"  /{command.name}: {command.description} — {command.path}{note}")
    if not report.commands:
        lines.append("  none")
    lines += [f"  warning: {problem}" for problem in report.command_problems]
    return lines


def report_lines(report: ExtensionReport) -> list[str]:
    """The report as lines for people (``doctor``, ``/context``)."""
    lines = ["Instructions (in prompt order):"]
    lines += [
        f"  {f.path} (sha256 {f.sha256[:12]}{', cut' if f.truncated else ''})"
        for f in report.instructions
    ] or ["  none (no AGENTS.md or CLAUDE.md applies)"]
    lines += _skill_and_command_lines(report)
    lines.append("Hooks:")
    hooks = report.hooks
    configured = [
        (event, entry)
        for event in ("before_tool", "after_tool", "on_input_required", "on_run_finished")
        for entry in getattr(hooks, event)
        if not entry.claude
    ]
    lines += [f"  {event} {entry.matcher}: {entry.shown_command()}" for event, entry in configured]
    lines += [f"  used from Claude Code: {u}" for u in report.claude_hooks.used]
    lines += [f"  skipped from Claude Code: {s}" for s in report.claude_hooks.skipped]
    if not configured and not report.claude_hooks.used and not report.claude_hooks.skipped:
        lines.append("  none")
    lines.append("Phases:")
    phases = report.phases
    initial = phases.initial
    lines += [
        f"  {p.id}{' (initial)' if initial is not None and p.id == initial.id else ''}: "
        f"{p.directive.splitlines()[0] if p.directive else ''} — {p.path}"
        for p in phases.phases.values()
    ] or ["  none"]
    lines += [f"  warning: {problem}" for problem in phases.problems]
    return lines


class ExtensionPoints:
    """``Runtime.extensions``: what is in effect in a workspace, the notes of a run, and
    ``/compact``."""

    def __init__(self, store: Store, catalog: Catalog, workspace: Path) -> None:
        self._store = store
        self._catalog = catalog
        self._workspace = workspace

    async def notes(self, run_id: str) -> list[RunNoted]:
        """The run's ``run_noted`` events (instructions used, phase moves, compactions)."""
        await self._store.get_run(run_id)
        return await self._store.list_notes(run_ids=[run_id])

    def report(
        self, workspace: str | Path | None = None, *, agent: str | None = None
    ) -> ExtensionReport:
        """Instructions, skills, commands, hooks and phases in effect in ``workspace`` (the
        runtime's folder by default)."""
        folder = str(Path(workspace).resolve()) if workspace is not None else str(self._workspace)
        hooks, claude = self._catalog.hooks_for(folder)
        config = self._catalog.config_for(folder)
        return describe_extensions(
            Path(folder), agent=agent or config.defaults.agent, hooks=hooks, claude_hooks=claude
        )

    async def compact(self, job_id: str) -> RunNoted:
        """Summarise the job's history but its last turn now: the next run of the job starts
        from the summary; the messages themselves stay as they are."""
        await self._store.get_job(job_id)
        roots = [r for r in await self._store.job_runs(job_id) if r.parent_run_id is None]
        if not roots:
            raise InvalidInput(f"job {job_id} has no run to compact")
        run = roots[-1]
        job = await self._store.get_job(job_id)
        provider = self._catalog.provider(run.model)
        return await compact_finished_run(
            self._store,
            provider,
            run,
            workspace=job.workspace,
            context_window=self._catalog.context_window(provider, job.workspace),
        )
