"""Hooks: real scripts decide, rewrite results, and are killed at their timeout or when
agent-tui dies."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from runtime.hooks import (
    HookEntry,
    HooksConfig,
    load_claude_hooks,
    run_after_tool,
    run_before_tool,
)
from tests.tools.helpers import is_gone

ROOT = Path(__file__).resolve().parents[2]


def _script(path: Path, text: str) -> str:
    path.write_text("#!/usr/bin/env python3\n" + text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@pytest.fixture
def no_lock_files(tmp_path: Path) -> str:
    return _script(
        tmp_path / "no-lock.py",
        "import json, sys\n"
        "call = json.load(sys.stdin)\n"
        "if call['arguments'].get('path', '').endswith('.lock'):\n"
        "    print(json.dumps({'decision': 'deny', 'reason': 'lock files are generated'}))\n",
    )


async def test_a_hook_denies_write_file_on_lock_paths_and_allows_the_rest(
    workspace: Path, no_lock_files: str
) -> None:
    hooks = HooksConfig(
        before_tool=[
            HookEntry(command=no_lock_files, matcher="write_file", source="agent-tui.toml")
        ]
    )
    denied = await run_before_tool(
        hooks, tool_name="write_file", arguments={"path": "poetry.lock"}, workspace=workspace
    )
    assert (denied.decision, denied.reason) == ("deny", "lock files are generated")
    assert no_lock_files in denied.hook and "agent-tui.toml" in denied.hook
    allowed = await run_before_tool(
        hooks, tool_name="write_file", arguments={"path": "notes.md"}, workspace=workspace
    )
    assert allowed.decision == "allow" and allowed.failure is None
    other_tool = await run_before_tool(
        hooks, tool_name="edit_file", arguments={"path": "x.lock"}, workspace=workspace
    )
    assert other_tool.decision == "allow"


async def test_an_after_tool_hook_rewrites_the_result_the_model_sees(
    workspace: Path, tmp_path: Path
) -> None:
    redact = _script(
        tmp_path / "redact.py",
        "import json, sys\n"
        "call = json.load(sys.stdin)\n"
        "print(json.dumps({'result': call['result'].replace('hunter2', '[redacted]')}))\n",
    )
    hooks = HooksConfig(after_tool=[HookEntry(command=redact, matcher="read_*")])
    outcome = await run_after_tool(
        hooks,
        tool_name="read_file",
        arguments={"path": "cfg"},
        result="password = hunter2",
        is_error=False,
        workspace=workspace,
    )
    assert outcome.result == "password = [redacted]"
    untouched = await run_after_tool(
        hooks, tool_name="list_dir", arguments={}, result="a", is_error=False, workspace=workspace
    )
    assert untouched.result is None


async def test_a_hook_that_hangs_is_killed_at_its_timeout_with_a_clear_failure(
    workspace: Path, tmp_path: Path
) -> None:
    pid_file = tmp_path / "hook.pid"
    # sh starts in a millisecond, so the pid is written long before the timeout even under load.
    hang = f"echo $$ > {pid_file}; exec sleep 600"
    hooks = HooksConfig(before_tool=[HookEntry(command=hang, timeout=2)])
    outcome = await run_before_tool(hooks, tool_name="shell", arguments={}, workspace=workspace)
    assert outcome.failure is not None
    assert "did not answer within 2 s and was killed" in outcome.failure
    assert is_gone(int(pid_file.read_text()))


async def test_exit_status_2_denies_with_stderr_and_other_failures_stop_the_call(
    workspace: Path, tmp_path: Path
) -> None:
    block = _script(
        tmp_path / "block.py", "import sys\nsys.stderr.write('no shells')\nsys.exit(2)\n"
    )
    crash = _script(tmp_path / "crash.py", "import sys\nsys.stderr.write('boom')\nsys.exit(1)\n")
    denied = await run_before_tool(
        HooksConfig(before_tool=[HookEntry(command=block)]),
        tool_name="shell",
        arguments={},
        workspace=workspace,
    )
    assert (denied.decision, denied.reason) == ("deny", "no shells")
    failed = await run_before_tool(
        HooksConfig(before_tool=[HookEntry(command=crash)]),
        tool_name="shell",
        arguments={},
        workspace=workspace,
    )
    assert failed.failure is not None and "status 1: boom" in failed.failure


async def test_claude_code_pre_tool_use_entries_run_with_its_field_names(
    workspace: Path, tmp_path: Path
) -> None:
    seen = tmp_path / "seen.json"
    guard = _script(
        tmp_path / "guard.py",
        "import json, sys\n"
        "call = json.load(sys.stdin)\n"
        f"open({str(seen)!r}, 'w').write(json.dumps(call))\n"
        "print(json.dumps({'hookSpecificOutput': {'hookEventName': 'PreToolUse',"
        " 'permissionDecision': 'deny', 'permissionDecisionReason': 'not today'}}))\n",
    )
    (workspace / ".claude").mkdir()
    (workspace / ".claude" / "settings.json").write_text(
        json.dumps(
            {
                "hooks": {
                    "PreToolUse": [
                        {"matcher": "Write|Edit", "hooks": [{"type": "command", "command": guard}]},
                        {"matcher": "*", "hooks": [{"type": "prompt", "prompt": "judge it"}]},
                    ],
                    "SessionStart": [{"hooks": [{"type": "command", "command": "true"}]}],
                }
            }
        )
    )
    hooks, report = load_claude_hooks(workspace, env={"HOME": str(tmp_path / "home")})
    assert len(report.used) == 1 and "Write|Edit" in report.used[0]
    assert any("only command hooks" in s for s in report.skipped)
    assert any("SessionStart" in s and "no such event" in s for s in report.skipped)
    outcome = await run_before_tool(
        hooks, tool_name="edit_file", arguments={"path": "a.py"}, workspace=workspace
    )
    assert (outcome.decision, outcome.reason) == ("deny", "not today")
    payload = json.loads(seen.read_text())
    assert payload["hook_event_name"] == "PreToolUse"
    assert payload["tool_name"] == "Edit"
    assert payload["tool_input"]["file_path"] == str((workspace / "a.py").resolve())
    passes = await run_before_tool(hooks, tool_name="shell", arguments={}, workspace=workspace)
    assert passes.decision == "allow"


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        ("ANTHROPIC_API_KEY=sk-ant-test123 ./hooks/no-notes.sh", "./hooks/no-notes.sh"),
        ("A=1 B='x y' ./check.sh --mode=strict", "./check.sh --mode=strict"),
        ("TOKEN='a;b' ./one && env KEY=v ./two | Z=\"q\" jq .", "./one && ./two | jq ."),
        ("echo $$ > pid; exec sleep 300", "echo $$ > pid; exec sleep 300"),
        # Found in review: assignments not in front of a program kept their values.
        ("env -i TOKEN=sk-1 ./x.sh", "env -i TOKEN=… ./x.sh"),
        ("sudo TOKEN=sk-1 ./x.sh", "sudo TOKEN=… ./x.sh"),
        ("if true; then T=sk-1 cmd; fi", "if true; then T=… cmd; fi"),
        ("{ T=sk-1 cmd; }", "{ T=… cmd; }"),
        # Found by a new-user trial: a secret passed as an argument was shown.
        ("API_KEY=sekrit99 ./hooks/fail.sh --token=xyz789", "./hooks/fail.sh --token=…"),
        ("./x.sh --api-key 'a b' --mode strict", "./x.sh --api-key … --mode strict"),
        (
            "./x.sh --password=p; ./y --auth-header=Bearer",
            "./x.sh --password=…; ./y --auth-header=…",
        ),
        ("./x.sh sk-abcdefgh12 ghp_abcdefgh12 xoxb-1-2", "./x.sh … … …"),
        ("./x.sh --no-auth --token -v", "./x.sh --no-auth --token -v"),
    ],
)
def test_a_hook_is_named_without_the_environment_assignments_before_its_programs(
    command: str, shown: str
) -> None:
    entry = HookEntry(command=command, source="agent-tui.toml")
    assert entry.shown_command() == shown
    assert entry.label() == f"hook `{shown}` (agent-tui.toml)"


HOOK_CHILD = """
import asyncio, sys
from pathlib import Path
from runtime.hooks import HookEntry, HooksConfig, fire_and_forget, run_after_tool, run_before_tool

