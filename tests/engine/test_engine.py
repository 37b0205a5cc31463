"""Engine behaviour with a scripted model: real store on a temp file, real built-in tools."""

from __future__ import annotations

import asyncio
import secrets
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from runtime.api import Boundary, Runtime
from runtime.config import Config, Defaults, Permissions
from runtime.errors import (
    AlreadyAnswered,
    InvalidInput,
    InvalidResponse,
    ModelError,
    RunStateConflict,
    ToolError,
)
from runtime.events import HistoryRepaired, MessageDelta, Notice
from runtime.models import (
    InputKind,
    Role,
    RunState,
    ToolCallState,
    ToolResultBlock,
)
from runtime.providers.base import ModelRequest
from runtime.store.base import NewRun
from runtime.tools.base import Tool, ToolContext, ToolOutput
from runtime.tools.builtin import builtin_tools
from runtime.tools.sandbox import sandbox_status
from tests.fakes.scripted import ScriptedProvider, Turn
from tests.tools.test_sandbox import live_processes_with, wait_for_processes

WAIT = 15


class GatedTool:
    """A test tool that finishes only when its gate opens, recording the order it ran in."""

    read_only = True
    approval_default = "allow"
    description = "waits for a gate"
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": {"label": {"type": "string"}},
        "required": ["label"],
        "additionalProperties": False,
    }

    def __init__(self, name: str = "gated") -> None:
        self.name = name
        self.gates: dict[str, asyncio.Event] = {}
        self.started: dict[str, asyncio.Event] = {}
        self.finished: list[str] = []
        self.cancelled: list[str] = []

    def gate(self, label: str) -> asyncio.Event:
        return self.gates.setdefault(label, asyncio.Event())

    def started_event(self, label: str) -> asyncio.Event:
        return self.started.setdefault(label, asyncio.Event())

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        label = arguments["label"]
        self.started_event(label).set()
        ctx.progress(1, 2, f"working on {label}")
        try:
            await self.gate(label).wait()
        except asyncio.CancelledError:
            self.cancelled.append(label)
            raise
        self.finished.append(label)
        return ToolOutput(content=f"done {label}")

    def approval_detail(self, arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        return {}


Factory = Callable[..., Awaitable[tuple[Runtime, ScriptedProvider]]]


@pytest.fixture
async def make_runtime(db_path: Path, workspace: Path) -> AsyncIterator[Factory]:
    opened: list[Runtime] = []

    async def factory(
        script: list[Any],
        *,
        extra_tools: list[Tool] | None = None,
        config: Config | None = None,
    ) -> tuple[Runtime, ScriptedProvider]:
        provider = ScriptedProvider(script)
        tools: dict[str, Tool] = dict(builtin_tools())
        for tool in extra_tools or []:
            tools[tool.name] = tool

        async def no_sleep(seconds: float) -> None:
            return None

        runtime = await Runtime.open(
            db_path=db_path,
            workspace=workspace,
            config=config or Config(),
            model="scripted:test",
            providers=lambda reference: provider,
            tools=tools,
            sleep=no_sleep,
        )
        opened.append(runtime)
        return runtime, provider

    yield factory
    for runtime in opened:
        await runtime.close()


async def wait_for(runtime: Runtime, run_id: str) -> Boundary:
    return await runtime.wait(run_id, timeout=WAIT)


def tool_results(request: ModelRequest) -> list[ToolResultBlock]:
    return [b for m in request.messages for b in m.content if isinstance(b, ToolResultBlock)]


async def test_a_tool_round_feeds_the_tool_result_back_to_the_model(
    make_runtime: Factory,
) -> None:
    runtime, model = await make_runtime(
        [
            Turn("Reading.", [("read_file", {"path": "notes.txt"})]),
            Turn("The answer is 42."),
        ]
    )
    run = await runtime.start("what is the answer?")
    boundary = await wait_for(runtime, run.id)

    assert boundary.state is RunState.COMPLETED
    assert boundary.run.outcome == "The answer is 42."
    results = tool_results(model.requests[1])
    assert len(results) == 1 and "the answer is 42" in results[0].content
    messages = await runtime.messages(run.id)
    assert [m.role for m in messages] == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]
    assert [c.step for c in await runtime.checkpoints(run.id)] == [1, 2]
    final = await runtime.get_run(run.id)
    assert final.usage.input_tokens == 20 and final.cost_usd > 0
    job = await runtime.get_job(run.job_id)
    assert job.usage.output_tokens == 10


