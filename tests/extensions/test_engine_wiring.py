"""The extension points wired through the engine (DESIGN §16), with a scripted model, a real
SQLite store, the real built-in tools and real hook scripts."""

from __future__ import annotations

import asyncio
import hashlib
import json
import stat
import sys
from pathlib import Path

import pytest

from runtime.api import Runtime
from runtime.compaction import SUMMARISER_SYSTEM, SUMMARY_HEADER
from runtime.config import AgentConfig, Config, Defaults, Permissions, load_config
from runtime.errors import InvalidInput
from runtime.hooks import HookEntry, HooksConfig
from runtime.models import Role, RunState, ToolCallState, Usage
from runtime.providers.base import ModelRequest
from tests.extensions.conftest import Factory
from tests.fakes.scripted import ScriptedProvider, Turn
from tests.tools.helpers import is_gone

WAIT = 20


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def script(path: Path, body: str) -> str:
    """A real hook script run by this Python; returns the command line."""
    write(path, body)
    return f"{sys.executable} {path}"


# --- instructions ----------------------------------------------------------------------------


async def test_agents_and_claude_files_join_the_system_prompt_in_order_and_the_run_records_them(
    make_runtime: Factory, workspace: Path, user_home: Path
) -> None:
    (workspace / ".git").mkdir()
    user_file = write(user_home / ".config" / "agent-tui" / "AGENTS.md", "USER-MARKER: be brief")
    agents = write(workspace / "AGENTS.md", "AGENTS-MARKER: run the tests with make test")
    claude = write(workspace / "CLAUDE.md", "CLAUDE-MARKER: never touch vendor/")
    runtime, provider = await make_runtime(
        [Turn(tool_calls=[("ask_user", {"question": "go on?"})]), Turn(text="done")]
    )
    run = await runtime.start("hello")
    boundary = await runtime.wait(run.id, timeout=WAIT)
    assert boundary.state is RunState.INPUT_REQUIRED

    system = provider.requests[0].system
    positions = [system.index(m) for m in ("USER-MARKER", "AGENTS-MARKER", "CLAUDE-MARKER")]
    assert positions == sorted(positions)
    [note] = [n for n in await runtime.extensions.notes(run.id) if n.note == "instructions"]
    recorded = {f["path"]: f["sha256"] for f in note.data["files"]}
    assert recorded == {
        str(path): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in (user_file, agents, claude)
    }

    # The run resumes after the answer: it notes the file that changed meanwhile.
    claude.write_text("CLAUDE-MARKER-2: vendor/ is fine now")
    assert boundary.request is not None
    await runtime.respond(run.id, boundary.request.id, "yes")
    assert (await runtime.wait(run.id, timeout=WAIT)).state is RunState.COMPLETED
    notes = [n for n in await runtime.extensions.notes(run.id) if n.note == "instructions"]
    assert len(notes) == 2 and notes[1].data["changed"] == [str(claude)]
    assert "CLAUDE-MARKER-2" in provider.requests[1].system


# --- skills ----------------------------------------------------------------------------------


async def test_the_model_sees_skills_by_description_and_use_skill_returns_the_body_and_files(
    make_runtime: Factory, workspace: Path
) -> None:
    write(
        workspace / ".agent-tui" / "skills" / "review" / "SKILL.md",
        "---\nname: review\ndescription: Review a diff for bugs\n---\nREVIEW-BODY: read it all",
    )
    write(workspace / ".agent-tui" / "skills" / "review" / "checklist.md", "- names\n")
    write(
        workspace / ".claude" / "skills" / "deploy" / "SKILL.md",
        "---\ndescription: Deploy to production\ndisable-model-invocation: true\n---\nDEPLOY",
    )
    runtime, provider = await make_runtime(
        [Turn(tool_calls=[("use_skill", {"name": "review"})]), Turn(text="reviewed")]
    )
    run = await runtime.start("review my change")
    assert (await runtime.wait(run.id, timeout=WAIT)).state is RunState.COMPLETED

    first = provider.requests[0]
    assert "- review: Review a diff for bugs" in first.system
    assert "deploy" not in first.system  # only the person may invoke it
    assert "use_skill" in {t.name for t in first.tools}
    [call] = await runtime.tool_calls(run.id)
    assert call.state is ToolCallState.COMPLETED and call.result is not None
    assert "REVIEW-BODY" in call.result and "checklist.md" in call.result
    report = runtime.extensions.report()
    assert {s.name for s in report.skills} == {"review", "deploy"}


async def test_without_skills_there_is_no_use_skill_tool_and_no_skill_section(
    make_runtime: Factory,
) -> None:
    runtime, provider = await make_runtime([Turn(text="hi")])
    run = await runtime.start("hello")
    assert (await runtime.wait(run.id, timeout=WAIT)).state is RunState.COMPLETED
    assert "use_skill" not in {t.name for t in provider.requests[0].tools}
    assert "# Skills" not in provider.requests[0].system


# --- hooks -----------------------------------------------------------------------------------

DENY_LOCKS = """
import json, sys
call = json.load(sys.stdin)
path = str(call["arguments"].get("path", ""))
if path.endswith(".lock"):
    print(json.dumps({"decision": "deny", "reason": f"{path} is generated; edit the manifest"}))
"""

REDACT = """
import json, sys
call = json.load(sys.stdin)
print(json.dumps({"result": call["result"].replace("42", "[redacted]")}))
"""


