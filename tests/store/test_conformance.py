"""The store conformance suite: behaviour any ``Store`` must have (DESIGN §4-§6, §15)."""

from __future__ import annotations

import asyncio

import pytest

from runtime import errors
from runtime.clock import ManualClock
from runtime.drafts import draft_revision
from runtime.events import (
    CheckpointCreated,
    HistoryRepaired,
    JobArchived,
    MessageCommitted,
    RepairNote,
    RunNoted,
    RunStateChanged,
    ToolStateChanged,
    dump_event,
)
from runtime.models import (
    DraftKind,
    Failure,
    InputKind,
    InputRequestState,
    Job,
    Role,
    RunState,
    TextBlock,
    ToolCallState,
    Usage,
)
from runtime.store.base import (
    CutShortUsage,
    NewInputRequest,
    NewMessage,
    Page,
    Store,
    ToolStateChange,
)
from runtime.transcript_pages import PARTIAL as PAST_ANY_POSITION
from tests.store.conftest import StoreFactory
from tests.store.helpers import (
    WRITER,
    answer_text,
    assistant,
    composer_text,
    new_run,
    queued_messages,
    running_run,
    step_with_tools,
    tool_calls,
    tool_result_message,
)

QUESTION = NewInputRequest(kind=InputKind.QUESTION, prompt="Which file?", options=["a", "b"])


# --- creating runs -------------------------------------------------------------------------------


async def test_a_new_run_creates_its_job_input_message_and_two_events(store: Store) -> None:
    run = await store.create_run(new_run("Fix the failing test\nin src/main.py"))

    job = await store.get_job(run.job_id)
    assert job.title == "Fix the failing test"
    assert job.latest_run_state is RunState.QUEUED
    assert run.state is RunState.QUEUED and run.execution_token is None
    [message] = await store.list_messages(run.id)
    assert (message.position, message.role, message.text) == (
        0,
        Role.USER,
        "Fix the failing test\nin src/main.py",
    )
    events = await store.read_events(run_id=run.id)
    assert [e.kind for e in events] == ["run_state_changed", "message_committed"]
    first = events[0]
    assert isinstance(first, RunStateChanged)
    assert (first.from_state, first.to_state) == (None, RunState.QUEUED)
    assert isinstance(events[1], MessageCommitted) and events[1].message == message


async def test_a_long_first_line_is_trimmed_into_the_job_title(store: Store) -> None:
    run = await store.create_run(new_run("   " + "word " * 40))
    title = (await store.get_job(run.job_id)).title
    assert len(title) <= 80 and title.startswith("word word") and title.endswith("…")


async def test_a_run_without_input_has_no_message_and_uses_the_given_title(store: Store) -> None:
    run = await store.create_run(new_run(None, title="Forked job"))
    assert (await store.get_job(run.job_id)).title == "Forked job"
    assert await store.list_messages(run.id) == []


async def test_the_same_idempotency_key_and_input_return_the_same_run(store: Store) -> None:
    first = await store.create_run(new_run("hello", idempotency_key="k1", owner_id="a"))
    seq = await store.last_seq()
    again = await store.create_run(new_run("hello", idempotency_key="k1", owner_id="b"))
    assert again.id == first.id
    assert await store.last_seq() == seq


async def test_the_same_idempotency_key_with_other_input_is_a_conflict(store: Store) -> None:
    await store.create_run(new_run("hello", idempotency_key="k1"))
    seq = await store.last_seq()
    with pytest.raises(errors.IdempotencyConflict):
        await store.create_run(new_run("goodbye", idempotency_key="k1"))
    assert await store.last_seq() == seq


async def test_references_to_missing_rows_are_refused_with_not_found(store: Store) -> None:
    with pytest.raises(errors.JobNotFound):
        await store.create_run(new_run(job_id="nope"))
    with pytest.raises(errors.RunNotFound):
        await store.create_run(new_run(parent_run_id="nope"))
    with pytest.raises(errors.RunNotFound):
        await store.create_run(new_run(history_run_id="nope", history_position=3))
    with pytest.raises(errors.CheckpointNotFound):
        await store.create_run(new_run(forked_from_checkpoint_id="nope"))
    assert (await store.list_jobs()).items == []


async def test_a_follow_up_run_joins_its_job_and_keeps_its_history_link(store: Store) -> None:
    first = await store.create_run(new_run("first"))
    await store.cancel_run(first.id)
    second = await store.create_run(
        new_run("second", job_id=first.job_id, history_run_id=first.id, history_position=0)
    )
    assert (second.job_id, second.history_run_id, second.history_position) == (
        first.job_id,
        first.id,
        0,
    )
    assert [r.id for r in await store.job_runs(first.job_id)] == [first.id, second.id]


async def test_a_second_root_run_is_refused_while_the_jobs_run_is_active(store: Store) -> None:
    first = await store.create_run(new_run("first"))
    with pytest.raises(errors.RunStateConflict):
        await store.create_run(new_run("second", job_id=first.job_id))
    assert [r.id for r in await store.job_runs(first.job_id)] == [first.id]


# --- claiming and finishing ------------------------------------------------------------------


async def test_claiming_a_queued_run_gives_a_fresh_token_and_bumps_revision(
    store: Store,
) -> None:
    created = await store.create_run(new_run())
    claimed = await store.claim_run(created.id, owner_id="owner-1")
    assert claimed.state is RunState.RUNNING
    assert claimed.owner_id == "owner-1" and claimed.execution_token
    assert claimed.revision == created.revision + 1
    with pytest.raises(errors.RunStateConflict):
        await store.claim_run(created.id, owner_id="owner-2")


async def test_a_run_runs_since_its_latest_start_not_its_creation(
    store: Store, clock: ManualClock
) -> None:
    """A TUI that opens a run retried elsewhere counts its working time from the retry: from
    the run's creation, a run retried a day after a crash read "running 24h"."""
    created = await store.create_run(new_run())
    assert await store.running_since(created.id) is None  # queued: it never ran
    clock.advance(10)
    first = await store.claim_run(created.id, owner_id="owner-1")
    assert await store.running_since(created.id) == clock.now()
    assert first.execution_token is not None
    await store.commit_message(created.id, token=first.execution_token, message=assistant("a"))
    await store.finish_run(created.id, token=first.execution_token, to=RunState.QUEUED)
    clock.advance(86400)
    await store.claim_run(created.id, owner_id="owner-2")  # the retry, a day later
    retried_at = clock.now()
    clock.advance(5)
    assert await store.running_since(created.id) == retried_at
    assert await store.running_since("missing") is None


async def test_a_stale_token_is_refused_and_changes_nothing(store: Store) -> None:
    run, old_token = await running_run(store)
    await store.finish_run(run.id, token=old_token, to=RunState.QUEUED)
    again = await store.claim_run(run.id, owner_id="owner-1")
    assert again.execution_token != old_token
    seq = await store.last_seq()
    with pytest.raises(errors.OwnershipLost):
        await store.commit_message(run.id, token=old_token, message=assistant("late"))
    with pytest.raises(errors.OwnershipLost):
        await store.finish_run(run.id, token=old_token, to=RunState.COMPLETED)
    assert await store.last_seq() == seq
    assert (await store.get_run(run.id)).revision == again.revision


async def test_finishing_completed_records_outcome_and_clears_the_token(store: Store) -> None:
    run, token = await running_run(store)
    done = await store.finish_run(run.id, token=token, to=RunState.COMPLETED, outcome="All good")
    assert (done.state, done.outcome, done.execution_token) == (
        RunState.COMPLETED,
        "All good",
        None,
    )
    assert (await store.get_job(run.job_id)).latest_run_state is RunState.COMPLETED
    [*_, last] = await store.read_events(run_id=run.id)
    assert isinstance(last, RunStateChanged) and last.outcome == "All good"


async def test_a_failed_run_carries_its_failure_in_row_and_event(store: Store) -> None:
    run, token = await running_run(store)
    failure = Failure(code="max_steps", message="Stopped after 50 steps")
    failed = await store.finish_run(run.id, token=token, to=RunState.FAILED, failure=failure)
    assert failed.failure == failure
    [*_, last] = await store.read_events(run_id=run.id)
    assert isinstance(last, RunStateChanged) and last.failure == failure


async def test_a_history_repair_is_a_durable_event_of_the_owning_execution(
    store: Store,
) -> None:
    run, token = await running_run(store)
    note = RepairNote(
        tool_use_id="toolu_1", tool_call_id="tc1", name="shell", action="closed_orphan"
    )
    with pytest.raises(errors.OwnershipLost):
        await store.record_history_repair(run.id, token="not-the-token", repairs=[note])
    before = await store.last_seq()
    recorded = await store.record_history_repair(run.id, token=token, repairs=[note])
    assert recorded.seq == before + 1 and recorded.repairs == [note]
    [read] = await store.read_events(after=before, run_id=run.id)
    assert isinstance(read, HistoryRepaired) and read == recorded
    assert (await store.get_run(run.id)).revision == run.revision  # no row changed


async def test_a_request_that_can_no_longer_be_answered_fails_its_call_and_run(
    store: Store,
) -> None:
    run, token = await running_run(store)
    [call] = await step_with_tools(store, run, token, "mcp__ask")
    await store.set_tool_state(call.id, token=token, to=ToolCallState.RUNNING)
    request = NewInputRequest(
        kind=InputKind.ELICITATION, prompt="Who are you?", tool_call_id=call.id
    )
    _, opened = await store.open_input_request(run.id, token=token, request=request)
    with pytest.raises(errors.RequestNotFound):
        await store.fail_unanswerable_request("no-such-request", reason="gone")
    failed = await store.fail_unanswerable_request(opened.id, reason="the session ended")
    assert failed.state is RunState.FAILED and failed.execution_token is None
    assert failed.failure is not None and failed.failure.code == "input_unanswerable"
    # Named by its prompt (a person never saw the request's 32-hex id).
    assert failed.failure.message == (
        "the request for input 'Who are you?' can no longer be answered: the session ended"
    )
    assert (await store.get_tool_call(call.id)).state is ToolCallState.FAILED
    assert (await store.get_input_request(opened.id)).state is InputRequestState.CANCELLED
    [*_, tool_event, run_event] = await store.read_events(run_id=run.id)
    assert isinstance(tool_event, ToolStateChanged) and tool_event.to_state is ToolCallState.FAILED
    assert isinstance(run_event, RunStateChanged)
    assert (run_event.from_state, run_event.to_state) == (RunState.INPUT_REQUIRED, RunState.FAILED)
    with pytest.raises(errors.RunStateConflict):
        await store.fail_unanswerable_request(opened.id, reason="again")