async def test_parallel_tool_calls_run_together_and_commit_results_in_call_order(
    make_runtime: Factory,
) -> None:
    gated = GatedTool()
    runtime, model = await make_runtime(
        [
            Turn("", [("gated", {"label": "first"}), ("gated", {"label": "second"})]),
            Turn("both done"),
        ],
        extra_tools=[gated],
    )
    run = await runtime.start("do two things")
    async with asyncio.timeout(WAIT):
        # Both started before either finished: they run concurrently.
        await gated.started_event("first").wait()
        await gated.started_event("second").wait()
    gated.gate("second").set()
    async with asyncio.timeout(WAIT):
        # The second finished first: its result is committed at once, while the first runs.
        while [c.state for c in await runtime.tool_calls(run.id)] != [
            ToolCallState.RUNNING,
            ToolCallState.COMPLETED,
        ]:
            await asyncio.sleep(0.01)
    assert gated.finished == ["second"]
    gated.gate("first").set()
    boundary = await wait_for(runtime, run.id)
    assert boundary.state is RunState.COMPLETED
    assert [r.content for r in tool_results(model.requests[1])] == ["done first", "done second"]


async def test_max_steps_fails_the_run_with_a_clear_message(make_runtime: Factory) -> None:
    runtime, _ = await make_runtime(
        [Turn("again", [("list_dir", {"path": "."})]) for _ in range(3)],
        config=Config(defaults=Defaults(max_steps=2)),
    )
    run = await runtime.start("loop forever")
    boundary = await wait_for(runtime, run.id)
    assert boundary.state is RunState.FAILED
    assert boundary.run.failure is not None
    assert boundary.run.failure.code == "max_steps"
    assert "2 steps" in boundary.run.failure.message


async def test_a_follow_up_sees_the_jobs_earlier_root_runs(make_runtime: Factory) -> None:
    runtime, model = await make_runtime([Turn("first answer"), Turn("second answer")])
    first = await runtime.start("first question")
    await wait_for(runtime, first.id)
    second = await runtime.follow_up(first.job_id, "second question")
    boundary = await wait_for(runtime, second.id)
    assert boundary.state is RunState.COMPLETED
    seen = [(m.role, m.text) for m in model.requests[1].messages]
    assert seen == [
        (Role.USER, "first question"),
        (Role.ASSISTANT, "first answer"),
        (Role.USER, "second question"),
    ]
    assert second.job_id == first.job_id and second.history_run_id == first.id


async def test_an_orphan_tool_use_is_closed_with_an_error_result_before_the_next_call(
    make_runtime: Factory,
) -> None:
    gated = GatedTool()
    runtime, model = await make_runtime(
        [Turn("", [("gated", {"label": "slow"})]), Turn("recovered")],
        extra_tools=[gated],
    )
    run = await runtime.start("start something slow")
    async with asyncio.timeout(WAIT):
        await gated.started_event("slow").wait()
    await runtime.cancel(run.id, reason="changed my mind")
    follow = await runtime.follow_up(run.job_id, "try something else")
    boundary = await wait_for(runtime, follow.id)
    assert boundary.state is RunState.COMPLETED
    request = model.requests[1]
    results = tool_results(request)
    assert len(results) == 1 and results[0].is_error
    roles = [m.role for m in request.messages]
    assert roles == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.USER]