async def test_a_hook_script_denies_write_file_on_lock_paths_and_the_denial_names_the_hook(
    make_runtime: Factory, workspace: Path, tmp_path: Path
) -> None:
    command = script(tmp_path / "hooks" / "no_locks.py", DENY_LOCKS)
    config = Config(
        permissions=Permissions(allow=["write_file"]),
        hooks=HooksConfig(before_tool=[HookEntry(matcher="write_file", command=command)]),
    )
    runtime, provider = await make_runtime(
        [
            Turn(
                tool_calls=[
                    ("write_file", {"path": "poetry.lock", "content": "pinned"}),
                    ("write_file", {"path": "notes.md", "content": "fine"}),
                ]
            ),
            Turn(text="done"),
        ],
        config=config,
    )
    run = await runtime.start("update things")
    assert (await runtime.wait(run.id, timeout=WAIT)).state is RunState.COMPLETED

    calls = {c.arguments["path"]: c for c in await runtime.tool_calls(run.id)}
    denied = calls["poetry.lock"]
    assert denied.state is ToolCallState.FAILED and denied.error is not None
    assert "no_locks.py" in denied.error and "denied this tool call" in denied.error
    assert "poetry.lock is generated" in denied.error
    assert not (workspace / "poetry.lock").exists()
    assert calls["notes.md"].state is ToolCallState.COMPLETED
    assert (workspace / "notes.md").read_text() == "fine"
    results = provider.requests[1].messages[-1].tool_results
    assert results[0].is_error and "poetry.lock is generated" in results[0].content


DENY_WITH_SECRETS_ON_STDERR = """
import sys
sys.stderr.write("curl --token=sk-abc123def456 failed; key ghp_abcdefgh1234 is read-only\\n")
sys.exit(2)
"""

DENY_WITH_SECRETS_IN_JSON = """
import json
reason = "tried --api-key hunter2secret with sk-zyx987654321"
print(json.dumps({"decision": "deny", "reason": reason}))
"""

SECRETS = ("sk-abc123def456", "ghp_abcdefgh1234", "hunter2secret", "sk-zyx987654321")


async def test_a_hook_deny_reason_reaches_the_store_and_the_model_with_its_secrets_masked(
    make_runtime: Factory, db_path: Path, tmp_path: Path
) -> None:
    on_stderr = script(tmp_path / "hooks" / "stderr_deny.py", DENY_WITH_SECRETS_ON_STDERR)
    in_json = script(tmp_path / "hooks" / "json_deny.py", DENY_WITH_SECRETS_IN_JSON)
    config = Config(
        hooks=HooksConfig(
            before_tool=[
                HookEntry(matcher="read_file", command=on_stderr),
                HookEntry(matcher="list_dir", command=in_json),
            ]
        ),
    )
    runtime, provider = await make_runtime(
        [
            Turn(tool_calls=[("read_file", {"path": "notes.txt"}), ("list_dir", {"path": "."})]),
            Turn(text="done"),
        ],
        config=config,
    )
    run = await runtime.start("look around")
    assert (await runtime.wait(run.id, timeout=WAIT)).state is RunState.COMPLETED

    calls = {c.name: c for c in await runtime.tool_calls(run.id)}
    errors = [calls["read_file"].error or "", calls["list_dir"].error or ""]
    assert "denied this tool call: curl --token=… failed; key … is read-only" in errors[0]
    assert "denied this tool call: tried --api-key … with …" in errors[1]
    sent = [r.content for r in provider.requests[1].messages[-1].tool_results]
    stored = b"".join(f.read_bytes() for f in db_path.parent.glob(f"{db_path.name}*"))
    for secret in SECRETS:
        assert not any(secret in text for text in [*errors, *sent])
        assert secret.encode() not in stored


async def test_an_after_tool_hook_script_rewrites_the_result_the_model_sees(
    make_runtime: Factory, tmp_path: Path
) -> None:
    command = script(tmp_path / "hooks" / "redact.py", REDACT)
    config = Config(
        hooks=HooksConfig(after_tool=[HookEntry(matcher="read_*", command=command)]),
    )
    runtime, provider = await make_runtime(
        [Turn(tool_calls=[("read_file", {"path": "notes.txt"})]), Turn(text="done")],
        config=config,
    )
    run = await runtime.start("read the notes")
    assert (await runtime.wait(run.id, timeout=WAIT)).state is RunState.COMPLETED
    [call] = await runtime.tool_calls(run.id)
    assert call.result is not None and "[redacted]" in call.result and "42" not in call.result
    sent = provider.requests[1].messages[-1].tool_results[0].content
    assert "the answer is [redacted]" in sent


async def test_a_hanging_hook_is_killed_at_its_timeout_and_the_call_fails_clearly(
    make_runtime: Factory, workspace: Path, tmp_path: Path
) -> None:
    pid_file = tmp_path / "hook.pid"
    hang = f"echo $$ > {pid_file}; exec sleep 300"
    config = Config(
        hooks=HooksConfig(before_tool=[HookEntry(matcher="read_file", command=hang, timeout=1)]),
    )
    runtime, provider = await make_runtime(
        [Turn(tool_calls=[("read_file", {"path": "notes.txt"})]), Turn(text="done")],
        config=config,
    )
    run = await runtime.start("read the notes")
    assert (await runtime.wait(run.id, timeout=WAIT)).state is RunState.COMPLETED
    [call] = await runtime.tool_calls(run.id)
    assert call.state is ToolCallState.FAILED and call.error is not None
    assert "did not answer within 1 s and was killed" in call.error
    assert "did not answer within 1 s" in provider.requests[1].messages[-1].tool_results[0].content
    assert is_gone(int(pid_file.read_text()))


