"""`kill -9` a real `agent-tui run` during a phase transition and during a compaction, then
`retry` it: the run goes on in the right phase, its transcript stays paired, and nothing is
summarised twice. Claude is the fake Messages server, as its own process on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sqlite3
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from runtime.compaction import SUMMARISER_SYSTEM, SUMMARY_HEADER
from runtime.engine.extensions import current_phase
from runtime.events import RunNoted
from runtime.models import Message, RunState
from runtime.phases import discover_phases
from runtime.store.sqlite import SqliteStore
from tests.cli.harness import Cli, boundary_of, json_lines, kill_hard
from tests.fakes.anthropic_server import (
    gate,
    message_delta,
    message_start,
    spawn_fake_server,
    stream,
    text_block,
    text_response,
    tool_use_response,
)

pytestmark = pytest.mark.slow

API_KEY = "sk-ant-e2e-SECRET-0123456789"
MODEL = "anthropic:claude-sonnet-5"
WAIT = 30.0


def _wait_for(condition: Any, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _stored(db: Path, run_id: str) -> tuple[RunState, list[Message], list[RunNoted]]:
    async def read() -> tuple[RunState, list[Message], list[RunNoted]]:
        store = SqliteStore(db)
        await store.open()
        try:
            run = await store.get_run(run_id)
            messages = await store.list_messages(run_id, limit=10_000)
            notes = await store.list_notes(run_ids=[run_id])
            return run.state, messages, notes
        finally:
            await store.close()

    return asyncio.run(read())


def _paired(messages: list[Message]) -> None:
    uses = [u.id for m in messages for u in m.tool_uses]
    results = Counter(r.tool_use_id for m in messages for r in m.tool_results)
    assert uses and all(results[u] == 1 for u in uses) and set(results) == set(uses)


def _phases(workspace: Path) -> None:
    root = workspace / ".agent-tui" / "phases" / "default"
    (root / "plan").mkdir(parents=True)
    (root / "plan" / "PHASE.md").write_text(
        "---\ninitial: true\ntarget: build\n---\nPLAN-DIRECTIVE: plan first."
    )
    (root / "build").mkdir()
    (root / "build" / "PHASE.md").write_text("---\ntarget: plan\n---\nBUILD-DIRECTIVE: build.")


def _start(cli: Cli) -> tuple[Any, str]:
    proc = cli.spawn("run", "build the thing", "--json", "--model", MODEL)
    assert proc.stdout is not None
    first = json.loads(proc.stdout.readline())
    return proc, str(first["run_id"])


def test_kill_during_a_phase_transition_then_retry_continues_in_the_new_phase(
    cli: Cli, tmp_path: Path
) -> None:
    _phases(cli.workspace)
    ready = tmp_path / "route-hook-running"
    config = cli.workspace / "agent-tui.toml"
    config.write_text(
        "[[hooks.before_tool]]\n"
        'matcher = "route"\n'
        f'command = "echo $$ > {ready}; exec sleep 300"\n'
        "timeout = 600\n"
    )
    script = [
        tool_use_response([("toolu_r", "route", {"phase": "build", "reason": "planned"})]),
        tool_use_response([("toolu_l", "list_dir", {"path": "."})]),
        text_response("Built."),
    ]
    with spawn_fake_server(script, directory=tmp_path) as server:
        cli.env = {**cli.env, "ANTHROPIC_API_KEY": API_KEY, "ANTHROPIC_BASE_URL": server.base_url}
        proc, run_id = _start(cli)
        try:
            _wait_for(lambda: ready.exists() and ready.read_text().strip(), "the route hook")
        finally:
            kill_hard(proc)
            # The hook runs in a session of its own (a timeout kills its whole group): the
            # process that held the transition outlives the kill of agent-tui; end it here.
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.killpg(int(ready.read_text().strip()), signal.SIGKILL)
        config.write_text("")  # the hook that held the transition is gone
        retried = cli.run("retry", run_id, "--json")
        assert retried.returncode == 0, retried.stderr
        assert boundary_of(json_lines(retried.stdout))["state"] == "completed"
        bodies = [r["body"] for r in server.requests() if r["path"].endswith("/messages")]

    state, messages, notes = _stored(cli.db, run_id)
    assert state is RunState.COMPLETED
    _paired(messages)
    phases = discover_phases(cli.workspace, "default")
    assert current_phase(messages, phases) == "build"
    assert [n.text for n in notes if n.note == "phase"] == [
        "phase: starts in plan",
        "phase: plan → build (planned)",
    ]
    assert len(bodies) == 3
    assert "BUILD-DIRECTIVE" in json.dumps(bodies[1]["system"])
    assert "PLAN-DIRECTIVE" not in json.dumps(bodies[1]["system"])


def _held_summary() -> dict[str, Any]:
    return stream(
        [
            message_start(input_tokens=50),
            *text_block(0, ["SUMMARY-LOST"]),
            gate("summary"),
            message_delta("end_turn", output_tokens=5),
            {"event": "message_stop", "data": {"type": "message_stop"}},
        ]
    )


def test_kill_during_a_compaction_then_retry_summarises_once_and_finishes(
    cli: Cli, tmp_path: Path
) -> None:
    (cli.workspace / "big.txt").write_text("lorem ipsum dolor sit\n" * 145)
    # ~1,500 tokens of system prompt and built-in tools; compacting past 3,200 leaves room for
    # one read of big.txt, not for two.
    (cli.workspace / "agent-tui.toml").write_text(
        "[defaults]\ncontext_window = 4000\ncompact_at = 0.8\n"
    )
    read_big = {"path": "big.txt"}
    script = [
        tool_use_response([("toolu_1", "read_file", read_big)]),
        tool_use_response([("toolu_2", "read_file", read_big)]),
        _held_summary(),
        text_response("SUMMARY-KEPT: read big.txt twice"),
        text_response("Done."),
    ]
    with spawn_fake_server(script, directory=tmp_path) as server:
        cli.env = {**cli.env, "ANTHROPIC_API_KEY": API_KEY, "ANTHROPIC_BASE_URL": server.base_url}

        def summary_asked() -> bool:
            return any(
                SUMMARISER_SYSTEM in json.dumps(r["body"].get("system", ""))
                for r in server.requests()
                if isinstance(r.get("body"), dict)
            )

        proc, run_id = _start(cli)
        try:
            _wait_for(summary_asked, "the summary request")
        finally:
            kill_hard(proc)
        _, _, notes = _stored(cli.db, run_id)
        assert not [n for n in notes if n.note == "compaction"]  # nothing half-recorded
        retried = cli.run("retry", run_id, "--json")
        assert retried.returncode == 0, retried.stderr
        assert boundary_of(json_lines(retried.stdout))["state"] == "completed"
        bodies = [r["body"] for r in server.requests() if r["path"].endswith("/messages")]

    state, messages, notes = _stored(cli.db, run_id)
    assert state is RunState.COMPLETED
    _paired(messages)
    compactions = [n for n in notes if n.note == "compaction"]
    assert len(compactions) == 1
    assert compactions[0].data["summary"] == "SUMMARY-KEPT: read big.txt twice"
    summaries = [b for b in bodies if SUMMARISER_SYSTEM in json.dumps(b["system"])]
    assert len(summaries) == 2  # the one cut by the kill, then the one kept
    final = json.dumps(bodies[-1]["messages"][0])
    assert SUMMARY_HEADER in final and "SUMMARY-KEPT" in final and "SUMMARY-LOST" not in final
    assert [m.role.value for m in messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]


def _parallel_phases(workspace: Path) -> None:
    root = workspace / ".agent-tui" / "phases" / "default"
    for phase, text in (
        ("plan", "---\ninitial: true\ntarget: [frontend, backend]\n---\nPLAN-DIRECTIVE: split."),
        ("frontend", "---\ntools: [read_file]\n---\nFRONTEND-DIRECTIVE: screens."),
        ("backend", "---\ntools: [list_dir]\n---\nBACKEND-DIRECTIVE: the API."),
    ):
        (root / phase).mkdir(parents=True)
        (root / phase / "PHASE.md").write_text(text)


def _children(db: Path, run_id: str) -> list[tuple[str, str]]:
    """(id, state) of the run's child runs, read without opening a store."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        rows = conn.execute(
            "SELECT id, state FROM runs WHERE parent_run_id = ? ORDER BY n", (run_id,)
        ).fetchall()
    return [(str(i), str(s)) for i, s in rows]


