"""Phases: read from PHASE.md folders; the routing rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.phases import decide_route, discover_phases, route_tool_schema


def _phase(root: Path, folder: str, text: str) -> None:
    (root / folder).mkdir(parents=True)
    (root / folder / "PHASE.md").write_text(text)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws" / ".agent-tui" / "phases" / "default"
    _phase(
        root,
        "plan",
        "---\ninitial: true\ntools: [read_file, list_dir]\ntarget: [build, test]\n---\n"
        "PLAN-DIRECTIVE\n",
    )
    _phase(root, "build", "---\ntarget: plan\n---\nBUILD-DIRECTIVE\n")
    _phase(root, "test", "---\ntools: shell\n---\nTEST-DIRECTIVE\n")
    _phase(root, "broken", "---\ntarget: nowhere\n---\nx\n")
    return tmp_path / "ws"


def test_phases_are_read_with_their_directives_tools_and_targets(workspace: Path) -> None:
    found = discover_phases(workspace, "default", env={"HOME": str(workspace / "nohome")})
    assert sorted(found.phases) == ["broken", "build", "plan", "test"]
    assert found.initial is not None and found.initial.id == "plan"
    plan = found.phases["plan"]
    assert plan.directive == "PLAN-DIRECTIVE"
    assert plan.allows_tool("read_file") and plan.allows_tool("route")
    assert not plan.allows_tool("shell")
    assert found.phases["build"].allows_tool("shell")
    assert any("unknown phases" in p and "nowhere" in p for p in found.problems)
    schema = route_tool_schema(found)
    assert schema["properties"]["phase"]["anyOf"][0]["enum"] == ["broken", "build", "plan", "test"]


def test_routing_moves_fans_out_or_refuses_with_a_reason(workspace: Path) -> None:
    found = discover_phases(workspace, "default", env={"HOME": str(workspace / "nohome")})
    assert decide_route(found, "plan", "build").kind == "move"
    fan = decide_route(found, "plan", ["build", "test"])
    assert (fan.kind, fan.source, fan.targets) == ("fan_out", "plan", ("build", "test"))
    barred = decide_route(found, "build", "test")
    assert barred.kind == "refused" and "may route only to: plan" in barred.error
    assert "no such phase: deploy" in decide_route(found, "plan", "deploy").error
    assert decide_route(found, "test", "plan").kind == "move"