async def test_claude_code_pre_tool_use_entries_run_and_doctor_lists_used_and_skipped(
    make_runtime: Factory, workspace: Path, tmp_path: Path
) -> None:
    deny = write(
        tmp_path / "claude_hook.sh",
        "#!/bin/sh\ncat > /dev/null\n"
        'echo \'{"hookSpecificOutput": {"permissionDecision": "deny", '
        '"permissionDecisionReason": "no writes in review mode"}}\'\n',
    )
    deny.chmod(deny.stat().st_mode | stat.S_IXUSR)
    settings = {
        "hooks": {
            "PreToolUse": [
                {"matcher": "Write|Edit", "hooks": [{"type": "command", "command": str(deny)}]},
                {"matcher": "Bash", "hooks": [{"type": "prompt", "prompt": "is it safe?"}]},
            ],
            "Notification": [{"hooks": [{"type": "command", "command": "true"}]}],
        }
    }
    write(workspace / ".claude" / "settings.json", json.dumps(settings))
    runtime, _ = await make_runtime(
        [Turn(tool_calls=[("write_file", {"path": "a.txt", "content": "x"})]), Turn(text="ok")],
        config=Config(permissions=Permissions(allow=["write_file"])),
    )
    run = await runtime.start("write a")
    assert (await runtime.wait(run.id, timeout=WAIT)).state is RunState.COMPLETED
    [call] = await runtime.tool_calls(run.id)
    assert call.error is not None and "no writes in review mode" in call.error
    assert str(workspace / ".claude" / "settings.json") in call.error
    assert not (workspace / "a.txt").exists()
    report = runtime.extensions.report().claude_hooks
    assert len(report.used) == 1 and "Write|Edit" in report.used[0]
    assert any("only command hooks" in s for s in report.skipped)
    assert any("Notification" in s for s in report.skipped)


async def test_editing_the_hooks_config_takes_effect_at_the_next_run_of_the_same_process(
    make_runtime: Factory, workspace: Path, tmp_path: Path
) -> None:
    command = script(tmp_path / "hooks" / "no_locks.py", DENY_LOCKS)
    hook = (
        '[permissions]\nallow = ["write_file"]\n\n'
        f'[[hooks.before_tool]]\nmatcher = "write_file"\ncommand = "{command}"\n'
    )
    write_lock = Turn(tool_calls=[("write_file", {"path": "poetry.lock", "content": "pinned"})])
    runtime, _ = await make_runtime(
        [write_lock, Turn(text="done")] * 3,
        config=Config(permissions=Permissions(allow=["write_file"])),
    )

    async def lock_call_error() -> str | None:
        run = await runtime.start("update the lock")
        assert (await runtime.wait(run.id, timeout=WAIT)).state is RunState.COMPLETED
        [call] = await runtime.tool_calls(run.id)
        return call.error

    assert await lock_call_error() is None  # no hooks yet: the write runs
    (workspace / "poetry.lock").unlink()

    write(workspace / "agent-tui.toml", hook)  # added while the process runs
    error = await lock_call_error()
    assert error is not None and "poetry.lock is generated" in error
    assert not (workspace / "poetry.lock").exists()

    write(
        workspace / "agent-tui.toml",
        hook.replace('matcher = "write_file"', 'matcher = "edit_file"'),
    )
    assert await lock_call_error() is None  # the matcher no longer covers write_file
    assert (workspace / "poetry.lock").read_text() == "pinned"


async def test_an_agent_added_to_the_config_while_the_process_runs_can_be_used_at_once(
    make_runtime: Factory, workspace: Path
) -> None:
    """Found by a new-user trial: ``/agent reviewer`` said "unknown agent" for an agent added
    to agent-tui.toml after the TUI started (``agent-tui run --agent reviewer`` knew it)."""
    write(workspace / "agent-tui.toml", "[defaults]\nmax_steps = 20\n")
    runtime, _ = await make_runtime([Turn(text="reviewed")], config=load_config(workspace))
    write(
        workspace / "agent-tui.toml",
        '[defaults]\nmax_steps = 20\n\n[agents.reviewer]\ninstructions = "Review."\n',
    )
    run = await runtime.start("review this", agent="reviewer")
    assert (await runtime.wait(run.id, timeout=WAIT)).state is RunState.COMPLETED
    assert (await runtime.get_run(run.id)).agent == "reviewer"
    with pytest.raises(InvalidInput, match="unknown agent"):
        await runtime.start("review that", agent="nobody")


async def test_an_agent_in_a_config_file_made_while_the_process_runs_can_be_used_at_once(
    make_runtime: Factory, workspace: Path
) -> None:
    """Found by a new-user trial: opened in a folder with no config file, then given an
    agent-tui.toml with agents, the TUI kept saying "unknown agent" for them (``/agent``, and a
    fork of a sub-run's checkpoint failed at once) until a restart: a config read from no file
    was taken for one a program gave, which is never read again."""
    runtime, _ = await make_runtime([Turn(text="reviewed")], config=load_config(workspace))
    write(workspace / "agent-tui.toml", '[agents.reviewer]\ninstructions = "Review."\n')
    run = await runtime.start("review this", agent="reviewer")
    assert (await runtime.wait(run.id, timeout=WAIT)).state is RunState.COMPLETED
    assert (await runtime.get_run(run.id)).agent == "reviewer"


