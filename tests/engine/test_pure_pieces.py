"""The pure pieces of the engine, without a store: the stream fold and the tool-call plan."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime.config import Config
from runtime.engine.catalog import unknown_tool_warnings
from runtime.engine.stream_fold import Fold
from runtime.engine.tool_decision import plan_calls
from runtime.errors import ModelError
from runtime.models import (
    InputKind,
    InputRequest,
    InputRequestState,
    ToolCall,
    ToolCallState,
    Usage,
)
from runtime.providers.base import (
    StopReason,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageReport,
)
from runtime.results import CHARS_PER_TOKEN
from runtime.tools.builtin import builtin_tools


def test_the_fold_returns_what_each_text_piece_shows_and_builds_the_message() -> None:
    fold = Fold()
    shown = [fold.apply(TextDelta(text="Hel")), fold.apply(TextDelta(text="lo"))]
    assert [(s.offset, s.text) for s in shown if s] == [(0, "Hel"), (3, "lo")]
    fold.apply(ToolCallStart(index=0, id="t0", name="read_file"))
    fold.apply(ToolCallDelta(index=0, json_fragment='{"path": "a"}'))
    fold.apply(ToolCallEnd(index=0))
    fold.apply(StopReason(reason="tool_use"))
    content, calls = fold.result(dict(builtin_tools()))
    assert content[0].model_dump()["text"] == "Hello"
    assert [(c.name, c.arguments, c.idempotent) for c in calls] == [
        ("read_file", {"path": "a"}, True)
    ]
    assert fold.stop_reason == "tool_use"


def test_a_message_cut_short_counts_the_reported_input_and_estimates_its_output() -> None:
    fold = Fold()
    assert fold.usage_so_far() == Usage()  # nothing reported, nothing shown
    # Anthropic's message_start: the input and cache tokens, a placeholder output count.
    started = Usage(input_tokens=1200, output_tokens=1, cache_read_tokens=300)
    fold.apply(UsageReport(usage=started))
    assert fold.usage_so_far() == started
    fold.apply(ThinkingDelta(text="Let me look at it. "))
    fold.apply(TextDelta(text="The answer is "))
    fold.apply(ToolCallStart(index=0, id="t0", name="read_file"))
    fold.apply(ToolCallDelta(index=0, json_fragment='{"path": "README.md"}'))
    chars = len("Let me look at it. ") + len("The answer is ") + len('{"path": "README.md"}')
    estimate = -(-chars // CHARS_PER_TOKEN)
    assert fold.usage_so_far() == started.model_copy(update={"output_tokens": estimate})
    # A count the provider reported that is higher than the estimate stands.
    fold.apply(UsageReport(usage=Usage(output_tokens=estimate + 50)))
    assert fold.usage_so_far().output_tokens == estimate + 50


@pytest.mark.parametrize(
    "events",
    [
        [ToolCallDelta(index=0, json_fragment="{}")],
        [ToolCallEnd(index=3)],
        [ToolCallStart(index=0, id="a", name="x"), ToolCallStart(index=0, id="b", name="y")],
        [
            ToolCallStart(index=0, id="a", name="x"),
            ToolCallEnd(index=0),
            ToolCallDelta(index=0, json_fragment="{}"),
        ],
    ],
    ids=["arguments-before-start", "end-before-start", "started-twice", "arguments-after-end"],
)
def test_the_fold_rejects_orderings_no_provider_may_send(events: list[Any]) -> None:
    fold = Fold()
    with pytest.raises(ModelError) as raised:
        for event in events:
            fold.apply(event)
    assert raised.value.code == "protocol_error"
    assert raised.value.retryable


def _call(n: int, name: str, arguments: dict[str, Any], state: ToolCallState) -> ToolCall:
    return ToolCall(
        id=f"c{n}",
        run_id="r",
        job_id="j",
        message_id="m",
        index=n,
        provider_id=f"p{n}",
        name=name,
        arguments=arguments,
        state=state,
        step=1,
        created_at=0.0,
    )


def test_the_text_since_any_offset_is_the_texts_tail_for_readers_at_their_own_pace() -> None:
    """Two readers (the bus, the draft kept on a clock) read on from where each stopped, and
    anyone may ask from any offset, before and after the text is joined whole."""
    fold = Fold()
    text = "".join(f"piece {index}; " for index in range(2000))
    pieces = [text[i : i + 7] for i in range(0, len(text), 7)]
    bus_at = draft_at = 0
    for count, piece in enumerate(pieces, start=1):
        fold.apply(TextDelta(text=piece))
        if count % 50 == 0:
            assert fold.text_since(bus_at) == text[bus_at : fold.text_length]
            bus_at = fold.text_length
        if count % 333 == 0:
            assert fold.text_since(draft_at) == text[draft_at : fold.text_length]
            draft_at = fold.text_length
    assert fold.text_length == len(text)
    for start in (0, 1, 6, 7, 8, 5000, len(text) - 1, len(text), bus_at, draft_at):
        assert fold.text_since(start) == text[start:]
    assert fold.all_text() == text
    for start in (0, 3, bus_at, len(text)):
        assert fold.text_since(start) == text[start:]
    fold.apply(TextDelta(text=" and more"))
    assert fold.text_since(len(text)) == " and more"
    assert fold.text_since(bus_at) == (text + " and more")[bus_at:]


def test_the_plan_decides_every_call_and_runs_the_allowed_ones_beside_the_first_question() -> None:
    tools = dict(builtin_tools())
    calls = [
        _call(0, "nope", {}, ToolCallState.PENDING),
        _call(1, "read_file", {"_invalid_json": "{"}, ToolCallState.PENDING),
        _call(2, "write_file", {"path": "a", "content": "x"}, ToolCallState.PENDING),
        _call(3, "read_file", {"path": "a"}, ToolCallState.PENDING),
        _call(4, "shell", {"command": "ls"}, ToolCallState.PENDING),
        _call(5, "read_file", {"path": "b"}, ToolCallState.PENDING),
    ]
    rules = {"write_file": "deny", "read_file": "allow", "shell": "ask"}
    plan = plan_calls(
        calls, [], tools, started_here=set(), allowed=set(), decide=lambda n, t, a: rules[n]
    )
    assert [(c.tool_call_id, c.to) for c in plan.decided] == [
        ("c0", ToolCallState.FAILED),
        ("c1", ToolCallState.FAILED),
        ("c2", ToolCallState.FAILED),
    ]
    assert "no tool named 'nope'" in (plan.decided[0].error or "")
    # Allowed calls before and after the one that asks run while it waits; a second call
    # that asks stays pending until the first is answered.
    calls.append(_call(6, "shell", {"command": "pwd"}, ToolCallState.PENDING))
    calls.append(_call(7, "write_file", {"path": "b", "content": "y"}, ToolCallState.PENDING))
    plan = plan_calls(
        calls, [], tools, started_here=set(), allowed=set(), decide=lambda n, t, a: rules[n]
    )
    assert [c.id for c, _ in plan.to_run] == ["c3", "c5"]
    assert plan.stop is not None and plan.stop.kind == "approval"
    assert plan.stop.call is not None and plan.stop.call.id == "c4"
    assert [c.tool_call_id for c in plan.decided] == ["c0", "c1", "c2", "c7"]


def test_a_call_started_by_a_gone_execution_is_indeterminate_and_allow_run_answers_count() -> None:
    tools = dict(builtin_tools())
    calls = [
        _call(0, "shell", {"command": "ls"}, ToolCallState.RUNNING),
        _call(1, "shell", {"command": "pwd"}, ToolCallState.PENDING),
    ]
    answered = InputRequest(
        id="q",
        run_id="r",
        job_id="j",
        kind=InputKind.APPROVAL,
        prompt="Allow shell?",
        state=InputRequestState.ANSWERED,
        answer={"decision": "allow_run"},
        detail={"tool": "shell"},
        created_at=0.0,
    )

    def decide(name: str, tool: Any, allowed: set[str]) -> str:
        return "allow" if name in allowed else "ask"

    plan = plan_calls(calls, [answered], tools, started_here=set(), allowed=set(), decide=decide)
    assert [(c.tool_call_id, c.to) for c in plan.decided] == [("c0", ToolCallState.INDETERMINATE)]
    assert [c.id for c, _ in plan.to_run] == ["c1"]
    assert plan.stop is None
    assert plan.allowed == {"shell"}


def test_an_idempotent_call_a_gone_execution_left_running_is_run_again_not_indeterminate() -> None:
    """A process that stopped while a read ran beside its batch's approval left the call
    running (recovery leaves a run waiting for a person as it is): once answered, the read
    runs again, as recovery re-runs idempotent calls (DESIGN §4.2)."""
    tools = dict(builtin_tools())
    read = _call(0, "read_file", {"path": "a"}, ToolCallState.RUNNING)
    read = read.model_copy(update={"idempotent": True})
    plan = plan_calls(
        [read], [], tools, started_here=set(), allowed=set(), decide=lambda n, t, a: "allow"
    )
    assert [(c.tool_call_id, c.to) for c in plan.decided] == [("c0", ToolCallState.PENDING)]
    assert [c.id for c, _ in plan.to_run] == ["c0"]


def test_an_agents_tool_naming_no_configured_mcp_server_is_a_warning_with_the_closest_server(
    tmp_path: Path,
) -> None:
    """`githb__create_issue` left the agent silently without GitHub's tools: the tool part is
    known only once the server starts, but the server part is known from the config."""
    config = Config.model_validate(
        {
            "agents": {
                "x": {
                    "tools": [
                        "githb__create_issue",
                        "github__create_issue",
                        "jira__*",
                        "*__read",
                        "github__*",
                        "my_server__read",
                        "my.server__read",
                        "acme__tools__query",
                    ]
                }
            },
            "mcp_servers": {
                "github": {"type": "stdio", "command": "github-mcp"},
                "postgres": {"type": "stdio", "command": "pg-mcp"},
                "my.server": {"type": "stdio", "command": "my-mcp"},
                "acme__tools": {"type": "stdio", "command": "acme-mcp"},
            },
        }
    )

    warnings = unknown_tool_warnings(config, "x", tmp_path, ["read_file"])

    # A server's tools are named as the model sees them: `my.server`'s `my_server__read`.
    assert [w.split(": ", 1)[1] for w in warnings] == [
        "no MCP server named 'githb' for 'githb__create_issue' (did you mean"
        " 'github__create_issue'?); the agent runs without it",
        "no MCP server named 'jira' for 'jira__*' (servers: acme__tools, github, my.server,"
        " postgres); the agent runs without it",
        "no MCP server named 'my.server' for 'my.server__read' (did you mean"
        " 'my_server__read'?); the agent runs without it",
    ]
