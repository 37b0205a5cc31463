"""The store's rules as pure code: records in, row changes and events out (no database)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from runtime import errors
from runtime.events import MessageCommitted, RunStateChanged, ToolStateChanged
from runtime.models import Role, Run, RunState, ToolCallState, Usage
from runtime.store import rules
from runtime.store.base import NewMessage, NewToolCall, ToolStateChange
from tests.store.helpers import new_run

ROOT = Path(__file__).resolve().parents[2]
NOW = 1000.0


def _ids() -> rules.IdFactory:
    counter = iter(range(1, 1_000))
    return lambda: f"id{next(counter)}"


def _queued(**extra: object) -> Run:
    _, run = rules.create_run(new_run("hi", **extra), input_hash="h", active_root=None, now=NOW)
    return run


def _running() -> Run:
    plan = rules.claim_run(_queued(), owner_id="o", token="t", now=NOW)
    return plan.runs[0][0]


def test_every_state_check_checks_a_state_that_was_read() -> None:
    """No ``check_*`` call in the runtime passes a state written into the call: the from-state
    is always an attribute of a record (``run.state``, ``call.state`` …)."""
    checked = 0
    for path in sorted((ROOT / "runtime").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("check_run", "check_tool", "check_input")
            ):
                continue
            checked += 1
            first = node.args[0]
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            assert isinstance(first, ast.Attribute) and first.attr == "state", where
            assert isinstance(first.value, ast.Name), where
            assert first.value.id not in ("RunState", "ToolCallState", "InputRequestState"), where
    assert checked >= 5


def test_a_second_root_run_of_a_job_with_an_active_one_is_refused() -> None:
    active = _running()
    with pytest.raises(errors.RunStateConflict, match=active.id):
        rules.create_run(
            new_run("again", job_id=active.job_id), input_hash="h", active_root=active, now=NOW
        )


def test_a_second_root_run_while_one_waits_for_a_retry_is_refused_naming_it_interrupted() -> None:
    # A new-user trial: "run B… is queued; wait for it" — it waits for a person, not in a queue.
    waiting = rules.interrupt_queued(_queued(owner_id="gone"), NOW).runs[0][0]
    assert waiting.state is RunState.QUEUED and waiting.interrupted
    with pytest.raises(errors.RunStateConflict) as refused:
        rules.create_run(
            new_run("again", job_id=waiting.job_id), input_hash="h", active_root=waiting, now=NOW
        )
    assert refused.value.message == (
        f"run {waiting.id} of job {waiting.job_id} was interrupted and waits for a retry; "
        f"retry that one (agent-tui retry {waiting.id}) or cancel it first"
    )
    queued = _queued()
    with pytest.raises(errors.RunStateConflict, match="is queued; wait for it"):
        rules.create_run(
            new_run("again", job_id=queued.job_id), input_hash="h", active_root=queued, now=NOW
        )


def test_a_replayed_idempotency_key_returns_the_run_and_another_input_conflicts() -> None:
    existing = _queued(idempotency_key="k")
    assert rules.idempotent_replay(existing, "same", "same") is existing
    assert rules.idempotent_replay(None, None, "same") is None
    with pytest.raises(errors.IdempotencyConflict):
        rules.idempotent_replay(existing, "one", "another")


def test_claiming_bumps_the_revision_sets_the_token_and_emits_one_event() -> None:
    queued = _queued()
    plan = rules.claim_run(queued, owner_id="o", token="t", now=NOW + 1)
    [(after, read_revision)] = plan.runs
    assert (after.state, after.execution_token, after.revision) == (
        RunState.RUNNING,
        "t",
        queued.revision + 1,
    )
    assert read_revision == queued.revision
    [event] = plan.events
    assert isinstance(event, RunStateChanged)
    assert (event.from_state, event.to_state) == (RunState.QUEUED, RunState.RUNNING)
    with pytest.raises(errors.RunStateConflict):
        rules.claim_run(after, owner_id="o", token="t2", now=NOW)


def test_a_message_adds_its_usage_to_the_run_and_the_job_and_reserves_its_calls() -> None:
    run = _running()
    usage = Usage(input_tokens=100, output_tokens=7, cache_read_tokens=20)
    plan, message, calls = rules.commit_message(
        run,
        token="t",
        position=1,
        message=NewMessage(role=Role.ASSISTANT, content=[], usage=usage, cost_usd=0.5),
        tool_calls=[
            NewToolCall(provider_id="p1", name="read_file", arguments={}, start=True),
            NewToolCall(provider_id="p2", name="shell", arguments={"command": "ls"}),
        ],
        step=3,
        now=NOW,
        ids=_ids(),
    )
    [(after, _)] = plan.runs
    assert after.usage == usage and after.cost_usd == 0.5 and after.step == 3
    assert after.context_tokens == 120 and after.revision == run.revision + 1
    [job] = plan.jobs
    assert job.usage == usage and job.cost_usd == 0.5 and job.run_state is None
    assert [c.state for c in calls] == [ToolCallState.RUNNING, ToolCallState.PENDING]
    assert plan.delete_drafts_of == run.id
    kinds = [
        (e.from_state, e.to_state) if isinstance(e, ToolStateChanged) else e.kind
        for e in plan.events
    ]
    assert kinds == [
        "message_committed",
        (None, ToolCallState.PENDING),
        (ToolCallState.PENDING, ToolCallState.RUNNING),
        (None, ToolCallState.PENDING),
    ]
    assert isinstance(plan.events[0], MessageCommitted) and plan.events[0].message == message
    with pytest.raises(errors.OwnershipLost):
        rules.commit_message(
            run,
            token="stale",
            position=1,
            message=NewMessage(role=Role.ASSISTANT, content=[]),
            tool_calls=(),
            step=None,
            now=NOW,
        )


def test_recovery_requeues_when_only_idempotent_calls_ran_and_fails_otherwise() -> None:
    run = _running()
    _, _, calls = rules.commit_message(
        run,
        token="t",
        position=1,
        message=NewMessage(role=Role.ASSISTANT, content=[]),
        tool_calls=[
            NewToolCall(
                provider_id="p1", name="read_file", arguments={}, idempotent=True, start=True
            ),
            NewToolCall(provider_id="p2", name="shell", arguments={}, start=True),
        ],
        step=1,
        now=NOW,
    )
    plan, failed = rules.recover_running(run, calls[:1], NOW)
    assert not failed
    assert [c.state for c in plan.tool_calls] == [ToolCallState.PENDING]
    assert plan.runs[0][0].state is RunState.QUEUED and plan.runs[0][0].interrupted

    plan, failed = rules.recover_running(run, calls, NOW)
    assert failed
    # The run fails, so the idempotent call is closed too: no call of a failed run stays open.
    assert [c.state for c in plan.tool_calls] == [
        ToolCallState.FAILED,
        ToolCallState.INDETERMINATE,
    ]
    after = plan.runs[0][0]
    assert after.state is RunState.FAILED and after.failure is not None
    assert after.failure.code == "tool_indeterminate" and after.execution_token is None


def test_a_tool_call_moves_only_along_its_table() -> None:
    run = _running()
    _, _, [call] = rules.commit_message(
        run,
        token="t",
        position=1,
        message=NewMessage(role=Role.ASSISTANT, content=[]),
        tool_calls=[NewToolCall(provider_id="p", name="read_file", arguments={})],
        step=1,
        now=NOW,
    )
    done = ToolStateChange(tool_call_id=call.id, to=ToolCallState.COMPLETED, result="ok")
    with pytest.raises(errors.IllegalTransition):
        rules.tool_states(run, token="t", calls={call.id: call}, changes=[done], now=NOW)
    start = ToolStateChange(tool_call_id=call.id, to=ToolCallState.RUNNING)
    plan, [started, finished] = rules.tool_states(
        run, token="t", calls={call.id: call}, changes=[start, done], now=NOW
    )
    assert plan.tool_calls == [finished] and finished.result == "ok"
    assert started.state is ToolCallState.RUNNING
    assert [e.to_state for e in plan.events if isinstance(e, ToolStateChanged)] == [
        ToolCallState.RUNNING,
        ToolCallState.COMPLETED,
    ]