async def test_a_config_a_program_gives_stays_as_given_when_a_config_file_appears(
    make_runtime: Factory, workspace: Path
) -> None:
    runtime, _ = await make_runtime([], config=Config())
    write(workspace / "agent-tui.toml", '[agents.reviewer]\ninstructions = "Review."\n')
    with pytest.raises(InvalidInput, match="unknown agent"):
        await runtime.start("review this", agent="reviewer")


async def test_a_fork_of_a_run_whose_agent_is_gone_from_the_config_is_refused(
    make_runtime: Factory, workspace: Path
) -> None:
    """Found by a new-user trial: a fork made a new job whose run failed at once, with
    ``internal_error: InvalidInput: unknown agent``; it is refused before anything is stored,
    saying so, as ``start`` refuses an unknown agent (here: one removed since, by a later
    process)."""
    write(workspace / "agent-tui.toml", '[agents.reviewer]\ninstructions = "Review."\n')
    runtime, _ = await make_runtime([Turn(text="reviewed")], config=load_config(workspace))
    run = await runtime.start("review this", agent="reviewer")
    assert (await runtime.wait(run.id, timeout=WAIT)).state is RunState.COMPLETED
    [checkpoint] = await runtime.store.list_checkpoints(run.id)
    await runtime.close()
    write(workspace / "agent-tui.toml", "[defaults]\nmax_steps = 20\n")
    later, _ = await make_runtime([], config=load_config(workspace))
    with pytest.raises(InvalidInput, match="unknown agent 'reviewer'"):
        await later.fork(checkpoint.id, "and again")
    assert len((await later.list_jobs()).items) == 1


async def test_a_tool_the_rules_deny_is_not_offered_to_the_model_and_a_call_of_it_is_refused(
    make_runtime: Factory, workspace: Path
) -> None:
    """Found by a new-user trial: a tool denied by ``[permissions] deny`` was still in the tool
    list the model got, and the model called it only to be refused."""
    runtime, provider = await make_runtime(
        [Turn(tool_calls=[("write_file", {"path": "x.txt", "content": "x"})]), Turn(text="ok")],
        config=Config(permissions=Permissions(deny=["write_*"])),
    )
    run = await runtime.start("write x")
    assert (await runtime.wait(run.id, timeout=WAIT)).state is RunState.COMPLETED
    offered = {tool.name for tool in provider.requests[0].tools}
    assert "write_file" not in offered and "read_file" in offered
    [call] = await runtime.tool_calls(run.id)  # named anyway: refused with the rule
    assert call.state is ToolCallState.FAILED and call.error is not None
    assert "permission rules deny write_file" in call.error
    assert not (workspace / "x.txt").exists()


async def test_a_hook_added_after_the_process_opened_applies_to_its_first_tool_call(
    make_runtime: Factory, workspace: Path, tmp_path: Path
) -> None:
    """Found by a new-user trial: a deny hook added to agent-tui.toml after the TUI started,
    before any tool ran, never ran (the first use took the config read at start as current,
    with the file's new stamp); ``agent-tui run`` applied it."""
    command = script(tmp_path / "hooks" / "no_locks.py", DENY_LOCKS)
    write_lock = Turn(tool_calls=[("write_file", {"path": "poetry.lock", "content": "pinned"})])
    write(workspace / "agent-tui.toml", '[permissions]\nallow = ["write_file"]\n')
    runtime, _ = await make_runtime(
        [write_lock, Turn(text="done")],
        config=load_config(workspace),  # as the TUI reads it when it starts
    )
    write(
        workspace / "agent-tui.toml",
        '[permissions]\nallow = ["write_file"]\n\n'
        f'[[hooks.before_tool]]\nmatcher = "write_file"\ncommand = "{command}"\n',
    )
    run = await runtime.start("update the lock")
    assert (await runtime.wait(run.id, timeout=WAIT)).state is RunState.COMPLETED
    [call] = await runtime.tool_calls(run.id)
    assert call.error is not None and "poetry.lock is generated" in call.error
    assert not (workspace / "poetry.lock").exists()


async def test_a_hooks_file_written_during_a_run_applies_from_its_next_step(
    make_runtime: Factory, workspace: Path, tmp_path: Path
) -> None:
    """The hook files are stat'd once per step, not once per call: an edit between two steps
    of one run still applies to the second."""
    command = script(tmp_path / "hooks" / "no_locks.py", DENY_LOCKS)
    hook = (
        '[permissions]\nallow = ["write_file"]\n\n'
        f'[[hooks.before_tool]]\nmatcher = "write_file"\ncommand = "{command}"\n'
    )

    def write_lock(content: str) -> Turn:
        return Turn(tool_calls=[("write_file", {"path": "poetry.lock", "content": content})])

    def hook_added(request: ModelRequest) -> Turn:
        write(workspace / "agent-tui.toml", hook)
        return write_lock("second")

    def hook_narrowed(request: ModelRequest) -> Turn:
        write(
            workspace / "agent-tui.toml", hook.replace('"write_file"\ncommand', '"edit"\ncommand')
        )
        return write_lock("third")

    runtime, _ = await make_runtime(
        [write_lock("first"), hook_added, hook_narrowed, Turn(text="done")],
        config=Config(permissions=Permissions(allow=["write_file"])),
    )
    run = await runtime.start("update the lock three times")
    assert (await runtime.wait(run.id, timeout=WAIT)).state is RunState.COMPLETED
    first, second, third = sorted(await runtime.tool_calls(run.id), key=lambda c: c.step)
    assert first.state is ToolCallState.COMPLETED
    assert second.state is ToolCallState.FAILED and second.error is not None
    assert "poetry.lock is generated" in second.error
    assert third.state is ToolCallState.COMPLETED  # the matcher no longer covers write_file
    assert (workspace / "poetry.lock").read_text() == "third"