async def test_a_repaired_history_is_recorded_as_one_durable_event_per_execution(
    make_runtime: Factory,
) -> None:
    gated = GatedTool()
    runtime, _ = await make_runtime(
        [
            Turn("", [("gated", {"label": "slow"})]),
            Turn("", [("list_dir", {"path": "."})]),  # a second step of the same execution
            Turn("recovered"),
        ],
        extra_tools=[gated],
    )
    run = await runtime.start("start something slow")
    async with asyncio.timeout(WAIT):
        await gated.started_event("slow").wait()
    await runtime.cancel(run.id, reason="changed my mind")
    [orphan] = await runtime.tool_calls(run.id)
    follow = await runtime.follow_up(run.job_id, "try something else")
    assert (await wait_for(runtime, follow.id)).state is RunState.COMPLETED
    events = await runtime.events(run_id=follow.id)
    repaired = [e for e in events if isinstance(e, HistoryRepaired)]
    assert len(repaired) == 1  # two steps, one execution: one event
    [note] = repaired[0].repairs
    assert (note.tool_call_id, note.name, note.action) == (orphan.id, "gated", "closed_orphan")
    # The cancelled run's own execution had nothing to repair.
    assert not any(isinstance(e, HistoryRepaired) for e in await runtime.events(run_id=run.id))


async def test_a_denial_with_a_reason_reaches_the_model(
    make_runtime: Factory, workspace: Path
) -> None:
    runtime, model = await make_runtime(
        [
            Turn("", [("write_file", {"path": "out.txt", "content": "x"})]),
            Turn("ok, I will not write"),
        ]
    )
    run = await runtime.start("write a file")
    boundary = await wait_for(runtime, run.id)
    assert boundary.state is RunState.INPUT_REQUIRED
    assert boundary.request is not None and boundary.request.kind is InputKind.APPROVAL
    assert boundary.request.detail["tool"] == "write_file"
    assert not (workspace / "out.txt").exists()
    await runtime.respond(
        run.id, boundary.request.id, {"decision": "deny", "reason": "not in this folder"}
    )
    boundary = await wait_for(runtime, run.id)
    assert boundary.state is RunState.COMPLETED
    result = tool_results(model.requests[1])[0]
    assert result.is_error and "not in this folder" in result.content
    assert not (workspace / "out.txt").exists()


async def test_an_approval_shown_later_has_its_diff_made_against_the_file_as_it_is_now(
    make_runtime: Factory, workspace: Path
) -> None:
    """Found by a new-user trial: an approval answered after the file changed showed the diff
    stored when the agent asked, and allowing it overwrote a hand edit the diff never showed."""
    (workspace / "notes.md").write_text("first notes\n")
    runtime, _ = await make_runtime(
        [Turn("", [("write_file", {"path": "notes.md", "content": "agent notes\n"})])]
    )
    run = await runtime.start("write the notes")
    boundary = await wait_for(runtime, run.id)
    request = boundary.request
    assert request is not None and request.kind is InputKind.APPROVAL
    assert "-first notes" in request.detail["diff"]
    assert await runtime.current_request(request) is request  # the file is as it was

    (workspace / "notes.md").write_text("MY HAND EDIT\n")
    now = await runtime.current_request(request)
    assert now.id == request.id
    assert now.detail["changed_since_asked"] is True
    assert "-MY HAND EDIT" in now.detail["diff"] and "+agent notes" in now.detail["diff"]
    assert "-first notes" not in now.detail["diff"]
    assert now.detail["tool"] == "write_file" and now.detail["arguments"]["path"] == "notes.md"
    # What is stored is not changed: a client shows the request as of now.
    stored = await runtime.open_request(run.id)
    assert stored is not None and stored.detail == request.detail

    (workspace / "notes.md").write_text("agent notes\n")
    same = await runtime.current_request(request)
    assert same.detail["diff"] == "" and same.detail["changed_since_asked"] is True


async def test_an_approved_write_runs_only_after_the_approval(
    make_runtime: Factory, workspace: Path
) -> None:
    runtime, _ = await make_runtime(
        [
            Turn("", [("write_file", {"path": "out.txt", "content": "hello"})]),
            Turn("", [("write_file", {"path": "out2.txt", "content": "again"})]),
            Turn("written"),
        ]
    )
    run = await runtime.start("write files")
    boundary = await wait_for(runtime, run.id)
    assert boundary.request is not None
    assert not (workspace / "out.txt").exists()
    await runtime.respond(run.id, boundary.request.id, {"decision": "allow_run"})
    boundary = await wait_for(runtime, run.id)
    # Allowed for the rest of this run: the second write is not asked again.
    assert boundary.state is RunState.COMPLETED
    assert (workspace / "out.txt").read_text() == "hello"
    assert (workspace / "out2.txt").read_text() == "again"