async def test_terminal_runs_never_change(store: Store) -> None:
    run, token = await running_run(store)
    await store.finish_run(run.id, token=token, to=RunState.COMPLETED)
    seq = await store.last_seq()
    with pytest.raises(errors.RunStateConflict):
        await store.cancel_run(run.id)
    with pytest.raises(errors.RunStateConflict):
        await store.claim_run(run.id, owner_id="owner-1")
    with pytest.raises(errors.OwnershipLost):
        await store.finish_run(run.id, token=token, to=RunState.FAILED)
    assert (await store.get_run(run.id)).state is RunState.COMPLETED
    assert await store.last_seq() == seq


async def test_finishing_from_input_required_is_an_illegal_transition(store: Store) -> None:
    run, token = await running_run(store)
    await store.open_input_request(run.id, token=token, request=QUESTION)
    with pytest.raises(errors.IllegalTransition):
        await store.finish_run(run.id, token=token, to=RunState.COMPLETED)
    assert (await store.get_run(run.id)).state is RunState.INPUT_REQUIRED


async def test_set_run_step_needs_the_token_and_records_the_step(store: Store) -> None:
    run, token = await running_run(store)
    stepped = await store.set_run_step(run.id, token=token, step=3)
    assert stepped.step == 3 and stepped.revision == run.revision + 1
    with pytest.raises(errors.OwnershipLost):
        await store.set_run_step(run.id, token="other", step=4)


# --- messages, tool calls, usage -------------------------------------------------------------


async def test_commit_message_reserves_tool_calls_and_emits_one_event_each(store: Store) -> None:
    run, token = await running_run(store)
    await store.set_run_step(run.id, token=token, step=2)
    seq = await store.last_seq()
    calls = await step_with_tools(store, run, token, "list_dir", "read_file", "search")

    assert [(c.index, c.name, c.state, c.step) for c in calls] == [
        (0, "list_dir", ToolCallState.PENDING, 2),
        (1, "read_file", ToolCallState.PENDING, 2),
        (2, "search", ToolCallState.PENDING, 2),
    ]
    assert await store.list_tool_calls(run.id) == calls
    events = await store.read_events(after=seq)
    assert [e.kind for e in events] == ["message_committed"] + ["tool_state_changed"] * 3
    reserved = events[1]
    assert isinstance(reserved, ToolStateChanged)
    assert (reserved.from_state, reserved.to_state, reserved.arguments) == (
        None,
        ToolCallState.PENDING,
        {"path": "f0"},
    )
    messages = await store.list_messages(run.id)
    assert [m.position for m in messages] == [0, 1]


async def test_usage_and_cost_add_up_on_run_and_job_including_child_runs(store: Store) -> None:
    run, token = await running_run(store)
    usage = Usage(input_tokens=100, output_tokens=20, cache_read_tokens=5, cache_write_tokens=1)
    await store.commit_message(run.id, token=token, message=assistant("a", usage=usage, cost=0.5))
    await store.commit_message(run.id, token=token, message=assistant("b", usage=usage, cost=0.5))
    [call] = await step_with_tools(store, run, token, "delegate")
    child = await store.create_run(
        new_run("sub task", job_id=run.job_id, parent_run_id=run.id, parent_tool_call_id=call.id)
    )
    child = await store.claim_run(child.id, owner_id="owner-1")
    assert child.execution_token
    await store.commit_message(
        child.id, token=child.execution_token, message=assistant("c", usage=usage, cost=1.0)
    )

    parent = await store.get_run(run.id)
    assert parent.usage == usage + usage and parent.cost_usd == pytest.approx(1.0)
    assert parent.context_tokens == usage.context_tokens
    job = await store.get_job(run.job_id)
    assert job.usage == usage + usage + usage and job.cost_usd == pytest.approx(2.0)
    # A child run does not replace the job's latest root run state.
    assert job.latest_run_state is RunState.RUNNING
    assert (await store.child_run_for_tool_call(call.id)) == await store.get_run(child.id)
    assert await store.child_run_for_tool_call("nothing") is None


async def test_a_tool_call_moves_through_its_states_with_timings(
    store: Store, clock: ManualClock
) -> None:
    run, token = await running_run(store)
    [call] = await step_with_tools(store, run, token, "read_file")
    clock.advance(1)
    started = await store.set_tool_state(call.id, token=token, to=ToolCallState.RUNNING)
    clock.advance(2)
    done = await store.set_tool_state(
        call.id, token=token, to=ToolCallState.COMPLETED, result="file text"
    )
    assert started.started_at == call.created_at + 1
    assert (done.state, done.result, done.finished_at) == (
        ToolCallState.COMPLETED,
        "file text",
        call.created_at + 3,
    )
    [*_, last] = await store.read_events(run_id=run.id)
    assert isinstance(last, ToolStateChanged)
    assert (last.from_state, last.to_state, last.result) == (
        ToolCallState.RUNNING,
        ToolCallState.COMPLETED,
        "file text",
    )


async def test_an_illegal_tool_transition_is_refused_and_changes_nothing(store: Store) -> None:
    run, token = await running_run(store)
    [call] = await step_with_tools(store, run, token, "read_file")
    await store.set_tool_state(call.id, token=token, to=ToolCallState.FAILED, error="denied")
    seq = await store.last_seq()
    with pytest.raises(errors.IllegalTransition):
        await store.set_tool_state(call.id, token=token, to=ToolCallState.RUNNING)
    with pytest.raises(errors.OwnershipLost):
        await store.set_tool_state(call.id, token="stale", to=ToolCallState.RUNNING)
    with pytest.raises(errors.ToolCallNotFound):
        await store.get_tool_call("missing")
    assert (await store.get_tool_call(call.id)).state is ToolCallState.FAILED
    assert await store.last_seq() == seq


async def test_a_draft_is_saved_in_parts_each_from_where_the_last_ended(
    store: Store, clock: ManualClock
) -> None:
    run, token = await running_run(store)
    await store.save_draft(run.id, token=token, message_id="m1", text="Hel")
    await store.save_draft(run.id, token=token, message_id="m1", text="lo wor", start=3)
    await store.save_draft(run.id, token=token, message_id="m2", text="Other")
    assert [(d.message_id, d.text) for d in await store.get_drafts(run.id)] == [
        ("m1", "Hello wor"),
        ("m2", "Other"),
    ]
    # A part saved again from the same place replaces what was there from that place on.
    clock.advance(1)
    await store.save_draft(run.id, token=token, message_id="m1", text="p!", start=3)
    await store.save_draft(run.id, token=token, message_id="m1", text="?", start=5)
    # Saved last, m1 is now the later draft.
    assert [(d.message_id, d.text) for d in await store.get_drafts(run.id)] == [
        ("m2", "Other"),
        ("m1", "Help!?"),
    ]
    await store.save_draft(run.id, token=token, message_id="m1", text="Anew")
    assert {d.message_id: d.text for d in await store.get_drafts(run.id)}["m1"] == "Anew"
    with pytest.raises(errors.OwnershipLost):
        await store.save_draft(run.id, token="stale", message_id="m1", text="x", start=4)
    assert {d.message_id: d.text for d in await store.get_drafts(run.id)}["m1"] == "Anew"


async def test_a_drafts_thinking_is_kept_in_parts_of_its_own_beside_its_text(
    store: Store, clock: ManualClock
) -> None:
    run, token = await running_run(store)
    thinking = DraftKind.THINKING
    await store.save_draft(run.id, token=token, message_id="m1", text="Let me", kind=thinking)
    await store.save_draft(
        run.id, token=token, message_id="m1", text=" see.", start=6, kind=thinking
    )
    await store.save_draft(run.id, token=token, message_id="m1", text="Two")
    await store.save_draft(run.id, token=token, message_id="m1", text=" files.", start=3)
    await store.save_draft(run.id, token=token, message_id="m2", text="Hmm", kind=thinking)
    assert [(d.message_id, d.thinking, d.text) for d in await store.get_drafts(run.id)] == [
        ("m1", "Let me see.", "Two files."),
        ("m2", "Hmm", ""),
    ]
    # A part replaces only its own kind from its start on.
    clock.advance(1)
    await store.save_draft(run.id, token=token, message_id="m1", text="!", start=3, kind=thinking)
    [m2, m1] = await store.get_drafts(run.id)
    assert (m1.thinking, m1.text, m2.thinking) == ("Let!", "Two files.", "Hmm")
    with pytest.raises(errors.OwnershipLost):
        await store.save_draft(run.id, token="stale", message_id="m2", text="x", kind=thinking)
    # The commit of the message deletes the draft, thinking and all.
    await store.commit_message(
        run.id,
        token=token,
        message=NewMessage(id="m1", role=Role.ASSISTANT, content=[TextBlock(text="Two files.")]),
    )
    assert await store.get_drafts(run.id) == []


async def test_a_run_cancelled_elsewhere_takes_the_last_draft_of_its_executing_owner_only(
    store: Store,
) -> None:
    run, token = await running_run(store, owner_id="owner-1")
    await store.save_draft(run.id, token=token, message_id="m", text="shown bef")
    await store.cancel_run(run.id, reason="from another process")
    with pytest.raises(errors.OwnershipLost):  # the token alone no longer writes
        await store.save_draft(run.id, token=token, message_id="m", text="ore", start=9)
    with pytest.raises(errors.OwnershipLost):  # nor another process
        await store.save_draft(
            run.id, token=token, message_id="m", text="ore", start=9, owner_id="owner-2"
        )
    await store.save_draft(
        run.id, token=token, message_id="m", text="ore the cancel", start=9, owner_id="owner-1"
    )
    [draft] = await store.get_drafts(run.id)
    assert draft.text == "shown before the cancel"