DENY_TASK = """
import json, sys
call = json.load(sys.stdin)
log = open(sys.argv[1], "a")
log.write(call["tool_name"] + "\\n")
if "production" in call["arguments"].get("task", ""):
    print(json.dumps({"decision": "deny", "reason": "no sub-agent touches production"}))
"""


async def test_before_and_after_tool_hooks_run_for_delegate_calls_too(
    make_runtime: Factory, tmp_path: Path
) -> None:
    seen = tmp_path / "seen.txt"
    deny = script(tmp_path / "hooks" / "deny_task.py", DENY_TASK) + f" {seen}"
    redact = script(tmp_path / "hooks" / "redact.py", REDACT)
    config = Config(
        agents={
            "coordinator": AgentConfig(delegates=["researcher", "deployer"]),
            "researcher": AgentConfig(description="Looks things up."),
            "deployer": AgentConfig(description="Deploys."),
        },
        hooks=HooksConfig(
            before_tool=[HookEntry(matcher="delegate_to_*", command=deny)],
            after_tool=[HookEntry(matcher="delegate_to_researcher", command=redact)],
        ),
    )
    runtime, provider = await make_runtime(
        [
            Turn(
                tool_calls=[
                    ("delegate_to_researcher", {"task": "find the answer"}),
                    ("delegate_to_deployer", {"task": "deploy to production"}),
                ]
            ),
            Turn(text="the answer is 42"),  # the researcher's child run
            Turn(text="done"),
        ],
        config=config,
    )
    run = await runtime.start("go", agent="coordinator")
    assert (await runtime.wait(run.id, timeout=WAIT)).state is RunState.COMPLETED

    assert sorted(seen.read_text().split()) == ["delegate_to_deployer", "delegate_to_researcher"]
    calls = {c.name: c for c in await runtime.tool_calls(run.id)}
    denied = calls["delegate_to_deployer"]
    assert denied.state is ToolCallState.FAILED and denied.error is not None
    assert "deny_task.py" in denied.error and "no sub-agent touches production" in denied.error
    assert denied.child_run_id is None
    researched = calls["delegate_to_researcher"]
    assert researched.state is ToolCallState.COMPLETED and researched.child_run_id is not None
    assert researched.result == "the answer is [redacted]"
    children = [r for r in await runtime.job_runs(run.job_id) if r.parent_run_id == run.id]
    assert [c.agent for c in children] == ["researcher"]  # the denied call started no child
    sent = {r.content for r in provider.requests[-1].messages[-1].tool_results}
    assert "the answer is [redacted]" in sent


async def test_on_run_finished_hooks_get_the_outcome_without_holding_the_run(
    make_runtime: Factory, tmp_path: Path
) -> None:
    out = tmp_path / "finished.json"
    config = Config(
        hooks=HooksConfig(
            on_run_finished=[HookEntry(command=f"cat > {out}.part; mv {out}.part {out}")]
        )
    )
    runtime, _ = await make_runtime([Turn(text="all done")], config=config)
    run = await runtime.start("hello")
    assert (await runtime.wait(run.id, timeout=WAIT)).state is RunState.COMPLETED
    async with asyncio.timeout(WAIT):
        while not out.exists():
            await asyncio.sleep(0.05)
    payload = json.loads(out.read_text())
    assert payload["event"] == "on_run_finished" and payload["state"] == "completed"
    assert payload["run_id"] == run.id and payload["outcome"] == "all done"


# --- compaction ------------------------------------------------------------------------------


def _read_big() -> Turn:
    return Turn(tool_calls=[("read_file", {"path": "big.txt"})])


SMALL_WINDOW = Defaults(context_window=3000, compact_at=0.8)
"""Every request sends ~1,500 tokens of system prompt and built-in tool definitions; compacting
past 2,400 tokens leaves the messages room for two reads of big.txt, not for three."""