async def test_allow_always_saves_a_visible_rule_in_the_workspace_config(
    make_runtime: Factory, workspace: Path
) -> None:
    runtime, _ = await make_runtime(
        [Turn("", [("write_file", {"path": "a.txt", "content": "a"})]), Turn("done")]
    )
    run = await runtime.start("write")
    boundary = await wait_for(runtime, run.id)
    assert boundary.request is not None
    await runtime.respond(run.id, boundary.request.id, {"decision": "allow_always"})
    assert (await wait_for(runtime, run.id)).state is RunState.COMPLETED
    assert "write_file" in (workspace / "agent-tui.toml").read_text()


async def test_a_question_is_answered_and_the_answer_becomes_the_tool_result(
    make_runtime: Factory,
) -> None:
    runtime, model = await make_runtime(
        [
            Turn("", [("ask_user", {"question": "Which?", "options": ["red", "blue"]})]),
            Turn("you chose"),
        ]
    )
    run = await runtime.start("ask me")
    boundary = await wait_for(runtime, run.id)
    assert boundary.request is not None and boundary.request.kind is InputKind.QUESTION
    assert boundary.request.options == ["red", "blue"]
    await runtime.respond(run.id, boundary.request.id, "blue")
    assert (await wait_for(runtime, run.id)).state is RunState.COMPLETED
    assert tool_results(model.requests[1])[0].content == "blue"


async def test_wait_returns_at_once_for_a_run_that_waits_for_input(
    make_runtime: Factory,
) -> None:
    runtime, _ = await make_runtime([Turn("", [("ask_user", {"question": "Sure?"})])])
    run = await runtime.start("ask")
    first = await wait_for(runtime, run.id)
    again = await runtime.wait(run.id, timeout=1)
    assert first.request is not None and again.request is not None
    assert again.request.id == first.request.id


# --- bad input: a clear error and nothing else changes ------------------------------------------


async def test_a_tool_the_model_invented_fails_the_call_and_the_model_sees_why(
    make_runtime: Factory,
) -> None:
    runtime, model = await make_runtime([Turn("", [("teleport", {"to": "mars"})]), Turn("sorry")])
    run = await runtime.start("go")
    assert (await wait_for(runtime, run.id)).state is RunState.COMPLETED
    result = tool_results(model.requests[1])[0]
    assert result.is_error and "no tool named 'teleport'" in result.content
    [call] = await runtime.tool_calls(run.id)
    assert call.state is ToolCallState.FAILED


async def test_arguments_failing_the_schema_are_a_tool_error_the_model_sees(
    make_runtime: Factory,
) -> None:
    runtime, model = await make_runtime(
        [Turn("", [("read_file", {"file": "notes.txt"})]), Turn("fixed")]
    )
    run = await runtime.start("read")
    assert (await wait_for(runtime, run.id)).state is RunState.COMPLETED
    result = tool_results(model.requests[1])[0]
    assert result.is_error and "path" in result.content


async def test_arguments_that_are_not_json_are_a_tool_error(make_runtime: Factory) -> None:
    runtime, model = await make_runtime(
        [
            Turn("", [("read_file", {})], raw_arguments=['{"path": "no']),
            Turn("fixed"),
        ]
    )
    run = await runtime.start("read")
    assert (await wait_for(runtime, run.id)).state is RunState.COMPLETED
    result = tool_results(model.requests[1])[0]
    assert result.is_error and "not valid JSON" in result.content


async def test_a_path_outside_the_workspace_is_refused(
    make_runtime: Factory, tmp_path: Path
) -> None:
    (tmp_path / "secret.txt").write_text("top secret")
    runtime, model = await make_runtime(
        [Turn("", [("read_file", {"path": "../secret.txt"})]), Turn("refused")]
    )
    run = await runtime.start("read outside")
    assert (await wait_for(runtime, run.id)).state is RunState.COMPLETED
    result = tool_results(model.requests[1])[0]
    assert result.is_error and "top secret" not in result.content
    assert "outside" in result.content