async def test_a_committed_message_replaces_its_draft(store: Store) -> None:
    run, token = await running_run(store)
    await store.save_draft(run.id, token=token, message_id="m1", text="Hel")
    await store.save_draft(run.id, token=token, message_id="m1", text="Hello wor")
    [draft] = await store.get_drafts(run.id)
    assert (draft.message_id, draft.text) == ("m1", "Hello wor")
    seq = await store.last_seq()
    message, _ = await store.commit_message(
        run.id,
        token=token,
        message=NewMessage(id="m1", role=Role.ASSISTANT, content=[TextBlock(text="Hello world")]),
    )
    assert message.id == "m1"
    assert await store.get_drafts(run.id) == []
    assert await store.last_seq() == seq + 1
    # A last save racing the commit (a cancel's, of all that was shown) lands after it:
    # nothing of a committed message is kept as a draft.
    await store.save_draft(run.id, token=token, message_id="m1", text="Hello world")
    assert await store.get_drafts(run.id) == []


# --- input requests --------------------------------------------------------------------------


async def test_an_input_request_moves_the_run_and_its_event_carries_it(store: Store) -> None:
    run, token = await running_run(store)
    waiting, request = await store.open_input_request(run.id, token=token, request=QUESTION)
    assert waiting.state is RunState.INPUT_REQUIRED
    assert request.state is InputRequestState.PENDING and request.options == ["a", "b"]
    [*_, last] = await store.read_events(run_id=run.id)
    assert isinstance(last, RunStateChanged) and last.request == request
    assert await store.pending_input_requests() == [request]
    assert (await store.get_job(run.job_id)).latest_run_state is RunState.INPUT_REQUIRED


async def test_an_answer_names_who_goes_on_with_the_run_or_leaves_it_with_its_owner(
    store: Store,
) -> None:
    first, token = await running_run(store, owner_id="owner-1")
    _, request = await store.open_input_request(first.id, token=token, request=QUESTION)
    kept, _ = await store.answer_input_request(request.id, answer="a")
    assert kept.owner_id == "owner-1"
    second, token = await running_run(store, owner_id="owner-1")
    _, request = await store.open_input_request(second.id, token=token, request=QUESTION)
    taken, _ = await store.answer_input_request(request.id, answer="a", owner_id="owner-2")
    assert taken.owner_id == "owner-2"
    assert (await store.get_run(second.id)).owner_id == "owner-2"


async def test_answering_queues_the_run_and_a_second_answer_is_refused(store: Store) -> None:
    run, token = await running_run(store)
    _, request = await store.open_input_request(run.id, token=token, request=QUESTION)
    queued, answered = await store.answer_input_request(request.id, answer="a")
    assert (queued.state, queued.execution_token) == (RunState.QUEUED, None)
    assert (answered.state, answered.answer) == (InputRequestState.ANSWERED, "a")
    assert answered.answered_at is not None
    seq = await store.last_seq()
    with pytest.raises(errors.AlreadyAnswered):
        await store.answer_input_request(request.id, answer="b")
    assert await store.last_seq() == seq
    assert await store.pending_input_requests() == []
    assert await store.list_input_requests(run.id) == [answered]


async def test_a_retried_answer_with_its_key_returns_the_first_result(store: Store) -> None:
    run, token = await running_run(store)
    _, request = await store.open_input_request(run.id, token=token, request=QUESTION)
    first = await store.answer_input_request(request.id, answer="a", idempotency_key="r1")
    seq = await store.last_seq()
    assert await store.answer_input_request(request.id, answer="a", idempotency_key="r1") == first
    with pytest.raises(errors.IdempotencyConflict):
        await store.answer_input_request(request.id, answer="b", idempotency_key="r1")
    assert await store.last_seq() == seq


async def test_an_answer_for_a_tool_call_that_ended_is_a_conflict(store: Store) -> None:
    run, token = await running_run(store)
    [call] = await step_with_tools(store, run, token, "write_file")
    approval = NewInputRequest(kind=InputKind.APPROVAL, prompt="Write?", tool_call_id=call.id)
    _, request = await store.open_input_request(run.id, token=token, request=approval)
    await store.set_tool_state(call.id, token=token, to=ToolCallState.CANCELLED)
    with pytest.raises(errors.RunStateConflict):
        await store.answer_input_request(request.id, answer={"decision": "allow_once"})
    assert (await store.get_input_request(request.id)).state is InputRequestState.PENDING


async def test_cancelling_the_only_request_puts_the_run_back_in_the_queue(store: Store) -> None:
    run, token = await running_run(store)
    _, request = await store.open_input_request(run.id, token=token, request=QUESTION)
    cancelled = await store.cancel_input_request(request.id, token=token, reason="timed out")
    assert cancelled.state is InputRequestState.CANCELLED
    assert (await store.get_run(run.id)).state is RunState.QUEUED
    with pytest.raises(errors.RunStateConflict):
        await store.answer_input_request(request.id, answer="a")
    with pytest.raises(errors.RequestNotFound):
        await store.answer_input_request("missing", answer="a")


# --- cancel ----------------------------------------------------------------------------------


async def test_cancel_closes_open_tool_calls_and_requests_in_one_change(store: Store) -> None:
    run, token = await running_run(store)
    first, second, third = await step_with_tools(store, run, token, "a", "b", "c")
    await store.set_tool_state(first.id, token=token, to=ToolCallState.RUNNING)
    await store.set_tool_state(first.id, token=token, to=ToolCallState.COMPLETED, result="ok")
    await store.set_tool_state(second.id, token=token, to=ToolCallState.RUNNING)
    _, request = await store.open_input_request(run.id, token=token, request=QUESTION)
    seq = await store.last_seq()

    cancelled = await store.cancel_run(run.id, reason="user pressed c")

    assert (cancelled.state, cancelled.cancel_reason, cancelled.execution_token) == (
        RunState.CANCELLED,
        "user pressed c",
        None,
    )
    states = [c.state for c in await store.list_tool_calls(run.id)]
    assert states == [ToolCallState.COMPLETED, ToolCallState.CANCELLED, ToolCallState.CANCELLED]
    assert (await store.get_input_request(request.id)).state is InputRequestState.CANCELLED
    events = await store.read_events(after=seq)
    assert [(e.kind, getattr(e, "tool_call_id", None)) for e in events] == [
        ("tool_state_changed", second.id),
        ("tool_state_changed", third.id),
        ("run_state_changed", None),
    ]
    last = events[-1]
    assert isinstance(last, RunStateChanged) and last.reason == "user pressed c"
    with pytest.raises(errors.OwnershipLost):
        await store.commit_message(run.id, token=token, message=assistant("late"))


PARTIAL = Usage(input_tokens=1200, output_tokens=40, cache_read_tokens=300, cache_write_tokens=8)


async def test_a_cancel_counts_the_usage_of_the_message_it_cuts_short_in_run_and_job(
    store: Store,
) -> None:
    run, token = await running_run(store)
    usage = Usage(input_tokens=100, output_tokens=20)
    await store.commit_message(run.id, token=token, message=assistant("a", usage=usage, cost=0.5))
    seq = await store.last_seq()

    cut_short = CutShortUsage(message_id="m-streaming", usage=PARTIAL, cost_usd=0.25)
    cancelled = await store.cancel_run(run.id, reason="Esc", cut_short=cut_short)

    assert cancelled.state is RunState.CANCELLED
    assert cancelled.usage == usage + PARTIAL and cancelled.cost_usd == pytest.approx(0.75)
    assert await store.get_run(run.id) == cancelled
    job = await store.get_job(run.job_id)
    assert job.usage == usage + PARTIAL and job.cost_usd == pytest.approx(0.75)
    assert job.latest_run_state is RunState.CANCELLED
    # The note says what the totals took (the transcript, exports and other processes read it).
    noted, ended = await store.read_events(after=seq)
    assert isinstance(noted, RunNoted) and noted.note == "cut_short"
    assert noted.data["message_id"] == "m-streaming"
    counted = {k: v for k, v in noted.data.items() if k not in ("message_id", "cost_usd")}
    assert Usage.model_validate(counted) == PARTIAL and noted.data["cost_usd"] == 0.25
    assert isinstance(ended, RunStateChanged) and ended.to_state is RunState.CANCELLED


async def test_a_cancel_does_not_count_twice_a_message_committed_after_all(store: Store) -> None:
    """The message ended and was committed with its own usage between the last save and the
    cancel's commit: the partial figures of it are not added on top."""
    run, token = await running_run(store)
    usage = Usage(input_tokens=1200, output_tokens=90)
    message = assistant("the whole answer", usage=usage, cost=0.5)
    await store.commit_message(run.id, token=token, message=message.model_copy(update={"id": "m"}))
    cut_short = CutShortUsage(message_id="m", usage=PARTIAL, cost_usd=0.25)
    seq = await store.last_seq()
    cancelled = await store.cancel_run(run.id, cut_short=cut_short)
    assert cancelled.usage == usage and cancelled.cost_usd == pytest.approx(0.5)
    assert (await store.get_job(run.job_id)).usage == usage
    assert [e.kind for e in await store.read_events(after=seq)] == ["run_state_changed"]


async def test_a_message_cut_short_is_counted_by_its_execution_or_its_owner_after_a_cancel(
    store: Store,
) -> None:
    run, token = await running_run(store, owner_id="owner-1")
    failed = CutShortUsage(message_id="m1", usage=PARTIAL, cost_usd=0.25)
    noted = await store.note_cut_short(run.id, token=token, cut_short=failed)  # a stream failed
    assert noted.state is RunState.RUNNING and noted.usage == PARTIAL
    assert noted.cost_usd == pytest.approx(0.25)

    await store.cancel_run(run.id, reason="from another process")
    cut_short = CutShortUsage(message_id="m2", usage=PARTIAL, cost_usd=0.25)
    with pytest.raises(errors.OwnershipLost):  # the token alone no longer writes
        await store.note_cut_short(run.id, token=token, cut_short=cut_short)
    with pytest.raises(errors.OwnershipLost):  # nor another process
        await store.note_cut_short(run.id, token=token, owner_id="owner-2", cut_short=cut_short)
    seq = await store.last_seq()
    after = await store.note_cut_short(run.id, token=token, owner_id="owner-1", cut_short=cut_short)

    # Written after the cancel: the note is what tells whoever shows the run that it changed.
    [noted] = await store.read_events(after=seq)
    assert isinstance(noted, RunNoted) and noted.note == "cut_short"
    assert noted.data["message_id"] == "m2" and noted.data["output_tokens"] == 40
    assert after.state is RunState.CANCELLED
    assert after.usage == PARTIAL + PARTIAL and after.cost_usd == pytest.approx(0.5)
    job = await store.get_job(run.job_id)
    assert job.usage == PARTIAL + PARTIAL and job.cost_usd == pytest.approx(0.5)