async def test_a_request_past_the_share_of_a_small_window_is_compacted_and_the_originals_stay(
    make_runtime: Factory, workspace: Path
) -> None:
    write(workspace / "big.txt", "lorem ipsum dolor " * 70)  # ~1,260 characters, ~315 tokens
    config = Config(defaults=SMALL_WINDOW)
    runtime, provider = await make_runtime(
        [_read_big(), _read_big(), _read_big(), Turn(text="SUMMARY-XYZ"), Turn(text="final")],
        config=config,
    )
    run = await runtime.start("read big.txt three times")
    assert (await runtime.wait(run.id, timeout=WAIT)).state is RunState.COMPLETED

    assert [r.system == SUMMARISER_SYSTEM for r in provider.requests] == [
        False,
        False,
        False,
        True,
        False,
    ]
    asked = provider.requests[3].messages[0].text
    assert "[called read_file" in asked and "read big.txt three times" in asked
    after = provider.requests[4].messages
    assert after[0].role is Role.USER and after[0].text.startswith(SUMMARY_HEADER)
    assert "SUMMARY-XYZ" in after[0].text
    assert len(after) == 3  # the summary, then the last call and its result

    stored = await runtime.all_messages(run.id)
    assert len(stored) == 8  # nothing deleted
    [note] = [n for n in await runtime.extensions.notes(run.id) if n.note == "compaction"]
    assert note.data["through_message_id"] == stored[4].id
    assert note.data["summary"] == "SUMMARY-XYZ" and note.data["summarised_messages"] == 5

    # The export shows the record and its summary, and still every original message.
    exported = await runtime.export_job(run.job_id)
    assert "compacted 5 earlier messages" in exported and "> SUMMARY-XYZ" in exported
    assert exported.count("**Tool call** `read_file`") == 3
    as_json = json.loads(await runtime.export_job(run.job_id, format="json"))
    [exported_run] = as_json["runs"]
    assert len(exported_run["messages"]) == 8
    assert [n["note"] for n in exported_run["notes"]] == ["compaction"]

    # A fork from a checkpoint before the compaction sends the whole history.
    checkpoints = await runtime.checkpoints(run.id)
    before = next(c for c in checkpoints if c.step == 2)
    provider.script.append(Turn(text="forked"))
    fork = await runtime.fork(before.id, "and now?")
    assert (await runtime.wait(fork.id, timeout=WAIT)).state is RunState.COMPLETED
    forked = provider.requests[-1].messages
    assert not any(SUMMARY_HEADER in m.text for m in forked)
    assert len(forked) == 6  # user, 2 × (call, result), the new prompt


async def test_a_follow_up_after_a_compaction_starts_from_the_summary(
    make_runtime: Factory, workspace: Path
) -> None:
    write(workspace / "big.txt", "lorem ipsum dolor " * 70)
    config = Config(defaults=SMALL_WINDOW)
    runtime, provider = await make_runtime(
        [_read_big(), _read_big(), _read_big(), Turn(text="SUMMARY-1"), Turn(text="final")],
        config=config,
    )
    run = await runtime.start("read big.txt three times")
    assert (await runtime.wait(run.id, timeout=WAIT)).state is RunState.COMPLETED
    provider.script.append(Turn(text="next"))
    follow = await runtime.follow_up(run.job_id, "what did you find?")
    assert (await runtime.wait(follow.id, timeout=WAIT)).state is RunState.COMPLETED
    sent = provider.requests[-1]
    assert sent.system != SUMMARISER_SYSTEM
    assert "SUMMARY-1" in sent.messages[0].text
    compactions = [n for r in (run, follow) for n in await runtime.extensions.notes(r.id)]
    assert [n.note for n in compactions].count("compaction") == 1  # not summarised again


async def test_compact_now_summarises_all_but_the_last_turn_of_a_finished_job(
    make_runtime: Factory,
) -> None:
    runtime, provider = await make_runtime(
        [
            Turn(tool_calls=[("read_file", {"path": "notes.txt"})]),
            Turn(text="the answer is 42"),
            Turn(text="second answer"),
            Turn(text="SUMMARY-NOW", usage=Usage(input_tokens=777, output_tokens=55)),
            Turn(text="after compact"),
        ]
    )
    run = await runtime.start("what is in notes.txt?")
    assert (await runtime.wait(run.id, timeout=WAIT)).state is RunState.COMPLETED
    second = await runtime.follow_up(run.job_id, "and then?")
    assert (await runtime.wait(second.id, timeout=WAIT)).state is RunState.COMPLETED

    note = await runtime.extensions.compact(run.job_id)
    assert note.note == "compaction" and note.run_id == second.id
    assert provider.requests[3].system == SUMMARISER_SYSTEM
    # The summary call's tokens count in the run that holds the compaction, and in the job.
    compacted = await runtime.get_run(second.id)
    assert (compacted.usage.input_tokens, compacted.usage.output_tokens) == (10 + 777, 5 + 55)
    job = await runtime.get_job(run.job_id)
    assert (job.usage.input_tokens, job.usage.output_tokens) == (3 * 10 + 777, 3 * 5 + 55)
    third = await runtime.follow_up(run.job_id, "go on")
    assert (await runtime.wait(third.id, timeout=WAIT)).state is RunState.COMPLETED
    sent = provider.requests[4].messages
    assert "SUMMARY-NOW" in sent[0].text
    assert [m.role for m in sent] == [Role.USER, Role.ASSISTANT, Role.USER]
    assert len(await runtime.all_messages(run.id)) == 4  # the originals are all there


# --- phases ----------------------------------------------------------------------------------


def _phases(workspace: Path) -> None:
    root = workspace / ".agent-tui" / "phases" / "default"
    write(
        root / "plan" / "PHASE.md",
        "---\ninitial: true\ntarget: build\n---\nPLAN-DIRECTIVE: write a plan first.",
    )
    write(
        root / "build" / "PHASE.md",
        "---\ntools: [read_file]\ntarget: plan\n---\nBUILD-DIRECTIVE: carry the plan out.",
    )