async def test_answers_that_do_not_fit_or_come_twice_are_refused_and_change_nothing(
    make_runtime: Factory,
) -> None:
    runtime, _ = await make_runtime(
        [
            Turn("", [("write_file", {"path": "a.txt", "content": "a"})]),
            Turn("done"),
        ]
    )
    run = await runtime.start("write")
    boundary = await wait_for(runtime, run.id)
    assert boundary.request is not None
    request_id = boundary.request.id
    with pytest.raises(InvalidResponse):
        await runtime.respond(run.id, request_id, {"decision": "maybe"})
    with pytest.raises(InvalidResponse):
        await runtime.respond(run.id, request_id, "yes please")
    still = await runtime.get_run(run.id)
    assert still.state is RunState.INPUT_REQUIRED and still.revision == boundary.run.revision
    await runtime.respond(run.id, request_id, {"decision": "allow_once"})
    with pytest.raises(AlreadyAnswered):
        await runtime.respond(run.id, request_id, {"decision": "allow_once"})
    assert (await wait_for(runtime, run.id)).state is RunState.COMPLETED
    with pytest.raises(AlreadyAnswered):
        await runtime.respond(run.id, request_id, {"decision": "deny"})


async def test_respond_to_a_run_that_is_not_waiting_is_a_conflict(
    make_runtime: Factory,
) -> None:
    runtime, _ = await make_runtime([Turn("", [("ask_user", {"question": "?"})]), Turn("done")])
    run = await runtime.start("ask")
    boundary = await wait_for(runtime, run.id)
    assert boundary.request is not None
    await runtime.cancel(run.id)
    with pytest.raises(RunStateConflict):
        await runtime.respond(run.id, boundary.request.id, "late")


async def test_an_empty_prompt_and_an_unknown_agent_are_refused(make_runtime: Factory) -> None:
    runtime, _ = await make_runtime([])
    with pytest.raises(InvalidInput):
        await runtime.start("   ")
    with pytest.raises(InvalidInput, match="unknown agent"):
        await runtime.start("hi", agent="nobody")
    assert (await runtime.list_jobs()).items == []


# --- model errors ------------------------------------------------------------------------------


async def test_a_retryable_model_error_is_retried_with_a_visible_notice(
    make_runtime: Factory,
) -> None:
    runtime, _ = await make_runtime(
        [
            Turn("partial", error=ModelError("overloaded", retryable=True, retry_after=0.5)),
            Turn("complete answer"),
        ]
    )
    notices: list[Notice] = []

    async def collect() -> None:
        async for event in runtime.observe():
            if isinstance(event, Notice):
                notices.append(event)

    watcher = asyncio.create_task(collect())
    await asyncio.sleep(0)
    run = await runtime.start("hello")
    boundary = await wait_for(runtime, run.id)
    watcher.cancel()
    assert boundary.state is RunState.COMPLETED
    messages = await runtime.messages(run.id)
    # The dropped attempt left no committed message behind.
    assert [m.text for m in messages if m.role is Role.ASSISTANT] == ["complete answer"]
    assert notices and "retrying in 0.5 s" in notices[0].text


async def test_a_non_retryable_model_error_fails_the_run_with_its_message(
    make_runtime: Factory,
) -> None:
    runtime, _ = await make_runtime(
        [
            Turn(
                "",
                error=ModelError(
                    "bad key: set ANTHROPIC_API_KEY", retryable=False, code="auth_failed"
                ),
            )
        ]
    )
    run = await runtime.start("hello")
    boundary = await wait_for(runtime, run.id)
    assert boundary.state is RunState.FAILED and boundary.run.failure is not None
    assert boundary.run.failure.code == "auth_failed"
    assert "ANTHROPIC_API_KEY" in boundary.run.failure.message


# --- cancel in every state ---------------------------------------------------------------------


async def test_cancel_a_queued_run(make_runtime: Factory, workspace: Path) -> None:
    runtime, _ = await make_runtime([])
    queued = await runtime.store.create_run(
        NewRun(agent="default", model="scripted:test", input="later", workspace=str(workspace))
    )
    cancelled = await runtime.cancel(queued.id, reason="not needed")
    assert cancelled.state is RunState.CANCELLED and cancelled.cancel_reason == "not needed"