async def test_a_queued_run_can_be_cancelled(store: Store) -> None:
    run = await store.create_run(new_run())
    assert (await store.cancel_run(run.id)).state is RunState.CANCELLED
    with pytest.raises(errors.RunNotFound):
        await store.cancel_run("missing")


# --- checkpoints -----------------------------------------------------------------------------


async def test_a_checkpoint_refers_to_messages_and_never_copies_them(store: Store) -> None:
    run, token = await running_run(store)
    usage = Usage(input_tokens=10, output_tokens=3)
    await store.commit_message(run.id, token=token, message=assistant("a", usage=usage))
    first, second = await step_with_tools(store, run, token, "a", "b")
    await store.set_tool_state(first.id, token=token, to=ToolCallState.RUNNING)
    checkpoint = await store.create_checkpoint(run.id, token=token, step=1)

    assert (checkpoint.step, checkpoint.last_position) == (1, 2)
    assert checkpoint.usage == usage
    assert checkpoint.pending_tool_call_ids == [second.id]
    assert await store.get_checkpoint(checkpoint.id) == checkpoint
    assert await store.list_checkpoints(run.id) == [checkpoint]
    assert len(await store.list_messages(run.id)) == 3
    [*_, last] = await store.read_events(run_id=run.id)
    assert isinstance(last, CheckpointCreated) and last.checkpoint_id == checkpoint.id
    with pytest.raises(errors.CheckpointNotFound):
        await store.get_checkpoint("missing")


async def test_a_fork_points_at_its_checkpoint(store: Store) -> None:
    run, token = await running_run(store)
    checkpoint = await store.create_checkpoint(run.id, token=token, step=0)
    fork = await store.create_run(
        new_run(
            "try another way",
            forked_from_checkpoint_id=checkpoint.id,
            history_run_id=run.id,
            history_position=checkpoint.last_position,
        )
    )
    assert fork.job_id != run.job_id
    assert fork.forked_from_checkpoint_id == checkpoint.id


# --- events ----------------------------------------------------------------------------------


async def test_events_page_by_cursor_oldest_first_and_filter(store: Store) -> None:
    one = await store.create_run(new_run("one"))
    two = await store.create_run(new_run("two"))
    assert await store.last_seq() == 4
    everything = await store.read_events()
    assert [e.seq for e in everything] == [1, 2, 3, 4]
    assert [e.seq for e in await store.read_events(after=1, limit=2)] == [2, 3]
    assert {e.run_id for e in await store.read_events(run_id=two.id)} == {two.id}
    assert {e.job_id for e in await store.read_events(job_id=one.job_id)} == {one.job_id}
    assert await store.read_events(after=4) == []
    with pytest.raises(errors.CursorOutOfRange):
        await store.read_events(after=5)


async def test_an_empty_log_starts_at_zero(store: Store) -> None:
    assert await store.last_seq() == 0
    assert await store.read_events() == []


# --- queries ---------------------------------------------------------------------------------


async def test_jobs_list_newest_activity_first_in_pages(store: Store, clock: ManualClock) -> None:
    runs = []
    for i in range(5):
        runs.append(await store.create_run(new_run(f"job {i}")))
    clock.advance(1)
    await store.claim_run(runs[1].id, owner_id="owner-1")  # job 1 becomes the most recent

    first = await store.list_jobs(limit=2)
    assert first.next_cursor is not None
    second = await store.list_jobs(limit=2, cursor=first.next_cursor)
    third = await store.list_jobs(limit=2, cursor=second.next_cursor)
    titles = [j.title for page in (first, second, third) for j in page.items]
    assert titles[0] == "job 1"
    assert sorted(titles) == [f"job {i}" for i in range(5)]
    assert third.next_cursor is None
    running = await store.list_jobs(state=RunState.RUNNING)
    assert [j.title for j in running.items] == ["job 1"]
    with pytest.raises(errors.InvalidInput):
        await store.list_jobs(cursor="not a cursor")


async def test_queued_jobs_leave_out_or_list_only_those_an_interrupted_run_holds(
    store: Store, clock: ManualClock
) -> None:
    """A run a quit stopped is queued but waits for a person to retry it: ``interrupted=False``
    lists the queued jobs about to start, ``interrupted=True`` only the others."""
    waiting = await store.create_run(new_run("about to start"))
    clock.advance(1)
    run, token = await running_run(store)
    await store.stop_run(run.id, token=token, reason="stopped when agent-tui closed")
    clock.advance(1)
    done, done_token = await running_run(store)
    await store.finish_run(done.id, token=done_token, to=RunState.COMPLETED, outcome="done")

    def ids(page: Page[Job]) -> list[str]:
        return [job.id for job in page.items]

    queued = await store.list_jobs(state=RunState.QUEUED)
    assert ids(queued) == [run.job_id, waiting.job_id]  # the store's state, as it was
    about_to_start = await store.list_jobs(state=RunState.QUEUED, interrupted=False)
    assert ids(about_to_start) == [waiting.job_id]
    assert ids(await store.list_jobs(interrupted=True)) == [run.job_id]
    assert ids(await store.list_jobs(interrupted=False)) == [done.job_id, waiting.job_id]
    first = await store.list_jobs(limit=1, interrupted=False)
    second = await store.list_jobs(limit=1, interrupted=False, cursor=first.next_cursor)
    assert ids(first) + ids(second) == [done.job_id, waiting.job_id]
    assert second.next_cursor is None


async def test_a_steps_commits_stamp_the_jobs_activity_once_a_second_and_add_every_usage(
    store: Store, clock: ManualClock
) -> None:
    """The job list orders by activity: a step's commits stamp it at most once a second of the
    run's work (each stamp rewrites two indexes), while the totals take every message."""
    run, token = await running_run(store)
    claimed_at = (await store.get_job(run.job_id)).updated_at
    usage = Usage(input_tokens=10, output_tokens=2)
    clock.advance(0.3)  # the same second as the claim
    await store.commit_message(run.id, token=token, message=assistant("a", usage=usage, cost=0.1))
    await store.commit_message(run.id, token=token, message=assistant("b"))
    job = await store.get_job(run.job_id)
    assert job.updated_at == claimed_at and job.usage == usage
    clock.advance(1)  # a later second: the first commit in it stamps
    stamped_at = clock.now()
    await store.commit_message(run.id, token=token, message=assistant("c", usage=usage, cost=0.1))
    clock.advance(0.2)
    await store.commit_message(run.id, token=token, message=assistant("d"))
    job = await store.get_job(run.job_id)
    assert job.updated_at == stamped_at and job.usage == usage + usage
    assert job.cost_usd == pytest.approx(0.2)
    clock.advance(0.2)
    await store.finish_run(run.id, token=token, to=RunState.COMPLETED, outcome="done")
    job = await store.get_job(run.job_id)  # a change of state always stamps
    assert job.updated_at == clock.now() and job.latest_run_state is RunState.COMPLETED


async def test_runs_list_newest_first_in_pages_with_a_state_filter(store: Store) -> None:
    created = [await store.create_run(new_run(f"run {i}")) for i in range(5)]
    await store.claim_run(created[2].id, owner_id="o")
    page = await store.list_runs(limit=3)
    rest = await store.list_runs(limit=3, cursor=page.next_cursor)
    assert [r.id for r in page.items + rest.items] == [r.id for r in reversed(created)]
    assert rest.next_cursor is None
    assert [r.id for r in (await store.list_runs(state=RunState.RUNNING)).items] == [created[2].id]
    counts = await store.count_runs_by_state()
    assert counts[RunState.QUEUED] == 4 and counts[RunState.RUNNING] == 1
    assert counts[RunState.FAILED] == 0


async def test_messages_are_read_in_windows_by_position(store: Store) -> None:
    run, token = await running_run(store)
    for i in range(1, 10):
        await store.commit_message(run.id, token=token, message=assistant(f"m{i}"))
    positions = [m.position for m in await store.list_messages(run.id, limit=3)]
    assert positions == [0, 1, 2]
    after = await store.list_messages(run.id, after_position=2, limit=3)
    assert [m.position for m in after] == [3, 4, 5]
    before = await store.list_messages(run.id, before_position=9, limit=3)
    assert [m.position for m in before] == [6, 7, 8]
    between = await store.list_messages(run.id, after_position=4, before_position=7)
    assert [m.position for m in between] == [5, 6]


async def test_message_windows_take_bounds_beyond_any_position(store: Store) -> None:
    """The readers' "from the end" and "from the start" bounds (``PARTIAL``, 2**62) are past any
    position a column holds; PostgreSQL refused them as out of its integer range, and the TUI
    opened no run there."""
    run, token = await running_run(store)
    for i in range(1, 5):
        await store.commit_message(run.id, token=token, message=assistant(f"m{i}"))
    last = await store.list_messages(run.id, before_position=PAST_ANY_POSITION, limit=2)
    assert [m.position for m in last] == [3, 4]
    every = await store.list_messages(
        run.id, after_position=-PAST_ANY_POSITION, before_position=PAST_ANY_POSITION
    )
    assert [m.position for m in every] == [0, 1, 2, 3, 4]
    assert await store.list_messages(run.id, after_position=PAST_ANY_POSITION) == []


async def test_the_inbox_lists_open_requests_oldest_first(store: Store, clock: ManualClock) -> None:
    first, first_token = await running_run(store)
    second, second_token = await running_run(store)
    _, older = await store.open_input_request(first.id, token=first_token, request=QUESTION)
    clock.advance(1)
    _, newer = await store.open_input_request(second.id, token=second_token, request=QUESTION)
    assert [r.id for r in await store.pending_input_requests()] == [older.id, newer.id]
    assert [r.id for r in await store.pending_input_requests(run_id=second.id)] == [newer.id]


