"""Store methods the engine gained with the store branch, on every backend: a history repair is
a durable event, an unanswerable request fails its run in one transaction, and a file-writing
call's snapshots commit with its transitions."""

from __future__ import annotations

import pytest

from runtime import errors
from runtime.events import HistoryRepaired, RepairNote, RunStateChanged
from runtime.models import InputKind, InputRequestState, RunState, ToolCallState
from runtime.store.base import FileContent, NewInputRequest, Store, ToolStateChange
from tests.store.helpers import running_run, step_with_tools


async def test_a_history_repair_is_one_durable_event_and_a_stale_token_is_refused(
    store: Store,
) -> None:
    run, token = await running_run(store)
    note = RepairNote(tool_use_id="toolu_0", tool_call_id="c1", name="read_file", action="x")
    before = await store.last_seq()
    event = await store.record_history_repair(run.id, token=token, repairs=[note])
    assert isinstance(event, HistoryRepaired) and event.repairs == [note]
    [stored] = await store.read_events(after=before)
    assert isinstance(stored, HistoryRepaired) and stored.seq == event.seq == before + 1
    with pytest.raises(errors.OwnershipLost):
        await store.record_history_repair(run.id, token="stale", repairs=[note])
    assert await store.last_seq() == before + 1


async def test_an_unanswerable_request_fails_its_call_and_run_and_cancels_the_others(
    store: Store,
) -> None:
    run, token = await running_run(store)
    [call] = await step_with_tools(store, run, token, "mcp_tool")
    await store.set_tool_state(call.id, token=token, to=ToolCallState.RUNNING)
    asked = NewInputRequest(kind=InputKind.ELICITATION, prompt="Token?", tool_call_id=call.id)
    _, request = await store.open_input_request(run.id, token=token, request=asked)
    failed = await store.fail_unanswerable_request(request.id, reason="the server exited")
    assert failed.state is RunState.FAILED
    assert (await store.get_tool_call(call.id)).state is ToolCallState.FAILED
    assert (await store.get_input_request(request.id)).state is InputRequestState.CANCELLED
    changes = [e for e in await store.read_events(run_id=run.id) if isinstance(e, RunStateChanged)]
    assert changes[-1].to_state is RunState.FAILED
    with pytest.raises(errors.RunStateConflict):  # only from input_required
        await store.fail_unanswerable_request(request.id, reason="again")


async def test_file_contents_commit_with_the_call_s_transitions(store: Store) -> None:
    run, token = await running_run(store)
    [call] = await step_with_tools(store, run, token, "write_file")
    await store.commit_tool_states(
        run.id,
        token=token,
        changes=[
            ToolStateChange(
                tool_call_id=call.id,
                to=ToolCallState.RUNNING,
                file_before=FileContent(path="notes.md", data=b"old\n"),
            )
        ],
    )
    [snapshot] = await store.list_file_snapshots(run.job_id)
    assert snapshot.path == "notes.md" and snapshot.before_sha256 is not None
    assert await store.get_blob(snapshot.before_sha256) == ("application/octet-stream", b"old\n")
    await store.commit_tool_states(
        run.id,
        token=token,
        changes=[
            ToolStateChange(
                tool_call_id=call.id,
                to=ToolCallState.COMPLETED,
                result="written",
                file_after=FileContent(path="notes.md", data=b"new\n"),
            )
        ],
    )
    [after] = await store.list_file_snapshots(run.job_id)
    assert after.after_sha256 is not None
    assert (await store.get_blob(after.after_sha256))[1] == b"new\n"
    assert (await store.get_tool_call(call.id)).state is ToolCallState.COMPLETED