async def test_cancel_while_the_model_streams_closes_the_stream(make_runtime: Factory) -> None:
    gate = asyncio.Event()
    runtime, model = await make_runtime([Turn("a long answer that never ends", gate=gate)])
    run = await runtime.start("talk")
    async with asyncio.timeout(WAIT):
        await model.started.wait()
    cancelled = await runtime.cancel(run.id)
    assert cancelled.state is RunState.CANCELLED
    assert model.closed_streams == 1
    assert (await runtime.get_run(run.id)).state is RunState.CANCELLED


async def test_cancel_while_a_tool_runs_stops_the_tool(make_runtime: Factory) -> None:
    gated = GatedTool()
    runtime, _ = await make_runtime([Turn("", [("gated", {"label": "x"})])], extra_tools=[gated])
    run = await runtime.start("work")
    async with asyncio.timeout(WAIT):
        await gated.started_event("x").wait()
    await runtime.cancel(run.id)
    assert gated.cancelled == ["x"]
    [call] = await runtime.tool_calls(run.id)
    assert call.state is ToolCallState.CANCELLED
    assert (await runtime.get_run(run.id)).state is RunState.CANCELLED


async def test_cancel_while_waiting_for_input_cancels_the_request(make_runtime: Factory) -> None:
    runtime, _ = await make_runtime([Turn("", [("ask_user", {"question": "?"})])])
    run = await runtime.start("ask")
    await wait_for(runtime, run.id)
    await runtime.cancel(run.id)
    assert await runtime.open_request(run.id) is None
    assert await runtime.inbox() == []
    with pytest.raises(RunStateConflict):
        await runtime.cancel(run.id)


# --- retry and fork ------------------------------------------------------------------------------


async def test_retry_of_a_failed_run_continues_from_its_last_checkpoint(
    make_runtime: Factory,
) -> None:
    runtime, model = await make_runtime(
        [
            Turn("", [("read_file", {"path": "notes.txt"})]),
            Turn("", error=ModelError("invalid", retryable=False, code="invalid_request")),
            Turn("finished after retry"),
        ]
    )
    run = await runtime.start("read and answer")
    failed = await wait_for(runtime, run.id)
    assert failed.state is RunState.FAILED
    retried = await runtime.retry(run.id)
    assert retried.id != run.id and retried.retry_of_run_id == run.id
    assert (await wait_for(runtime, retried.id)).state is RunState.COMPLETED
    assert (await runtime.get_run(run.id)).state is RunState.FAILED
    roles = [m.role for m in model.requests[2].messages]
    assert roles == [Role.USER, Role.ASSISTANT, Role.TOOL]


async def test_fork_from_a_checkpoint_starts_a_new_job_with_that_history(
    make_runtime: Factory,
) -> None:
    runtime, model = await make_runtime(
        [
            Turn("", [("read_file", {"path": "notes.txt"})]),
            Turn("original ending"),
            Turn("forked ending"),
        ]
    )
    run = await runtime.start("read")
    await wait_for(runtime, run.id)
    first_checkpoint = (await runtime.checkpoints(run.id))[0]
    forked = await runtime.fork(first_checkpoint.id, "now do it differently")
    assert forked.job_id != run.job_id
    # Forks of one job read apart in the browser (a trial saw two "Fork of read" rows).
    assert (await runtime.get_job(forked.job_id)).title == "now do it differently (fork of read)"
    assert (await wait_for(runtime, forked.id)).state is RunState.COMPLETED
    seen = [(m.role, m.text) for m in model.requests[2].messages]
    assert seen[-1] == (Role.USER, "now do it differently")
    assert len(seen) == 4  # user, assistant(tool_use), tool results, the new prompt


async def test_a_fork_with_no_message_goes_on_from_a_step_but_not_from_the_final_answer(
    make_runtime: Factory,
) -> None:
    """From the checkpoint where the run gave its answer there is nothing to go on with: asked
    again, the model would repeat itself at the cost of a call (found by a new-user trial, in
    the TUI's f). An earlier step, after tool results, goes on as before."""
    runtime, model = await make_runtime(
        [
            Turn("", [("read_file", {"path": "notes.txt"})]),
            Turn("original ending"),
            Turn("went on from the tool results"),
        ]
    )
    run = await runtime.start("read")
    await wait_for(runtime, run.id)
    first, last = (await runtime.checkpoints(run.id))[0], (await runtime.checkpoints(run.id))[-1]
    jobs_before = len((await runtime.list_jobs()).items)
    with pytest.raises(InvalidInput, match="first message"):
        await runtime.fork(last.id)
    assert len((await runtime.list_jobs()).items) == jobs_before  # nothing created
    assert len(model.requests) == 2  # and no model call
    forked = await runtime.fork(first.id)
    assert (await runtime.get_job(forked.job_id)).title == f"Fork of read at step {first.step}"
    assert (await wait_for(runtime, forked.id)).state is RunState.COMPLETED
    assert [m.role for m in model.requests[2].messages] == [Role.USER, Role.ASSISTANT, Role.TOOL]