async def test_search_finds_text_and_tool_results_best_first(store: Store) -> None:
    run, token = await running_run(store, text="Where is the parser configured?")
    calls = await step_with_tools(store, run, token, "read_file")
    await store.commit_message(
        run.id, token=token, message=tool_result_message(calls, "parser = toml parser config")
    )
    await store.commit_message(run.id, token=token, message=assistant("unrelated words"))

    hits = await store.search_messages("parser")
    assert len(hits) == 2
    assert "«parser»" in hits[0].snippet and hits[0].snippet.count("«") >= 2
    assert hits[0].job_title == "Where is the parser configured?"
    positions = {m.id: m.position for m in await store.list_messages(run.id)}
    assert [hit.position for hit in hits] == [positions[hit.message_id] for hit in hits]
    assert [hit.role for hit in hits] == [Role.TOOL, Role.USER]  # who wrote what was found
    assert await store.search_messages("pars") != []  # the last word matches as a prefix
    assert await store.search_messages("nothing-like-this") == []


async def test_a_search_snippet_keeps_the_words_after_the_match(store: Store) -> None:
    """Hits of similar messages are told apart by what follows the word found (PostgreSQL's
    fragments ended at the match: "…some «content»" for both)."""
    for number in range(2):
        await running_run(store, text=f"Summarise this project\nsome content {number}")
    hits = await store.search_messages("content")
    assert sorted(hit.snippet.split("«content»")[1].strip()[:1] for hit in hits) == ["0", "1"]


@pytest.mark.parametrize(
    "query", ['foo"bar', "a AND (", "*", "NEAR(", "-x", '"', "   ", "col:value", "^start"]
)
async def test_search_never_fails_on_punctuation(store: Store, query: str) -> None:
    run, token = await running_run(store)
    await store.commit_message(run.id, token=token, message=assistant("foo bar a value x"))
    assert isinstance(await store.search_messages(query), list)


async def test_lookups_of_missing_rows_raise_not_found(store: Store) -> None:
    with pytest.raises(errors.RunNotFound):
        await store.get_run("missing")
    with pytest.raises(errors.JobNotFound):
        await store.get_job("missing")
    with pytest.raises(errors.JobNotFound):
        await store.job_runs("missing")
    with pytest.raises(errors.RequestNotFound):
        await store.get_input_request("missing")


# --- owners and recovery ---------------------------------------------------------------------


async def test_recovery_requeues_a_run_whose_owner_lease_expired(
    store: Store, clock: ManualClock
) -> None:
    await store.register_owner("dead", lease_seconds=10)
    await store.register_owner("alive", lease_seconds=100)
    run, token = await running_run(store, owner_id="dead")
    [read_call] = await step_with_tools(store, run, token, "read_file", idempotent=True)
    await store.set_tool_state(read_call.id, token=token, to=ToolCallState.RUNNING)
    other, _ = await running_run(store, owner_id="alive")
    clock.advance(11)

    report = await store.recover_expired()

    assert report.requeued == [run.id] and report.failed == []
    recovered = await store.get_run(run.id)
    assert (recovered.state, recovered.interrupted, recovered.execution_token) == (
        RunState.QUEUED,
        True,
        None,
    )
    assert (await store.get_tool_call(read_call.id)).state is ToolCallState.PENDING
    assert (await store.get_run(other.id)).state is RunState.RUNNING
    assert await store.live_owners() == ["alive"]
    with pytest.raises(errors.OwnershipLost):
        await store.heartbeat("dead")
    with pytest.raises(errors.OwnershipLost):
        await store.commit_message(run.id, token=token, message=assistant("late"))
    reclaimed = await store.claim_run(run.id, owner_id="alive")
    assert not reclaimed.interrupted
    assert (await store.recover_expired()).requeued == []


async def test_recovery_fails_a_run_whose_tool_outcome_is_unknown(
    store: Store, clock: ManualClock
) -> None:
    await store.register_owner("dead", lease_seconds=10)
    run, token = await running_run(store, owner_id="dead")
    [shell] = await step_with_tools(store, run, token, "shell")
    await store.set_tool_state(shell.id, token=token, to=ToolCallState.RUNNING)
    clock.advance(11)

    report = await store.recover_expired()

    assert report.failed == [run.id]
    failed = await store.get_run(run.id)
    assert failed.state is RunState.FAILED and failed.failure is not None
    assert failed.failure.code == "tool_indeterminate" and "shell" in failed.failure.message
    assert (await store.get_tool_call(shell.id)).state is ToolCallState.INDETERMINATE
    kinds = [e.kind for e in await store.read_events(run_id=run.id)][-2:]
    assert kinds == ["tool_state_changed", "run_state_changed"]


async def test_recovery_counts_the_answer_a_dead_process_was_streaming_once_as_an_estimate(
    store: Store, clock: ManualClock
) -> None:
    """A `kill -9` mid-answer: the provider's usage never arrived, so recovery counts the saved
    draft as a cancel counts an answer cut short (its output estimated from the characters
    shown, priced by the run's model), with the same `cut_short` note, and only once."""
    await store.register_owner("dead", lease_seconds=10)
    run, token = await running_run(store, owner_id="dead", model="anthropic:claude-sonnet-4-5")
    usage = Usage(input_tokens=100, output_tokens=20)
    await store.commit_message(run.id, token=token, message=assistant("a", usage=usage, cost=0.5))
    shown = "word " * 400  # 2,000 characters, and 12 of thinking: about 503 tokens
    await store.save_draft(run.id, token=token, message_id="m-streaming", text=shown)
    await store.save_draft(
        run.id, token=token, message_id="m-streaming", text="Let me think", kind=DraftKind.THINKING
    )
    clock.advance(11)
    seq = await store.last_seq()
    priced: list[tuple[str, Usage]] = []

    def price(model: str, spent: Usage) -> float:
        priced.append((model, spent))
        return 0.25

    report = await store.recover_expired(price=price)

    estimate = Usage(output_tokens=503)
    assert report.requeued == [run.id]
    assert priced == [("anthropic:claude-sonnet-4-5", estimate)]
    recovered = await store.get_run(run.id)
    assert recovered.state is RunState.QUEUED and recovered.interrupted
    assert recovered.usage == usage + estimate
    assert recovered.cost_usd == pytest.approx(0.75)
    job = await store.get_job(run.job_id)
    assert job.usage == usage + estimate and job.cost_usd == pytest.approx(0.75)
    noted, requeued = await store.read_events(after=seq)
    assert isinstance(noted, RunNoted) and noted.note == "cut_short"
    assert noted.data["message_id"] == "m-streaming" and noted.data["recovered"] is True
    assert noted.data["output_tokens"] == 503 and noted.data["input_tokens"] == 0
    assert noted.data["cost_usd"] == 0.25
    assert "about 503 tokens" in noted.text and "estimated from its saved text" in noted.text
    assert isinstance(requeued, RunStateChanged) and requeued.to_state is RunState.QUEUED
    # The partial answer itself stays: what was shown is kept, not only counted.
    [draft] = await store.get_drafts(run.id)
    assert draft.text == shown

    # Recovery again (another process, a later launch): nothing is counted twice.
    again = await store.recover_expired(price=price)
    assert again.requeued == [] and (await store.get_run(run.id)).usage == usage + estimate
    # Retried and killed again: the new attempt's answer counts, the first one not again.
    await store.register_owner("dead-too", lease_seconds=10)
    retried = await store.claim_run(run.id, owner_id="dead-too")
    assert retried.execution_token is not None
    await store.save_draft(
        run.id, token=retried.execution_token, message_id="m-again", text="x" * 40
    )
    clock.advance(11)
    assert (await store.recover_expired(price=price)).requeued == [run.id]
    assert (await store.get_run(run.id)).usage == usage + estimate + Usage(output_tokens=10)
    assert (await store.get_job(run.job_id)).usage == usage + estimate + Usage(output_tokens=10)
    notes = await store.list_notes(run_ids=[run.id])
    assert [n.data["message_id"] for n in notes] == ["m-streaming", "m-again"]


async def test_recovery_does_not_count_again_an_answer_its_process_counted_before_dying(
    store: Store, clock: ManualClock
) -> None:
    """Its stream failed (the process counted it and tried again), then the process died: the
    first answer is in the totals once, the second one is added by recovery."""
    await store.register_owner("dead", lease_seconds=10)
    run, token = await running_run(store, owner_id="dead")
    await store.save_draft(run.id, token=token, message_id="m1", text="first try " * 10)
    failed = CutShortUsage(message_id="m1", usage=PARTIAL, cost_usd=0.25)
    await store.note_cut_short(run.id, token=token, cut_short=failed)
    await store.save_draft(run.id, token=token, message_id="m2", text="second try " * 4)
    clock.advance(11)

    await store.recover_expired()

    recovered = await store.get_run(run.id)
    assert recovered.usage == PARTIAL + Usage(output_tokens=11)
    assert recovered.cost_usd == pytest.approx(0.25)  # no price given: the estimate costs 0
    notes = await store.list_notes(run_ids=[run.id])
    assert [(n.data["message_id"], n.data.get("recovered")) for n in notes] == [
        ("m1", None),
        ("m2", True),
    ]


async def test_the_partial_answer_of_a_crashed_attempt_stays_when_the_run_goes_on(
    store: Store, clock: ManualClock
) -> None:
    """Retried after a crash, the run's commits replace only what its new execution streams:
    the answer the dead process had shown is kept, before the message the run went on with."""
    await store.register_owner("dead", lease_seconds=10)
    run, token = await running_run(store, owner_id="dead")
    await store.save_draft(run.id, token=token, message_id="m-cut", text="1. The first")
    await store.save_draft(run.id, token=token, message_id="m-cut", text=" point", start=12)
    clock.advance(11)
    await store.recover_expired()
    [draft] = await store.get_drafts(run.id)
    assert (draft.text, draft.before_position) == ("1. The first point", None)

    await store.register_owner("alive", lease_seconds=100)
    retried = await store.claim_run(run.id, owner_id="alive")
    assert retried.execution_token is not None
    new_token = retried.execution_token
    [kept] = await store.get_drafts(run.id)
    assert (kept.message_id, kept.before_position) == ("m-cut", 1)  # after the prompt
    await store.save_draft(run.id, token=new_token, message_id="m-new", text="1. The fi")
    answer = NewMessage(id="m-new", role=Role.ASSISTANT, content=[TextBlock(text="1. The end")])
    await store.commit_final_message(
        run.id, token=new_token, message=answer, step=1, outcome="1. The end"
    )

    [kept] = await store.get_drafts(run.id)
    assert (kept.message_id, kept.text, kept.before_position) == ("m-cut", "1. The first point", 1)
    assert [m.id for m in await store.list_messages(run.id)][1:] == ["m-new"]