def _held_branch() -> dict[str, Any]:
    return stream(
        [
            message_start(input_tokens=20),
            *text_block(0, ["BRANCH-LOST"]),
            gate("branch"),
            message_delta("end_turn", output_tokens=5),
            {"event": "message_stop", "data": {"type": "message_stop"}},
        ]
    )


def test_kill_while_parallel_phase_runs_work_then_retry_resumes_them_without_rerunning_one(
    cli: Cli, tmp_path: Path
) -> None:
    _parallel_phases(cli.workspace)
    split = {"phase": ["frontend", "backend"], "reason": "split"}
    script = [
        tool_use_response([("toolu_r", "route", split)]),
        text_response("FIRST-BRANCH-RESULT"),  # whichever child asks first finishes
        _held_branch(),  # the other is held, and the process is killed
        text_response("SECOND-BRANCH-RESULT"),  # that child again, after the retry
        text_response("Both halves done."),
    ]
    with spawn_fake_server(script, directory=tmp_path) as server:
        cli.env = {**cli.env, "ANTHROPIC_API_KEY": API_KEY, "ANTHROPIC_BASE_URL": server.base_url}
        proc, run_id = _start(cli)
        try:

            def one_done_one_held() -> bool:
                asked = [r for r in server.requests() if r["path"].endswith("/messages")]
                states = [s for _, s in _children(cli.db, run_id)]
                return len(asked) >= 3 and states.count("completed") == 1

            _wait_for(one_done_one_held, "one phase run finished and the other held")
        finally:
            kill_hard(proc)
        before = _children(cli.db, run_id)
        retried = cli.run("retry", run_id, "--json")
        assert retried.returncode == 0, retried.stderr
        assert boundary_of(json_lines(retried.stdout))["state"] == "completed"
        bodies = [r["body"] for r in server.requests() if r["path"].endswith("/messages")]

    after = _children(cli.db, run_id)
    assert [i for i, _ in after] == [i for i, _ in before] and len(after) == 2  # none new
    assert [s for _, s in after] == ["completed", "completed"]
    assert len(bodies) == 5

    def phase_of(body: dict[str, Any]) -> str:
        system = json.dumps(body["system"])
        return next(p for p in ("FRONTEND", "BACKEND", "PLAN") if f"{p}-DIRECTIVE" in system)

    finished_first, held = phase_of(bodies[1]), phase_of(bodies[2])
    assert {finished_first, held} == {"FRONTEND", "BACKEND"}
    # The finished child was not asked again; the held one was, and finished.
    assert [phase_of(b) for b in bodies] == ["PLAN", finished_first, held, held, "PLAN"]

    state, messages, notes = _stored(cli.db, run_id)
    assert state is RunState.COMPLETED
    _paired(messages)
    result = json.dumps(bodies[-1]["messages"][-1])
    assert "FIRST-BRANCH-RESULT" in result and "SECOND-BRANCH-RESULT" in result
    assert "BRANCH-LOST" not in result
    assert "PLAN-DIRECTIVE" in json.dumps(bodies[-1]["system"])
    assert [n.text for n in notes if n.note == "phase"] == [
        "phase: starts in plan",
        "phase: plan → frontend, backend in parallel, back in plan (split)",
    ]