# --- observing -----------------------------------------------------------------------------------


async def test_observe_replays_durable_events_from_a_cursor_and_streams_deltas(
    make_runtime: Factory,
) -> None:
    runtime, _ = await make_runtime([Turn("streamed text here"), Turn("second")])
    events: list[Any] = []

    async def collect() -> None:
        async for event in runtime.observe(after=0):
            events.append(event)
            if event.kind == "run_state_changed" and event.to_state is RunState.COMPLETED:
                return

    watcher = asyncio.create_task(collect())
    run = await runtime.start("say something")
    async with asyncio.timeout(WAIT):
        await watcher
    deltas = "".join(e.text for e in events if isinstance(e, MessageDelta))
    assert deltas in ("", "streamed text here") or "streamed text here".startswith(deltas)
    kinds = [e.kind for e in events if e.kind != "message_delta"]
    assert kinds[0] == "run_state_changed" and "message_committed" in kinds
    seqs = [e.seq for e in events if hasattr(e, "seq")]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    # A late observer replays the same durable history from cursor 0.
    replay: list[Any] = []

    async def replay_all() -> None:
        async for event in runtime.observe(run.id, after=0):
            replay.append(event)
            if event.kind == "run_state_changed" and event.to_state is RunState.COMPLETED:
                return

    async with asyncio.timeout(WAIT):
        await replay_all()
    assert [e.seq for e in replay] == [e.seq for e in events if hasattr(e, "seq")]