async def test_a_released_owner_is_recovered_at_once_but_waiting_runs_stay(
    store: Store,
) -> None:
    await store.register_owner("gone", lease_seconds=1000)
    queued = await store.create_run(new_run("later", owner_id="gone"))
    waiting, token = await running_run(store, owner_id="gone")
    await store.open_input_request(waiting.id, token=token, request=QUESTION)
    await store.release_owner("gone")
    seq = await store.last_seq()

    report = await store.recover_expired()

    assert report.interrupted_queued == [queued.id] and report.requeued == []
    assert (await store.get_run(queued.id)).interrupted
    assert (await store.get_run(waiting.id)).state is RunState.INPUT_REQUIRED
    assert await store.last_seq() == seq  # marking interrupted is not a state change
    assert len(await store.pending_input_requests()) == 1


async def test_a_heartbeat_extends_the_lease(store: Store, clock: ManualClock) -> None:
    await store.register_owner("me", lease_seconds=10)
    run, _ = await running_run(store, owner_id="me")
    for _ in range(3):
        clock.advance(8)
        await store.heartbeat("me")
    assert (await store.recover_expired()).requeued == []
    assert (await store.get_run(run.id)).state is RunState.RUNNING


async def test_two_stores_on_one_file_see_each_others_commits(
    make_store: StoreFactory,
) -> None:
    first = await make_store("shared.db")
    second = await make_store("shared.db")
    run = await first.create_run(new_run("shared"))
    claimed = await second.claim_run(run.id, owner_id="second")
    with pytest.raises(errors.RunStateConflict):
        await first.claim_run(run.id, owner_id="first")
    assert (await first.get_run(run.id)).execution_token == claimed.execution_token
    assert [e.seq for e in await first.read_events()] == [1, 2, 3]


# --- compare-and-set on the run's revision ------------------------------------------------------


async def test_an_answer_stating_a_stale_revision_is_refused_and_changes_nothing(
    store: Store,
) -> None:
    run, token = await running_run(store)
    waiting, request = await store.open_input_request(run.id, token=token, request=QUESTION)
    with pytest.raises(errors.RevisionConflict):
        await store.answer_input_request(
            request.id, answer="a", expected_revision=waiting.revision - 1
        )
    assert (await store.get_input_request(request.id)).state is InputRequestState.PENDING
    assert (await store.get_run(run.id)).revision == waiting.revision
    answered, _ = await store.answer_input_request(
        request.id, answer="a", expected_revision=waiting.revision
    )
    assert answered.state is RunState.QUEUED and answered.revision == waiting.revision + 1


async def test_a_cancel_stating_a_stale_revision_is_refused_and_changes_nothing(
    store: Store,
) -> None:
    created = await store.create_run(new_run())
    claimed = await store.claim_run(created.id, owner_id="owner-1")
    with pytest.raises(errors.RevisionConflict):
        await store.cancel_run(created.id, expected_revision=created.revision)
    assert (await store.get_run(created.id)).state is RunState.RUNNING
    cancelled = await store.cancel_run(created.id, expected_revision=claimed.revision)
    assert cancelled.state is RunState.CANCELLED


# --- one step in two transactions ----------------------------------------------------------------


async def test_a_step_in_two_transactions_returns_everything_it_committed(store: Store) -> None:
    """The engine keeps its history from what these two calls return: the run, the messages,
    the calls, the checkpoint and the events (with their seq) are what a reader finds later."""
    run, token = await running_run(store)
    after = await store.last_seq()
    calls = tool_calls("read_file", "read_file")
    started = [c.model_copy(update={"start": True}) for c in calls]
    usage = Usage(input_tokens=100, output_tokens=10)
    first = await store.commit_assistant_message_with_calls(
        run.id,
        token=token,
        message=NewMessage(
            role=Role.ASSISTANT, content=[TextBlock(text="Reading.")], usage=usage, cost_usd=0.2
        ),
        tool_calls=started,
        step=1,
    )
    assert first.message is not None and first.checkpoint is None
    assert (first.run.step, first.run.usage, first.run.revision) == (1, usage, run.revision + 1)
    assert [c.state for c in first.tool_calls] == [ToolCallState.RUNNING] * 2

    second = await store.commit_step_results(
        run.id,
        token=token,
        tool_changes=[
            ToolStateChange(tool_call_id=c.id, to=ToolCallState.COMPLETED, result=f"text {i}")
            for i, c in enumerate(first.tool_calls)
        ],
        message=tool_result_message(first.tool_calls, "text"),
        checkpoint_step=1,
    )
    assert second.message is not None and second.checkpoint is not None
    assert second.message.position == first.message.position + 1
    assert second.checkpoint.last_position == second.message.position
    assert second.run.usage == usage and second.run.revision == first.run.revision + 1
    assert [c.result for c in second.tool_calls] == ["text 0", "text 1"]

    committed = first.events + second.events
    read = await store.read_events(after=after)
    assert [dump_event(e) for e in committed] == [dump_event(e) for e in read]
    assert await store.get_run(run.id) == second.run
    assert await store.list_messages(run.id, after_position=0) == [first.message, second.message]
    assert await store.list_tool_calls(run.id) == second.tool_calls
    assert (await store.get_job(run.job_id)).usage == usage


async def test_a_run_that_ends_with_its_message_commits_it_its_checkpoint_and_its_end_at_once(
    store: Store,
) -> None:
    """The engine's last write of a run that completes: what ``commit_message``,
    ``create_checkpoint`` and ``finish_run`` write, in one transaction, its events in that
    order, so an observer gets the last words and the end together."""
    run, token = await running_run(store)
    await store.save_draft(run.id, token=token, message_id="m1", text="All do")
    after = await store.last_seq()
    usage = Usage(input_tokens=50, output_tokens=5)
    done = await store.commit_final_message(
        run.id,
        token=token,
        message=NewMessage(
            id="m1",
            role=Role.ASSISTANT,
            content=[TextBlock(text="All done.")],
            usage=usage,
            cost_usd=0.1,
        ),
        step=2,
        outcome="All done.",
    )
    assert done.message is not None and done.checkpoint is not None and done.tool_calls == []
    assert (done.run.state, done.run.outcome, done.run.execution_token, done.run.step) == (
        RunState.COMPLETED,
        "All done.",
        None,
        2,
    )
    assert done.run.usage == usage and done.run.revision == run.revision + 2
    assert (done.checkpoint.step, done.checkpoint.last_position) == (2, done.message.position)
    assert done.checkpoint.usage == usage and done.checkpoint.pending_tool_call_ids == []
    read = await store.read_events(after=after)
    assert [type(e) for e in read] == [MessageCommitted, CheckpointCreated, RunStateChanged]
    assert [dump_event(e) for e in done.events] == [dump_event(e) for e in read]
    assert await store.get_run(run.id) == done.run
    assert await store.list_checkpoints(run.id) == [done.checkpoint]
    assert await store.get_drafts(run.id) == []
    job = await store.get_job(run.job_id)
    assert (job.latest_run_state, job.usage) == (RunState.COMPLETED, usage)


async def test_a_final_message_from_a_stale_execution_changes_nothing(store: Store) -> None:
    run, _ = await running_run(store)
    seq = await store.last_seq()
    with pytest.raises(errors.OwnershipLost):
        await store.commit_final_message(
            run.id, token="stale", message=assistant("late"), step=1, outcome="late"
        )
    assert await store.last_seq() == seq
    assert (await store.get_run(run.id)).state is RunState.RUNNING
    assert await store.list_checkpoints(run.id) == []
    assert [m.role for m in await store.list_messages(run.id)] == [Role.USER]


async def test_a_result_the_tool_message_carries_reads_back_from_the_call(store: Store) -> None:
    run, token = await running_run(store)
    [call] = await step_with_tools(store, run, token, "read_file")
    await store.set_tool_state(call.id, token=token, to=ToolCallState.RUNNING)
    # Committed before its tool message (a fast parallel call), then carried by it.
    await store.set_tool_state(call.id, token=token, to=ToolCallState.COMPLETED, result="early")
    await store.commit_step_results(
        run.id,
        token=token,
        tool_changes=[],
        message=tool_result_message([call], "early"),
        checkpoint_step=1,
    )
    assert (await store.get_tool_call(call.id)).result == "early"
    [completed] = [
        e
        for e in await store.read_events(run_id=run.id)
        if isinstance(e, ToolStateChanged) and e.to_state is ToolCallState.COMPLETED
    ]
    assert completed.result == "early"


async def test_the_store_implements_the_whole_protocol(store: Store) -> None:
    assert isinstance(store, Store)

    def implemented(name: str) -> bool:
        member = getattr(type(store), name, None)
        return callable(member) or isinstance(member, property)

    missing = [name for name in dir(Store) if not name.startswith("_") and not implemented(name)]
    assert missing == []
    assert store.location  # where the store is, for hints that name its database


# --- run notes (DESIGN §16) ----------------------------------------------------------------------


async def test_a_run_note_commits_with_the_runs_token_and_is_listed_with_its_run(
    store: Store,
) -> None:
    run, token = await running_run(store)
    note = RunNoted(
        job_id=run.job_id, run_id=run.id, note="phase", text="phase: a → b", data={"to": "b"}
    )
    with pytest.raises(errors.OwnershipLost):
        await store.record_note(run.id, token="stale", note=note)
    with pytest.raises(errors.RunStateConflict):
        await store.record_note(run.id, token=None, note=note)  # only once the run has ended
    recorded = await store.record_note(run.id, token=token, note=note)
    assert recorded.seq > 0 and recorded.created_at > 0
    other, _ = await running_run(store, owner_id="owner-2")
    assert await store.list_notes(run_ids=[other.id]) == []
    [listed] = await store.list_notes(run_ids=[run.id])
    assert (listed.note, listed.text, listed.data) == ("phase", "phase: a → b", {"to": "b"})
    assert await store.list_notes(job_id=run.job_id) == [listed]
    events = await store.read_events(run_id=run.id)
    assert events[-1] == listed

    await store.finish_run(run.id, token=token, to=RunState.COMPLETED, outcome="done")
    later = await store.record_note(run.id, token=None, note=note)
    assert [n.seq for n in await store.list_notes(run_ids=[run.id])] == [listed.seq, later.seq]