async def main(event, command, workspace):
    entry, ws = HookEntry(command=command, timeout=600), Path(workspace)
    if event == "before_tool":
        hooks = HooksConfig(before_tool=[entry])
        await run_before_tool(hooks, tool_name="search", arguments={}, workspace=ws)
    elif event == "after_tool":
        hooks = HooksConfig(after_tool=[entry])
        await run_after_tool(
            hooks, tool_name="search", arguments={}, result="", is_error=False, workspace=ws
        )
    else:
        fire_and_forget([entry], event, {"run_id": "r"}, ws)
    await asyncio.Event().wait()

asyncio.run(main(*sys.argv[1:]))
"""


def _wait_for(condition: Callable[[], bool], what: str, *, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)  # polling a file or the process table, bounded by the deadline


@pytest.mark.slow
@pytest.mark.parametrize(
    "event", ["before_tool", "after_tool", "on_input_required", "on_run_finished"]
)
def test_a_hook_and_the_processes_it_started_die_when_agent_tui_is_killed_with_sigkill(
    workspace: Path, tmp_path: Path, event: str
) -> None:
    pids_file = tmp_path / "hook.pids"
    # The hook's shell and a child of it, both sleeping far longer than the test waits.
    hook = f"sleep 600 & echo $$ $! > {pids_file}.new && mv {pids_file}.new {pids_file}; wait"
    proc = subprocess.Popen(
        [sys.executable, "-c", HOOK_CHILD, event, hook, str(workspace)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    pids: list[int] = []
    try:
        _wait_for(pids_file.exists, "the hook to start", seconds=60)
        pids = [int(pid) for pid in pids_file.read_text().split()]
        assert len(pids) == 2 and not any(is_gone(pid) for pid in pids)
        proc.send_signal(signal.SIGKILL)  # agent-tui alone, not the hook's process group
        proc.wait(timeout=30)
        _wait_for(lambda: all(is_gone(pid) for pid in pids), "the hook to die", seconds=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        for pid in pids:  # a survivor must not outlive a failed test either
            if not is_gone(pid):
                os.kill(pid, signal.SIGKILL)
