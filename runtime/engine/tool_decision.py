"""The pure part of settling a batch of tool calls: for each call of an assistant message,
given the stored calls, the requests opened for them and the approval policy, what happens
next. No I/O: the plan is carried out by ``runtime.engine.tool_calls``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from runtime.denials import by_person, by_rules
from runtime.engine.execution import ASK_USER
from runtime.errors import ToolError
from runtime.models import InputKind, InputRequest, InputRequestState, ToolCall, ToolCallState
from runtime.store.base import ToolStateChange
from runtime.tools.base import Tool

Decide = Callable[[str, Tool, set[str]], str]
"""``decide(tool name, tool, tools allowed for this run)`` → "allow" / "ask" / "deny"."""

STOPPED_UNKNOWN = "the process running this tool stopped; its outcome is unknown"


@dataclass(frozen=True)
class Stop:
    """The batch waits for a person: ask a question, ask for approval, or keep waiting."""

    kind: Literal["question", "approval", "wait"]
    call: ToolCall | None = None
    tool: Tool | None = None


@dataclass
class Plan:
    decided: list[ToolStateChange] = field(default_factory=list)
    """Transitions decided before anything runs (unknown tools, bad arguments, denials...)."""
    to_run: list[tuple[ToolCall, Tool]] = field(default_factory=list)
    already_running: set[str] = field(default_factory=set)
    """Calls in ``to_run`` this execution started with their message (already ``running``)."""
    allowed: set[str] = field(default_factory=set)
    """Tools allowed for the rest of the run, with this batch's "allow for this run" answers."""
    stop: Stop | None = None

    def fail(self, call: ToolCall, error: str) -> None:
        self.decided.append(
            ToolStateChange(tool_call_id=call.id, to=ToolCallState.FAILED, error=error)
        )


def argument_problem(tool: Tool, arguments: dict[str, Any]) -> str | None:
    if "_invalid_json" in arguments:
        return f"the arguments for {tool.name} were not valid JSON; send a JSON object"
    from runtime.tools.builtin import validate_arguments

    try:
        validate_arguments(tool, arguments)
    except ToolError as exc:
        return str(exc)
    return None


def cancelled_text(request: InputRequest) -> str:
    reason = request.detail.get("cancel_reason")
    return f"the request for input was cancelled{': ' + reason if reason else ''}"


def allowed_by_answers(requests: Iterable[InputRequest]) -> set[str]:
    """Tools a person allowed "for this run" in the answered approvals of ``requests``."""
    return {
        str(each.detail.get("tool", ""))
        for each in requests
        if each.kind is InputKind.APPROVAL
        and each.state is InputRequestState.ANSWERED
        and isinstance(each.answer, dict)
        and each.answer.get("decision") == "allow_run"
    }


def plan_calls(
    calls: list[ToolCall],
    requests: list[InputRequest],
    tools: dict[str, Tool],
    *,
    started_here: set[str],
    allowed: set[str],
    decide: Decide,
    servers_down: Mapping[str, str] | None = None,
) -> Plan:
    """What to do with each call, in call order. The first call that waits for a person is
    the plan's ``stop``; the calls allowed to run are in ``to_run`` whether they come before or
    after it (they run while the person is asked), and a later call that would wait for a
    person too stays ``pending`` (asked once the first is answered).
    ``servers_down``: why each MCP server that could not start did not, by name."""
    by_call = {each.tool_call_id: each for each in requests if each.tool_call_id}
    plan = Plan(allowed=set(allowed) | allowed_by_answers(requests))
    for call in calls:
        tool = tools.get(call.name)
        first_stop = plan.stop
        if call.id in started_here and call.state is ToolCallState.RUNNING and tool is not None:
            plan.already_running.add(call.id)
            plan.to_run.append((call, tool))
            continue
        if call.state is ToolCallState.RUNNING:
            if not _started_elsewhere(plan, call, by_call.get(call.id)):
                continue
        elif call.state is not ToolCallState.PENDING:
            continue
        if tool is None:
            plan.fail(call, unknown_tool(call.name, tools, servers_down or {}))
        elif (problem := argument_problem(tool, call.arguments)) is not None:
            plan.fail(call, problem)
        elif call.name == ASK_USER:
            _question(plan, call, by_call.get(call.id))
        else:
            _permission(plan, call, tool, by_call.get(call.id), decide)
        if first_stop is not None:
            plan.stop = first_stop  # one person's question at a time
    return plan


def unknown_tool(name: str, tools: Mapping[str, Tool], servers_down: Mapping[str, str]) -> str:
    """Why there is no tool ``name``: its MCP server could not start (said with its reason, not
    as a tool nobody knows, with a list of every tool there is), or no such tool."""
    server, separator, _ = name.partition("__")
    if separator and server in servers_down:
        return (
            f"MCP server '{server}' could not start: {servers_down[server]};"
            f" {name} cannot be called until it starts"
        )
    return f"there is no tool named {name!r}; available tools: {', '.join(sorted(tools))}"


def _started_elsewhere(plan: Plan, call: ToolCall, request: InputRequest | None) -> bool:
    """A call left ``running`` by an execution that is gone (a process that stopped while the
    call ran beside a request of its batch: recovery leaves a run waiting for a person as it
    is). True when it is decided again as a pending call: a call that declared itself
    idempotent is run again, as recovery does (DESIGN §4.2); any other's outcome is unknown."""
    if request is not None and request.state is InputRequestState.CANCELLED:
        plan.fail(call, cancelled_text(request))
        return False
    if request is None and call.idempotent:
        plan.decided.append(ToolStateChange(tool_call_id=call.id, to=ToolCallState.PENDING))
        return True
    plan.decided.append(
        ToolStateChange(tool_call_id=call.id, to=ToolCallState.INDETERMINATE, error=STOPPED_UNKNOWN)
    )
    return False


def _question(plan: Plan, call: ToolCall, request: InputRequest | None) -> None:
    if request is None:
        plan.stop = Stop("question", call)
    elif request.state is InputRequestState.ANSWERED:
        plan.decided.append(ToolStateChange(tool_call_id=call.id, to=ToolCallState.RUNNING))
        plan.decided.append(
            ToolStateChange(
                tool_call_id=call.id, to=ToolCallState.COMPLETED, result=str(request.answer)
            )
        )
    elif request.state is InputRequestState.CANCELLED:
        plan.fail(call, cancelled_text(request))
    else:
        plan.stop = Stop("wait")


def _permission(
    plan: Plan, call: ToolCall, tool: Tool, request: InputRequest | None, decide: Decide
) -> None:
    decision = decide(call.name, tool, plan.allowed)
    if decision == "deny":
        plan.fail(call, by_rules(call.name))
        return
    if decision == "ask":
        if request is None:
            plan.stop = Stop("approval", call, tool)
            return
        if request.state is InputRequestState.PENDING:
            plan.stop = Stop("wait")
            return
        if request.state is InputRequestState.CANCELLED:
            plan.fail(call, cancelled_text(request))
            return
        answer = request.answer if isinstance(request.answer, dict) else {}
        if answer.get("decision") == "deny":
            plan.fail(call, by_person(answer.get("reason")))
            return
        if answer.get("decision") == "allow_run":
            plan.allowed.add(call.name)
    plan.to_run.append((call, tool))