async def test_a_note_with_usage_adds_exactly_that_usage_and_cost_to_its_run_and_job(
    store: Store,
) -> None:
    run, token = await running_run(store)
    message_usage = Usage(input_tokens=100, output_tokens=20, cache_read_tokens=5)
    await store.commit_message(
        run.id, token=token, message=assistant("a", usage=message_usage, cost=0.5)
    )
    before_run, before_job = await store.get_run(run.id), await store.get_job(run.job_id)
    note = RunNoted(job_id=run.job_id, run_id=run.id, note="compaction", text="compacted")

    await store.record_note(run.id, token=token, note=note)  # no usage: totals stay
    plain_run, plain_job = await store.get_run(run.id), await store.get_job(run.job_id)
    assert (plain_run.usage, plain_run.cost_usd) == (before_run.usage, before_run.cost_usd)
    assert (plain_job.usage, plain_job.cost_usd) == (before_job.usage, before_job.cost_usd)

    summary = Usage(
        input_tokens=7000, output_tokens=300, cache_read_tokens=11, cache_write_tokens=2
    )
    await store.record_note(run.id, token=token, note=note, usage=summary, cost_usd=0.25)
    after_run, after_job = await store.get_run(run.id), await store.get_job(run.job_id)
    assert after_run.usage == message_usage + summary
    assert after_run.cost_usd == pytest.approx(0.75)
    assert after_job.usage == message_usage + summary
    assert after_job.cost_usd == pytest.approx(0.75)
    # The summary made no message: the run's context fill is still its last message's.
    assert after_run.context_tokens == before_run.context_tokens
    assert after_run.revision > before_run.revision

    # /compact on an ended run (no token) counts its summary too.
    await store.finish_run(run.id, token=token, to=RunState.COMPLETED, outcome="done")
    await store.record_note(run.id, token=None, note=note, usage=summary, cost_usd=0.25)
    ended_run, ended_job = await store.get_run(run.id), await store.get_job(run.job_id)
    assert ended_run.usage == message_usage + summary + summary
    assert ended_run.cost_usd == pytest.approx(1.0)
    assert ended_job.usage == message_usage + summary + summary
    assert ended_job.cost_usd == pytest.approx(1.0)
    assert ended_job.latest_run_state is RunState.COMPLETED


async def test_a_note_with_usage_on_a_run_the_caller_does_not_own_changes_nothing(
    store: Store,
) -> None:
    run, token = await running_run(store)
    note = RunNoted(job_id=run.job_id, run_id=run.id, note="compaction", text="compacted")
    summary = Usage(input_tokens=7000, output_tokens=300)
    seq = await store.last_seq()
    before_run, before_job = await store.get_run(run.id), await store.get_job(run.job_id)

    with pytest.raises(errors.RunStateConflict):  # running, and not ended: no token is no owner
        await store.record_note(run.id, token=None, note=note, usage=summary, cost_usd=0.25)
    with pytest.raises(errors.OwnershipLost):
        await store.record_note(run.id, token="stale", note=note, usage=summary, cost_usd=0.25)

    assert await store.last_seq() == seq
    assert await store.list_notes(run_ids=[run.id]) == []
    after_run, after_job = await store.get_run(run.id), await store.get_job(run.job_id)
    assert (after_run.usage, after_run.cost_usd, after_run.revision) == (
        before_run.usage,
        before_run.cost_usd,
        before_run.revision,
    )
    assert (after_job.usage, after_job.cost_usd) == (before_job.usage, before_job.cost_usd)
    # The owner still notes, and counts, after the refused attempts.
    await store.record_note(run.id, token=token, note=note, usage=summary, cost_usd=0.25)
    assert (await store.get_job(run.job_id)).usage == before_job.usage + summary


# --- drafts of what a person types ---------------------------------------------------------------


async def test_an_answer_being_typed_is_kept_per_question_until_blanked(store: Store) -> None:
    run, token = await running_run(store)
    _, request = await store.open_input_request(run.id, token=token, request=QUESTION)
    assert await answer_text(store, request.id) == ""
    await store.save_answer_draft(request.id, "only the", job_id=run.job_id, writer=WRITER)
    await store.save_answer_draft(
        request.id, "only the tests\nand docs", job_id=run.job_id, writer=WRITER
    )
    assert await answer_text(store, request.id) == "only the tests\nand docs"
    assert await answer_text(store, "another-request") == ""
    await store.save_answer_draft(request.id, "  ", job_id=run.job_id, writer=WRITER)
    assert await answer_text(store, request.id) == ""


async def test_a_draft_save_landing_after_a_newer_one_leaves_the_newer_text(store: Store) -> None:
    """Saves run side by side (two workers; one waiting for the write lock while the next
    wrote): the text taken from the box last is what a restart shows, in whatever order the
    saves land, a blank (deleted) one included."""
    run, token = await running_run(store)
    _, request = await store.open_input_request(run.id, token=token, request=QUESTION)
    older, newer = draft_revision(), draft_revision()
    await store.save_composer_draft(run.job_id, "typed on", writer=WRITER, revision=newer)
    await store.save_composer_draft(run.job_id, "typed", writer=WRITER, revision=older)
    assert await composer_text(store, run.job_id) == "typed on"
    await store.save_answer_draft(
        request.id, "the tests", job_id=run.job_id, writer=WRITER, revision=newer
    )
    await store.save_answer_draft(
        request.id, "the", job_id=run.job_id, writer=WRITER, revision=older
    )
    assert await answer_text(store, request.id) == "the tests"

    # Sent (the box emptied: the row deleted), then the save of what it held before lands.
    sent, before = draft_revision(), older
    await store.save_composer_draft(run.job_id, "", writer=WRITER, revision=sent)
    await store.save_composer_draft(run.job_id, "typed on", writer=WRITER, revision=before)
    assert await composer_text(store, run.job_id) == ""
    await store.save_answer_draft(request.id, " ", job_id=run.job_id, writer=WRITER, revision=sent)
    await store.save_answer_draft(
        request.id, "the tests", job_id=run.job_id, writer=WRITER, revision=before
    )
    assert await answer_text(store, request.id) == ""

    # Saves started at once, the newest first: the newest text stays.
    revisions = [draft_revision() for _ in range(12)]
    await asyncio.gather(
        *(
            store.save_composer_draft(None, f"version {n}", writer=WRITER, revision=revision)
            for n, revision in reversed(list(enumerate(revisions)))
        )
    )
    assert await composer_text(store, None) == "version 11"


async def test_a_queue_save_landing_after_a_newer_one_leaves_the_newer_queue(
    store: Store,
) -> None:
    """The messages queued for a job are saved from workers side by side too: an older queue
    landing last neither brings back a message already sent nor loses one queued since, and
    the draft beside it keeps its own text."""
    run, _ = await running_run(store)
    older, newer = draft_revision(), draft_revision()
    await store.save_queued_messages(
        run.job_id, ["then the tests", "and the docs"], writer=WRITER, revision=newer
    )
    await store.save_queued_messages(run.job_id, ["then the tests"], writer=WRITER, revision=older)
    assert await queued_messages(store, run.job_id) == ["then the tests", "and the docs"]

    # Sent (the queue taken: the row deleted), then the save of what it held before lands.
    sent = draft_revision()
    await store.save_queued_messages(run.job_id, [], writer=WRITER, revision=sent)
    await store.save_queued_messages(run.job_id, ["then the tests"], writer=WRITER, revision=newer)
    assert await store.get_composer_drafts(run.job_id) == []

    # The draft's revisions are its own: a queue saved later does not make its text stale.
    typed = draft_revision()
    await store.save_queued_messages(run.job_id, ["one more"], writer=WRITER)
    await store.save_composer_draft(run.job_id, "half typed", writer=WRITER, revision=typed)
    assert await composer_text(store, run.job_id) == "half typed"
    assert await queued_messages(store, run.job_id) == ["one more"]

    # Saves started at once, the newest first: the newest queue stays.
    revisions = [draft_revision() for _ in range(12)]
    await asyncio.gather(
        *(
            store.save_queued_messages(
                run.job_id, [f"message {k}" for k in range(n + 1)], writer=WRITER, revision=revision
            )
            for n, revision in reversed(list(enumerate(revisions)))
        )
    )
    assert await queued_messages(store, run.job_id) == [f"message {k}" for k in range(12)]


async def test_a_stale_draft_save_still_replaces_the_drafts_it_took_in(store: Store) -> None:
    """A restore lands after a newer save of the box: the newer text stays, and the gone
    writer's draft the restore took in goes (else the next launch restored it twice)."""
    run, _ = await running_run(store)
    gone = "host:1:quit"
    await store.save_composer_draft(run.job_id, "left by a quit", writer=gone)
    restored, typed_on = draft_revision(), draft_revision()
    await store.save_composer_draft(
        run.job_id, "left by a quit and more", writer=WRITER, revision=typed_on
    )
    await store.save_composer_draft(
        run.job_id, "left by a quit", writer=WRITER, replacing=[gone], revision=restored
    )
    assert [(d.writer, d.text) for d in await store.get_composer_drafts(run.job_id)] == [
        (WRITER, "left by a quit and more")
    ]