async def test_a_tool_error_from_the_tool_reaches_the_model(make_runtime: Factory) -> None:
    class Failing:
        name = "failing"
        description = "always fails"
        read_only = True
        approval_default = "allow"
        input_schema: dict[str, Any] = {"type": "object", "properties": {}}

        async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
            raise ToolError("disk on fire")

        def approval_detail(self, arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
            return {}

    runtime, model = await make_runtime(
        [Turn("", [("failing", {})]), Turn("noted")], extra_tools=[Failing()]
    )
    run = await runtime.start("try")
    assert (await wait_for(runtime, run.id)).state is RunState.COMPLETED
    result = tool_results(model.requests[1])[0]
    assert result.is_error and result.content == "disk on fire"


async def test_a_retried_stream_uses_a_new_message_id_so_observers_never_glue_attempts(
    make_runtime: Factory,
) -> None:
    runtime, _ = await make_runtime(
        [
            Turn("first try", error=ModelError("dropped", retryable=True, retry_after=0)),
            Turn("second try"),
        ]
    )
    deltas: list[MessageDelta] = []

    async def collect() -> None:
        async for event in runtime.observe():
            if isinstance(event, MessageDelta):
                deltas.append(event)

    watcher = asyncio.create_task(collect())
    await asyncio.sleep(0)
    run = await runtime.start("hello")
    assert (await wait_for(runtime, run.id)).state is RunState.COMPLETED
    watcher.cancel()
    by_message: dict[str, str] = {}
    for delta in deltas:
        by_message[delta.message_id] = by_message.get(delta.message_id, "") + delta.text
    committed = [m for m in await runtime.messages(run.id) if m.role is Role.ASSISTANT]
    assert by_message.get(committed[0].id, "second try") == "second try"
    assert all(text in ("first try", "second try") for text in by_message.values())
    assert await runtime.store.get_drafts(run.id) == []


async def test_a_max_tokens_stop_with_tool_calls_fails_the_run_and_closes_the_calls(
    make_runtime: Factory,
) -> None:
    runtime, _ = await make_runtime(
        [Turn("", [("read_file", {"path": "notes.txt"})], stop="max_tokens")]
    )
    run = await runtime.start("read")
    boundary = await wait_for(runtime, run.id)
    assert boundary.state is RunState.FAILED and boundary.run.failure is not None
    assert boundary.run.failure.code == "max_tokens"
    assert [c.state for c in await runtime.tool_calls(run.id)] == [ToolCallState.FAILED]


async def test_an_expired_lease_is_renewed_without_stopping_runs_nobody_recovered(
    make_runtime: Factory, db_path: Path
) -> None:
    gated = GatedTool()
    runtime, _ = await make_runtime(
        [Turn("", [("gated", {"label": "slow"})]), Turn("done")], extra_tools=[gated]
    )
    run = await runtime.start("work")
    async with asyncio.timeout(WAIT):
        await gated.started_event("slow").wait()
    # As if the process had been suspended past its lease.
    with sqlite3.connect(db_path) as db:
        db.execute("UPDATE owners SET lease_expires_at = 0 WHERE owner_id = ?", (runtime.owner_id,))
    await runtime._leases.renew()
    gated.gate("slow").set()
    assert (await wait_for(runtime, run.id)).state is RunState.COMPLETED
    assert gated.cancelled == []


async def test_a_job_follows_its_own_workspaces_permissions_wherever_it_is_resumed(
    db_path: Path, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "agent-tui.toml").write_text('[permissions]\ndeny = ["write_file"]\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    script = [
        Turn("", [("ask_user", {"question": "Go on?"})]),
        Turn("", [("write_file", {"path": "x.txt", "content": "x"})]),
        Turn("done"),
    ]
    provider = ScriptedProvider(script)
    first = await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        model="scripted:test",
        providers=lambda reference: provider,
        tools=dict(builtin_tools()),
    )
    run = await first.start("write something")
    boundary = await first.wait(run.id, timeout=WAIT)
    assert boundary.request is not None
    await first.close()

    # Answered from a shell in another folder, whose (empty) config must not apply.
    second = await Runtime.open(
        db_path=db_path,
        workspace=elsewhere,
        config=Config(),
        model="scripted:test",
        providers=lambda reference: provider,
        tools=dict(builtin_tools()),
    )
    try:
        await second.respond(run.id, boundary.request.id, "yes")
        final = await second.wait(run.id, timeout=WAIT)
        assert final.state is RunState.COMPLETED  # no approval was asked: the rule denies
        calls = {c.name: c for c in await second.tool_calls(run.id)}
        assert calls["write_file"].state is ToolCallState.FAILED
        assert "deny" in (calls["write_file"].error or "")
        assert not (workspace / "x.txt").exists()
    finally:
        await second.close()


async def test_cancel_during_a_long_shell_command_kills_it_and_cancels_the_run(
    make_runtime: Factory,
) -> None:
    # The processes are found by their unique command line in the host's process table: inside
    # the shell sandbox `$$` and `$!` are ids of the sandbox's own pid namespace.
    marker = f"60.{secrets.randbelow(10**9):09d}"
    command = f"sleep {marker} & sleep {marker} & echo ready; wait"
    runtime, _ = await make_runtime(
        [Turn("", [("shell", {"command": command})])],
        config=Config(permissions=Permissions(allow=["shell"])),
    )
    ready = asyncio.Event()

    async def collect() -> None:
        async for event in runtime.observe():
            if event.kind == "tool_progress" and event.message == "ready":
                ready.set()

    watcher = asyncio.create_task(collect())
    await asyncio.sleep(0)
    run = await runtime.start("wait a minute")
    if not sandbox_status().available:  # without a sandbox every shell call asks first
        boundary = await runtime.wait(run.id, timeout=WAIT)
        assert boundary.request is not None
        await runtime.respond(run.id, boundary.request.id, {"decision": "allow_once"})
    async with asyncio.timeout(WAIT):
        await ready.wait()
    await wait_for_processes(f"sleep {marker}", 2)
    cancelled = await runtime.cancel(run.id, reason="too slow")
    watcher.cancel()
    assert cancelled.state is RunState.CANCELLED
    assert live_processes_with(f"sleep {marker}") == []
    [call] = await runtime.tool_calls(run.id)
    assert call.state is ToolCallState.CANCELLED