async def test_route_moves_the_run_to_a_phase_with_its_directive_tools_and_a_durable_note(
    make_runtime: Factory, workspace: Path
) -> None:
    _phases(workspace)
    runtime, provider = await make_runtime(
        [
            Turn(tool_calls=[("route", {"phase": "review"})]),
            Turn(tool_calls=[("route", {"phase": "build", "reason": "planned"})]),
            Turn(text="built"),
            Turn(text="still building"),
        ]
    )
    run = await runtime.start("make it")
    assert (await runtime.wait(run.id, timeout=WAIT)).state is RunState.COMPLETED

    first, second, third = provider.requests[:3]
    assert "PLAN-DIRECTIVE" in first.system and "route" in {t.name for t in first.tools}
    refused = second.messages[-1].tool_results[0]
    assert refused.is_error and "review" in refused.content
    assert "PLAN-DIRECTIVE" in second.system
    assert "BUILD-DIRECTIVE" in third.system and "PLAN-DIRECTIVE" not in third.system
    assert {t.name for t in third.tools} == {"read_file", "route"}
    texts = [n.text for n in await runtime.extensions.notes(run.id) if n.note == "phase"]
    assert texts == ["phase: starts in plan", "phase: plan → build (planned)"]

    # A follow-up in the job continues in the phase the job was in.
    follow = await runtime.follow_up(run.job_id, "more")
    assert (await runtime.wait(follow.id, timeout=WAIT)).state is RunState.COMPLETED
    assert "BUILD-DIRECTIVE" in provider.requests[3].system

    # A fork from a checkpoint after the move is in build; one from before it, in plan.
    checkpoints = await runtime.checkpoints(run.id)
    provider.script += [Turn(text="forked after"), Turn(text="forked before")]
    after = await runtime.fork(checkpoints[-1].id, "again")
    assert (await runtime.wait(after.id, timeout=WAIT)).state is RunState.COMPLETED
    assert "BUILD-DIRECTIVE" in provider.requests[4].system
    before = await runtime.fork(checkpoints[0].id, "from the start")
    assert (await runtime.wait(before.id, timeout=WAIT)).state is RunState.COMPLETED
    assert "PLAN-DIRECTIVE" in provider.requests[5].system


def _parallel_phases(workspace: Path) -> None:
    root = workspace / ".agent-tui" / "phases" / "default"
    write(
        root / "plan" / "PHASE.md",
        "---\ninitial: true\ntarget: [frontend, backend]\n---\nPLAN-DIRECTIVE: split the work.",
    )
    write(
        root / "frontend" / "PHASE.md",
        "---\ntools: [read_file]\n---\nFRONTEND-DIRECTIVE: build the screens.",
    )
    write(root / "backend" / "PHASE.md", "---\ntools: [list_dir]\n---\nBACKEND-DIRECTIVE: the API.")


def _parallel_model(request: ModelRequest) -> Turn:
    """Answers by the phase the request is in, whatever order the parallel runs ask in."""
    if "FRONTEND-DIRECTIVE" in request.system:
        return Turn(text="FRONTEND-RESULT: three screens")
    if "BACKEND-DIRECTIVE" in request.system:
        return Turn(text="BACKEND-RESULT: two endpoints")
    if any(m.tool_results for m in request.messages):
        return Turn(text="both halves are done")
    return Turn(
        tool_calls=[
            (
                "route",
                {"phase": ["frontend", "backend"], "reason": "split", "payload": "a todo app"},
            )
        ]
    )


async def test_a_route_to_two_phases_runs_each_as_a_child_run_and_returns_to_the_source_phase(
    make_runtime: Factory, workspace: Path
) -> None:
    _parallel_phases(workspace)
    runtime, provider = await make_runtime([_parallel_model] * 4)
    run = await runtime.start("make a todo app")
    assert (await runtime.wait(run.id, timeout=WAIT)).state is RunState.COMPLETED
    assert (await runtime.get_run(run.id)).outcome == "both halves are done"

    # Each child is a real child run of the route call, in its phase, with that phase's tools.
    [route] = await runtime.tool_calls(run.id)
    children = [r for r in await runtime.job_runs(run.job_id) if r.parent_run_id == run.id]
    assert len(children) == 2
    assert {c.parent_tool_call_id for c in children} == {route.id}
    assert all(c.state is RunState.COMPLETED for c in children)
    by_phase = {
        n.data["to"]: child
        for child in children
        for n in await runtime.extensions.notes(child.id)
        if n.note == "phase"
    }
    assert set(by_phase) == {"frontend", "backend"}
    assert by_phase["frontend"].outcome == "FRONTEND-RESULT: three screens"
    assert by_phase["backend"].outcome == "BACKEND-RESULT: two endpoints"
    requests = {
        phase: [r for r in provider.requests if f"{phase.upper()}-DIRECTIVE" in r.system]
        for phase in ("frontend", "backend")
    }
    front, back = requests["frontend"][0], requests["backend"][0]
    assert {t.name for t in front.tools} == {"read_file"}  # no route: a child stays in its phase
    assert {t.name for t in back.tools} == {"list_dir"}
    assert "PLAN-DIRECTIVE" not in front.system and "BACKEND-DIRECTIVE" not in front.system
    assert "a todo app" in front.messages[0].text and "phase frontend" in front.messages[0].text

    # The parent is back in plan with both results as the route call's result.
    assert route.state is ToolCallState.COMPLETED and route.result is not None
    last = provider.requests[-1]
    assert "PLAN-DIRECTIVE" in last.system and "route" in {t.name for t in last.tools}
    sent = last.messages[-1].tool_results[0].content
    assert "FRONTEND-RESULT: three screens" in sent and "BACKEND-RESULT: two endpoints" in sent
    assert "back in phase plan" in sent
    texts = [n.text for n in await runtime.extensions.notes(run.id) if n.note == "phase"]
    assert texts == [
        "phase: starts in plan",
        "phase: plan → frontend, backend in parallel, back in plan (split)",
    ]