async def test_drafts_are_kept_per_writer_and_a_restored_one_replaces_those_it_took_in(
    store: Store,
) -> None:
    run, token = await running_run(store)
    _, request = await store.open_input_request(run.id, token=token, request=QUESTION)
    quit_writer, live_writer, restorer = "host:1:quit", "host:2:live", "host:3:new"
    await store.register_owner(quit_writer, lease_seconds=30)
    await store.register_owner(live_writer, lease_seconds=30)
    await store.save_composer_draft(run.job_id, "typed before a quit", writer=quit_writer)
    await store.save_queued_messages(run.job_id, ["queued before it"], writer=quit_writer)
    await store.save_composer_draft(run.job_id, "typed in another window", writer=live_writer)
    await store.save_answer_draft(
        request.id, "half an answer", job_id=run.job_id, writer=quit_writer
    )
    await store.save_answer_draft(request.id, "its own", job_id=run.job_id, writer=live_writer)
    await store.release_owner(quit_writer)
    # Each writer's own row, oldest first, with what the owners table says of its writer.
    drafts = await store.get_composer_drafts(run.job_id)
    assert [(d.writer, d.text, d.queued) for d in drafts] == [
        (quit_writer, "typed before a quit", ("queued before it",)),
        (live_writer, "typed in another window", ()),
    ]
    assert [(d.writer_released, d.writer_lease_live) for d in drafts] == [
        (True, False),
        (False, True),
    ]
    # A writer with no owner row (it never held a lease) is neither.
    await store.save_composer_draft(None, "a new task", writer=restorer)
    [new_task] = await store.get_composer_drafts(None)
    assert (new_task.writer_released, new_task.writer_lease_live) == (False, False)
    # Restored by another writer: its draft is saved and the one it took in goes, together;
    # the live writer's stays.
    await store.save_composer_draft(
        run.job_id,
        "queued before it\n\ntyped before a quit",
        writer=restorer,
        replacing=[quit_writer],
    )
    assert [(d.writer, d.text) for d in await store.get_composer_drafts(run.job_id)] == [
        (live_writer, "typed in another window"),
        (restorer, "queued before it\n\ntyped before a quit"),
    ]
    await store.save_answer_draft(
        request.id, "half an answer", job_id=run.job_id, writer=restorer, replacing=[quit_writer]
    )
    assert [(d.writer, d.text) for d in await store.get_answer_drafts(request.id)] == [
        (live_writer, "its own"),
        (restorer, "half an answer"),
    ]
    # A blank draft deletes its writer's row only.
    await store.save_composer_draft(run.job_id, " ", writer=restorer)
    assert await composer_text(store, run.job_id) == "typed in another window"
    # An answer deletes every writer's answer draft.
    await store.answer_input_request(request.id, answer="done", idempotency_key="a-1")
    assert await store.get_answer_drafts(request.id) == []


async def test_the_messages_queued_for_a_job_are_kept_beside_its_draft_and_go_with_it(
    store: Store,
) -> None:
    run, _ = await running_run(store)
    assert await queued_messages(store, run.job_id) == []
    await store.save_queued_messages(
        run.job_id, ["then the tests", "and the docs ✓"], writer=WRITER
    )
    assert await queued_messages(store, run.job_id) == ["then the tests", "and the docs ✓"]
    assert await composer_text(store, run.job_id) == ""
    await store.save_composer_draft(run.job_id, "half typed", writer=WRITER)
    await store.save_queued_messages(run.job_id, [], writer=WRITER)  # sent: the draft stays
    assert await composer_text(store, run.job_id) == "half typed"
    await store.save_queued_messages(run.job_id, ["one more"], writer=WRITER)
    # The draft goes: the queue stays.
    await store.save_composer_draft(run.job_id, "  ", writer=WRITER)
    assert await queued_messages(store, run.job_id) == ["one more"]
    await store.cancel_run(run.id, reason="done")
    await store.set_job_archived(run.job_id, True)
    removed = await store.delete_job(run.job_id)
    assert removed["composer_drafts"] == 1
    assert await queued_messages(store, run.job_id) == []


async def test_a_job_whose_run_was_interrupted_is_not_archived_and_the_refusal_says_retry_or_cancel(
    store: Store,
) -> None:
    """ "Let it finish" never happens to a run a quit put back in the queue: nothing runs it
    until a person retries it (found by a new-user trial)."""
    run, token = await running_run(store)
    await store.stop_run(run.id, token=token, reason="stopped when agent-tui closed")
    after = await store.last_seq()
    with pytest.raises(errors.JobRunOpen) as refused:
        await store.set_job_archived(run.job_id, True)
    assert str(refused.value) == (
        f"job {run.job_id} has a run that was interrupted and waits for a retry ({run.id});"
        f" retry it (agent-tui retry {run.id}) or cancel it (agent-tui cancel {run.id})"
        " before archiving"
    )
    # What a client words its own refusal from (the TUI names its keys, not these commands).
    assert (refused.value.code, refused.value.job_id, refused.value.run_id) == (
        "job_run_open",
        run.job_id,
        run.id,
    )
    assert (refused.value.run_state, refused.value.waits_for_retry) == ("queued", True)
    assert await store.read_events(after=after) == []  # refused: nothing written
    assert not (await store.get_job(run.job_id)).archived


async def test_archiving_a_job_and_bringing_it_back_are_events_every_browser_hears(
    store: Store,
) -> None:
    run, token = await running_run(store)
    after = await store.last_seq()
    with pytest.raises(errors.JobRunOpen, match="cancel it or let it finish") as refused:
        await store.set_job_archived(run.job_id, True)
    assert (refused.value.run_id, refused.value.run_state) == (run.id, "running")
    assert not refused.value.waits_for_retry
    assert await store.read_events(after=after) == []  # refused: nothing written
    await store.finish_run(run.id, token=token, to=RunState.COMPLETED, outcome="done")
    follow_up = await store.create_run(new_run(job_id=run.job_id, history_run_id=run.id))
    await store.cancel_run(follow_up.id, reason="not now")
    after = await store.last_seq()
    assert (await store.set_job_archived(run.job_id, True)).archived
    await store.set_job_archived(run.job_id, True)  # already archived: no second event
    assert not (await store.set_job_archived(run.job_id, False)).archived
    events = await store.read_events(after=after)
    assert [(type(e), e.job_id, e.run_id) for e in events] == [
        (JobArchived, run.job_id, follow_up.id),  # the job's latest root run
        (JobArchived, run.job_id, follow_up.id),
    ]
    assert [e.archived for e in events if isinstance(e, JobArchived)] == [True, False]
    assert [e.seq for e in await store.read_events(after=after, job_id=run.job_id)] == [
        e.seq for e in events
    ]


async def test_search_lists_equally_good_hits_newest_first(store: Store) -> None:
    """Found by a trial: the same file read in five jobs gave five equal hits, and SQLite listed
    them oldest first (PostgreSQL newest first), so the job just worked on came last."""
    runs = [await store.create_run(new_run("where do the pelicans nest")) for _ in range(4)]
    hits = await store.search_messages("pelicans")
    assert [hit.job_id for hit in hits] == [run.job_id for run in reversed(runs)]


async def test_search_leaves_out_the_messages_of_archived_jobs(store: Store) -> None:
    kept = await store.create_run(new_run("where do the pelicans nest"))
    gone = await store.create_run(new_run("the pelicans left in spring"))
    for run in (kept, gone):
        await store.cancel_run(run.id, reason="done")
    assert {hit.job_id for hit in await store.search_messages("pelicans")} == {
        kept.job_id,
        gone.job_id,
    }
    await store.set_job_archived(gone.job_id, True)
    assert [hit.job_id for hit in await store.search_messages("pelicans")] == [kept.job_id]
    await store.set_job_archived(gone.job_id, False)
    assert len(await store.search_messages("pelicans")) == 2


async def test_an_archived_job_takes_no_new_run_until_it_is_brought_back(store: Store) -> None:
    run, token = await running_run(store)
    await store.finish_run(run.id, token=token, to=RunState.COMPLETED, outcome="done")
    await store.set_job_archived(run.job_id, True)
    after = await store.last_seq()
    with pytest.raises(errors.ConflictError, match="is archived; `agent-tui unarchive"):
        await store.create_run(new_run("and the docs", job_id=run.job_id, history_run_id=run.id))
    assert [r.id for r in await store.job_runs(run.job_id)] == [run.id]
    assert await store.read_events(after=after) == []
    await store.set_job_archived(run.job_id, False)
    follow_up = await store.create_run(
        new_run("and the docs", job_id=run.job_id, history_run_id=run.id)
    )
    assert follow_up.job_id == run.job_id


async def test_deleting_a_job_deletes_what_was_typed_in_it_and_nothing_else(store: Store) -> None:
    run, token = await running_run(store)
    _, request = await store.open_input_request(run.id, token=token, request=QUESTION)
    other, other_token = await running_run(store)
    _, other_request = await store.open_input_request(other.id, token=other_token, request=QUESTION)
    await store.save_answer_draft(request.id, "half an answer", job_id=run.job_id, writer=WRITER)
    await store.save_composer_draft(run.job_id, "half a follow-up", writer=WRITER)
    await store.save_answer_draft(other_request.id, "kept", job_id=other.job_id, writer=WRITER)
    await store.save_composer_draft(other.job_id, "kept too", writer=WRITER)
    await store.cancel_run(run.id, reason="done")
    await store.set_job_archived(run.job_id, True)
    removed = await store.delete_job(run.job_id)
    assert removed["answer_drafts"] == 1 and removed["composer_drafts"] == 1
    assert await answer_text(store, request.id) == ""
    assert await composer_text(store, run.job_id) == ""
    assert await answer_text(store, other_request.id) == "kept"
    assert await composer_text(store, other.job_id) == "kept too"


async def test_a_cursor_past_the_events_of_a_deleted_job_still_reads_and_sees_what_follows(
    store: Store,
) -> None:
    """Found by a trial of several processes on one database: `agent-tui delete` of the job
    whose events were the newest took the log's last event back below every reader's cursor,
    and reading after it was "outside the log": each open agent-tui logged an error at every
    poll (and mirrored no streamed text) until a new event came, and `events --follow` ended."""
    kept, kept_token = await running_run(store)
    gone, _ = await running_run(store)
    await store.cancel_run(gone.id, reason="done")
    await store.set_job_archived(gone.job_id, True)
    cursor = await store.last_seq()
    await store.delete_job(gone.job_id)

    assert await store.last_seq() == cursor
    assert await store.read_events(after=cursor) == []
    await store.commit_message(kept.id, token=kept_token, message=assistant("after"))
    [event] = await store.read_events(after=cursor)
    assert event.run_id == kept.id and event.seq > cursor
    with pytest.raises(errors.CursorOutOfRange):
        await store.read_events(after=event.seq + 1)


async def test_answering_a_question_deletes_what_was_being_typed_to_it(store: Store) -> None:
    # Answered elsewhere (the CLI, another TUI), the draft stayed until its job was deleted.
    run, token = await running_run(store)
    _, request = await store.open_input_request(run.id, token=token, request=QUESTION)
    await store.save_answer_draft(request.id, "half an answer", job_id=run.job_id, writer=WRITER)
    await store.answer_input_request(request.id, answer="a")
    assert await answer_text(store, request.id) == ""
