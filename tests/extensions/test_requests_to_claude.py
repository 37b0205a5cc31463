"""What Claude receives: the real anthropic SDK against the fake Messages server on loopback, the
recorded request bodies checked for the instructions, the skill list, the phase directive and the
compaction summary."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from runtime.api import Runtime
from runtime.compaction import SUMMARISER_SYSTEM, SUMMARY_HEADER
from runtime.config import Config, Defaults
from runtime.models import RunState
from tests.fakes.anthropic_server import FakeAnthropicServer, text_response, tool_use_response

API_KEY = "sk-ant-test-SECRET-4242424242"
WAIT = 30


@pytest.fixture
async def server() -> AsyncIterator[FakeAnthropicServer]:
    async with FakeAnthropicServer() as fake:
        yield fake


def _prepare(workspace: Path) -> None:
    (workspace / "AGENTS.md").write_text("AGENTS-MARKER: the tests run with make test")
    skill = workspace / ".claude" / "skills" / "review"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\ndescription: Review a diff for bugs\n---\nREVIEW")
    phases = workspace / ".agent-tui" / "phases" / "default"
    (phases / "plan").mkdir(parents=True)
    (phases / "plan" / "PHASE.md").write_text(
        "---\ninitial: true\ntarget: build\n---\nPLAN-DIRECTIVE: plan first."
    )
    (phases / "build").mkdir()
    (phases / "build" / "PHASE.md").write_text(
        "---\ntools: [read_file]\n---\nBUILD-DIRECTIVE: carry it out."
    )
    (workspace / "big.txt").write_text("lorem ipsum dolor sit\n" * 145)  # ~1,000 tokens read


def _text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


async def test_claude_receives_instructions_skills_the_phase_directive_and_the_summary(
    server: FakeAnthropicServer, db_path: Path, workspace: Path
) -> None:
    _prepare(workspace)
    read_big = {"path": "big.txt"}
    server.add(
        tool_use_response([("toolu_1", "route", {"phase": "build", "reason": "planned"})]),
        tool_use_response([("toolu_2", "read_file", read_big)]),
        tool_use_response([("toolu_3", "read_file", read_big)]),
        text_response("SUMMARY-FROM-CLAUDE: read big.txt twice"),
        text_response("Done."),
    )
    runtime = await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        # ~1,900 tokens of system prompt and tools in the plan phase, ~550 in build; compacting
        # past 2,400 leaves build room for one read of big.txt, not for two.
        config=Config(defaults=Defaults(context_window=3000, compact_at=0.8)),
        model="anthropic:claude-sonnet-5",
        env={"ANTHROPIC_API_KEY": API_KEY, "ANTHROPIC_BASE_URL": server.base_url},
    )
    try:
        run = await runtime.start("build the thing")
        boundary = await runtime.wait(run.id, timeout=WAIT)
        assert boundary.state is RunState.COMPLETED, boundary.run.failure
    finally:
        await runtime.close()

    bodies = [r.body for r in server.requests if r.path.endswith("/messages")]
    assert len(bodies) == 5
    first = _text(bodies[0]["system"])
    assert "AGENTS-MARKER" in first
    assert "- review: Review a diff for bugs" in first
    assert "PLAN-DIRECTIVE" in first
    assert {"use_skill", "route"} <= {t["name"] for t in bodies[0]["tools"]}
    assert "BUILD-DIRECTIVE" in _text(bodies[1]["system"])
    assert "PLAN-DIRECTIVE" not in _text(bodies[1]["system"])

    summary_request = bodies[3]
    assert SUMMARISER_SYSTEM in _text(summary_request["system"])
    assert "tools" not in summary_request or not summary_request["tools"]
    assert "build the thing" in _text(summary_request["messages"])

    last = bodies[4]
    opening = _text(last["messages"][0])
    assert SUMMARY_HEADER in opening and "SUMMARY-FROM-CLAUDE" in opening
    assert "BUILD-DIRECTIVE" in _text(last["system"])  # the directive after the compaction
    assert "AGENTS-MARKER" in _text(last["system"])
    assert len(last["messages"]) < len(bodies[2]["messages"]) + 2


async def test_the_summary_call_s_tokens_count_in_the_run_and_job_totals(
    server: FakeAnthropicServer, db_path: Path, workspace: Path
) -> None:
    (workspace / "big.txt").write_text("lorem ipsum dolor sit\n" * 145)
    read_big = {"path": "big.txt"}
    server.add(
        tool_use_response([("toolu_1", "read_file", read_big)], input_tokens=100),
        tool_use_response([("toolu_2", "read_file", read_big)], input_tokens=200),
        text_response("SUMMARY: read big.txt twice", input_tokens=7001, output_tokens=333),
        text_response("Done.", input_tokens=300),
    )
    runtime = await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        # ~1,500 tokens of system prompt and built-in tools; compacting past 3,200 leaves room
        # for one read of big.txt, not for two.
        config=Config(defaults=Defaults(context_window=4000, compact_at=0.8)),
        model="anthropic:claude-sonnet-5",
        env={"ANTHROPIC_API_KEY": API_KEY, "ANTHROPIC_BASE_URL": server.base_url},
    )
    try:
        run = await runtime.start("read it twice")
        boundary = await runtime.wait(run.id, timeout=WAIT)
        assert boundary.state is RunState.COMPLETED, boundary.run.failure
        bodies = [r.body for r in server.requests if r.path.endswith("/messages")]
        assert SUMMARISER_SYSTEM in _text(bodies[2]["system"])  # the third call summarised
        finished = await runtime.get_run(run.id)
        job = await runtime.get_job(run.job_id)
        [note] = [n for n in await runtime.extensions.notes(run.id) if n.note == "compaction"]
    finally:
        await runtime.close()

    # The three steps as the fake reports them, and the summary call between them.
    assert finished.usage.input_tokens == 100 + 200 + 7001 + 300
    assert finished.usage.output_tokens == 30 + 30 + 333 + 20
    assert (job.usage.input_tokens, job.usage.output_tokens) == (7601, 413)
    assert note.data["usage"]["input_tokens"] == 7001
    assert finished.cost_usd > 0 and job.cost_usd == pytest.approx(finished.cost_usd)


async def test_claude_sees_each_parallel_phase_run_in_its_phase_and_the_parent_back_with_both(
    server: FakeAnthropicServer, db_path: Path, workspace: Path
) -> None:
    root = workspace / ".agent-tui" / "phases" / "default"
    for phase, text in (
        ("plan", "---\ninitial: true\ntarget: [frontend, backend]\n---\nPLAN-DIRECTIVE: split."),
        ("frontend", "---\ntools: [read_file]\n---\nFRONTEND-DIRECTIVE: screens."),
        ("backend", "---\ntools: [list_dir]\n---\nBACKEND-DIRECTIVE: the API."),
    ):
        (root / phase).mkdir(parents=True)
        (root / phase / "PHASE.md").write_text(text)
    split = {"phase": ["frontend", "backend"], "reason": "split", "payload": "a todo app"}
    server.add(
        tool_use_response([("toolu_1", "route", split)]),
        text_response("BRANCH-RESULT-ONE"),  # the two children ask in either order
        text_response("BRANCH-RESULT-TWO"),
        text_response("Both halves done."),
    )
    runtime = await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=Config(),
        model="anthropic:claude-sonnet-5",
        env={"ANTHROPIC_API_KEY": API_KEY, "ANTHROPIC_BASE_URL": server.base_url},
    )
    try:
        run = await runtime.start("make a todo app")
        boundary = await runtime.wait(run.id, timeout=WAIT)
        assert boundary.state is RunState.COMPLETED, boundary.run.failure
        children = [r for r in await runtime.job_runs(run.job_id) if r.parent_run_id == run.id]
    finally:
        await runtime.close()

    assert len(children) == 2 and all(c.state is RunState.COMPLETED for c in children)
    bodies = [r.body for r in server.requests if r.path.endswith("/messages")]
    assert len(bodies) == 4
    assert "PLAN-DIRECTIVE" in _text(bodies[0]["system"])
    tools_by_phase = {"FRONTEND": {"read_file"}, "BACKEND": {"list_dir"}}
    seen = set()
    for body in bodies[1:3]:
        system = _text(body["system"])
        [phase] = [p for p in ("PLAN", "FRONTEND", "BACKEND") if f"{p}-DIRECTIVE" in system]
        seen.add(phase)
        assert {t["name"] for t in body["tools"]} == tools_by_phase[phase]  # and no route
        assert "a todo app" in _text(body["messages"])
    assert seen == {"FRONTEND", "BACKEND"}

    last = bodies[3]
    assert "PLAN-DIRECTIVE" in _text(last["system"])
    assert "FRONTEND-DIRECTIVE" not in _text(last["system"])
    assert "route" in {t["name"] for t in last["tools"]}
    [result] = [b for b in last["messages"][-1]["content"] if b["type"] == "tool_result"]
    assert result["tool_use_id"] == "toolu_1" and not result.get("is_error")
    sent = _text(result["content"])
    assert "BRANCH-RESULT-ONE" in sent and "BRANCH-RESULT-TWO" in sent
    assert "back in phase plan" in sent