async def test_the_demo_model_routes_to_several_targets_in_parallel_and_goes_on_in_the_source(
    db_path: Path, workspace: Path
) -> None:
    _parallel_phases(workspace)
    runtime = await Runtime.open(
        db_path=db_path, workspace=workspace, config=Config(), model="demo:instant"
    )
    try:
        run = await runtime.start("summarise this folder")
        boundary = await runtime.wait(run.id, timeout=WAIT)
        assert boundary.state is RunState.INPUT_REQUIRED  # its own ask_user, back in plan
        calls = await runtime.tool_calls(run.id)
        assert calls[0].name == "route" and calls[0].arguments["phase"] == ["frontend", "backend"]
        assert calls[0].state is ToolCallState.COMPLETED
        children = [r for r in await runtime.job_runs(run.job_id) if r.parent_run_id == run.id]
        assert len(children) == 2 and all(c.state is RunState.COMPLETED for c in children)
        texts = [n.text for n in await runtime.extensions.notes(run.id) if n.note == "phase"]
        assert texts[-1].startswith("phase: plan → frontend, backend in parallel, back in plan")
    finally:
        await runtime.close()


def _asking_parallel_model(request: ModelRequest) -> Turn:
    """Like ``_parallel_model``, but the frontend run asks the person first."""
    if "FRONTEND-DIRECTIVE" in request.system:
        if any(m.tool_results for m in request.messages):
            return Turn(text="FRONTEND-RESULT: the screens asked for")
        return Turn(tool_calls=[("ask_user", {"question": "which screens?"})])
    return _parallel_model(request)


async def test_a_parent_resumed_after_its_phases_changed_still_waits_for_its_parallel_runs(
    db_path: Path, workspace: Path, tmp_path: Path
) -> None:
    seen = tmp_path / "seen.txt"
    logged = script(tmp_path / "hooks" / "log_calls.py", DENY_TASK) + f" {seen}"
    hooks = HooksConfig(before_tool=[HookEntry(matcher="route", command=logged)])
    _parallel_phases(workspace)
    write(
        workspace / ".agent-tui" / "phases" / "default" / "frontend" / "PHASE.md",
        "---\ntools: [read_file, ask_user]\n---\nFRONTEND-DIRECTIVE: build the screens.",
    )

    async def open_runtime() -> tuple[Runtime, ScriptedProvider]:
        provider = ScriptedProvider([_asking_parallel_model] * 8)
        runtime = await Runtime.open(
            db_path=db_path,
            workspace=workspace,
            config=Config(hooks=hooks),
            model="scripted:test",
            providers=lambda reference: provider,
        )
        return runtime, provider

    first, _ = await open_runtime()
    try:
        run = await first.start("make a todo app")
        boundary = await first.wait(run.id, timeout=WAIT)
        assert boundary.state is RunState.INPUT_REQUIRED and boundary.run.parent_run_id == run.id
        # The backend runs beside the frontend: its one step may still be under way when the
        # frontend asks (on a loaded machine it was, and the second runtime ran it again).
        children = [r for r in await first.job_runs(run.job_id) if r.parent_run_id == run.id]
        assert len(children) == 2
        [backend] = [child for child in children if child.id != boundary.run.id]
        finished = await first.wait(backend.id, timeout=WAIT)
        assert finished.state is RunState.COMPLETED
    finally:
        await first.close()  # quit while the frontend run waits for the person
    # The phases change before the parent resumes: plan may no longer fan out to both.
    write(
        workspace / ".agent-tui" / "phases" / "default" / "plan" / "PHASE.md",
        "---\ninitial: true\ntarget: frontend\n---\nPLAN-DIRECTIVE: split the work.",
    )

    second, provider = await open_runtime()
    try:
        [request] = await second.inbox()
        await second.respond(request.run_id, request.id, "the list and the form")
        final = await second.wait(run.id, timeout=WAIT)
        assert final.state is RunState.COMPLETED and final.run.outcome == "both halves are done"
        [route] = await second.tool_calls(run.id)
        assert route.state is ToolCallState.COMPLETED and route.result is not None
        assert "FRONTEND-RESULT: the screens asked for" in route.result
        assert "BACKEND-RESULT: two endpoints" in route.result
        children = [r for r in await second.job_runs(run.job_id) if r.parent_run_id == run.id]
        assert len(children) == 2 and all(c.state is RunState.COMPLETED for c in children)
        # The backend run had finished: it was not asked again.
        assert not any("BACKEND-DIRECTIVE" in r.system for r in provider.requests)
        # The route's before-tool hook let it through once; re-attaching does not ask again.
        assert seen.read_text().split() == ["route"]
    finally:
        await second.close()
