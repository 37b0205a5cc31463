"""The status line while a run works (issue 11 point 8): spinner, elapsed time, the key that
stops it, tokens counted live while text streams."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from runtime.api import Runtime
from runtime.config import Config, Permissions
from runtime.kinds import Role, RunState
from runtime.models import Run
from runtime.providers.base import ModelProvider
from runtime.providers.demo import DemoProvider
from runtime.tools.base import ToolContext, ToolOutput
from tests.cli.harness import Cli
from tests.fakes.anthropic_server import (
    FakeAnthropicServer,
    gate,
    message_start,
    stream,
    text_block,
)
from tests.fakes.scripted import ScriptedProvider, Turn, open_scripted
from tests.tui.helpers import layout_requests, make_app, open_runtime, wait_until
from tui.screens.main import MainScreen
from tui.widgets._format import cost, plain_markdown, search_snippet, state_text, tokens
from tui.widgets.status_line import (
    CANCEL_QUESTION_HINTS,
    DEMO_HINTS,
    SPINNER,
    STOP_HINT,
    StatusLine,
    format_elapsed,
)

SIZE = (140, 45)


def test_elapsed_times_read_as_seconds_minutes_and_hours() -> None:
    assert format_elapsed(7.9) == "7s"
    assert format_elapsed(65) == "1m 05s"
    assert format_elapsed(3720) == "1h 02m"
    assert format_elapsed(-3) == "0s"


async def _on_claude(server: FakeAnthropicServer, db_path: Path, workspace: Path) -> Runtime:
    """A runtime whose model is Claude, through the real SDK, served by ``server``."""
    return await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=Config(),
        model="anthropic:claude-sonnet-5",
        env={"ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": server.base_url},
    )


async def test_a_working_run_shows_a_spinner_elapsed_time_live_tokens_and_the_stop_key(
    db_path: Path, workspace: Path
) -> None:
    """The answer's text streams, then the stream is held open (a gate), so the run is seen
    working with text counted however slow the machine: with the demo model the window between
    its first text and its committed message was missed under load."""
    text = "Here is what the project holds, file by file, with a word on each. " * 2
    held = stream([message_start(), *text_block(0, [text]), gate("held")])
    async with FakeAnthropicServer([held]) as server:
        runtime = await _on_claude(server, db_path, workspace)
        try:
            app = make_app(runtime, workspace)
            async with app.run_test(size=SIZE) as pilot:
                screen = app.screen
                assert isinstance(screen, MainScreen)
                await pilot.press(*"summarise this project", "enter")
                status = screen.query_one(StatusLine)
                await wait_until(
                    pilot, lambda: status.working and status.streamed_chars >= len(text)
                )
                run = status.run
                assert run is not None
                text_shown = status.text
                assert any(frame in text_shown for frame in SPINNER)
                assert STOP_HINT in text_shown
                assert "~" in text_shown  # an estimate while the provider has not counted yet
                estimate = run.usage.total_tokens + status.streamed_chars // 4
                assert f"~{estimate} tok" in text_shown
                status.now = status.working_since(run) + 65
                status.update(status.text)
                assert "running 1m 05s" in status.text
                first_frame = status._frame
                await wait_until(pilot, lambda: status._frame != first_frame)  # it spins
                await pilot.press("escape")  # the stop key the line shows
                await wait_until(pilot, lambda: not status.working)
                assert STOP_HINT not in status.text
                assert not any(frame in status.text for frame in SPINNER)
                assert (await runtime.get_run(run.id)).state is RunState.CANCELLED
        finally:
            await runtime.close()


async def test_a_run_cancelled_mid_stream_shows_the_tokens_and_cost_it_used(
    db_path: Path, workspace: Path
) -> None:
    """Claude counts the output at a message's end, which a cancelled one never reaches: the
    line showed "0 tok │ $0.00" for a run that had cost money."""
    text = "The answer has three parts, each with its reasons. " * 8
    held = stream(
        [message_start(input_tokens=12000, cache_read=3000), *text_block(0, [text]), gate("x")]
    )
    async with FakeAnthropicServer([held]) as server:
        runtime = await _on_claude(server, db_path, workspace)
        try:
            app = make_app(runtime, workspace)
            async with app.run_test(size=SIZE) as pilot:
                screen = app.screen
                assert isinstance(screen, MainScreen)
                await pilot.press(*"why?", "enter")
                status = screen.query_one(StatusLine)
                await wait_until(pilot, lambda: status.streamed_chars >= len(text))
                await pilot.press("escape")
                await wait_until(
                    pilot, lambda: status.run is not None and status.run.state.is_terminal
                )
                assert status.run is not None
                run = await runtime.get_run(status.run.id)
                assert run.state is RunState.CANCELLED
                assert run.usage.input_tokens == 12000 and run.usage.output_tokens > 0
                assert run.cost_usd > 0
                assert f" {tokens(run.usage.total_tokens)} tok" in status.text
                assert f" {cost(run.cost_usd)} " in status.text and "$0.00" not in status.text
        finally:
            await runtime.close()


async def _status_and_a_finished_run(app: Any, runtime: Any) -> tuple[StatusLine, Any]:
    """The screen's status line and a finished run of the demo model, whose copies the tests
    show it (running, waiting, counted)."""
    screen = app.screen
    assert isinstance(screen, MainScreen)
    run = await runtime.start("summarise this project")
    await asyncio.wait_for(runtime.wait(run.id), timeout=10)
    return screen.query_one(StatusLine), await runtime.get_run(run.id)


async def test_the_provider_usage_replaces_the_estimate(db_path: Path, workspace: Path) -> None:
    runtime = await open_runtime(db_path, workspace)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE):
            status, done = await _status_and_a_finished_run(app, runtime)
            working = done.model_copy(update={"state": RunState.RUNNING})
            status.show(run=working)
            status.streamed(done.id, 400)
            assert "~" in status.text
            counted = working.model_copy(
                update={"usage": done.usage.model_copy(update={"output_tokens": 999})}
            )
            status.show(run=counted)
            assert "~" not in status.text and status.streamed_chars == 0
    finally:
        await runtime.close()


async def test_a_run_that_stopped_running_shows_its_count_not_an_estimate(
    db_path: Path, workspace: Path
) -> None:
    # A snapshot caught "input required │ ~20 tok": the run had been read after its usage was
    # committed, then deltas queued before that were counted, and the wait came with the same
    # usage, so nothing replaced the estimate.
    runtime = await open_runtime(db_path, workspace)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE):
            status, done = await _status_and_a_finished_run(app, runtime)
            counted = f"{tokens(done.usage.total_tokens)} tok"
            status.show(run=done.model_copy(update={"state": RunState.RUNNING}))
            status.streamed(done.id, 80)
            assert "~" in status.text
            waiting = done.model_copy(update={"state": RunState.INPUT_REQUIRED})
            status.show(run=waiting)  # the same usage as while it ran
            assert "~" not in status.text and counted in status.text
            status.streamed(done.id, 80)  # a late delta of the run that no longer runs
            assert "~" not in status.text and counted in status.text
    finally:
        await runtime.close()


async def test_streamed_text_repaints_the_status_line_without_laying_out_the_screen(
    db_path: Path, workspace: Path, monkeypatch: Any
) -> None:
    """The status line is one row as wide as the screen whatever it says: its count repaints it
    and asks for no layout (with ``update``'s default each delta of the run on screen laid the
    whole screen out again, once a frame while it streamed); the same text repaints nothing.
    While the spinner turns, a delta only counts: the spinner's next turn draws it."""
    runtime = await open_runtime(db_path, workspace)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            status, done = await _status_and_a_finished_run(app, runtime)
            status.show(run=done.model_copy(update={"state": RunState.RUNNING}))
            await pilot.pause()
            asked = layout_requests(monkeypatch, status)
            assert status.working
            status.streamed(done.id, 400)
            assert "~" in status.text
            assert asked == []  # counted, drawn at the spinner's next turn
            status._spin()
            assert asked == [False]
            assert "~" in str(status.render())
            status.redraw()  # nothing changed: nothing to draw
            assert asked == [False]
    finally:
        await runtime.close()


def _run(state: RunState, **fields: object) -> Run:
    return Run.model_validate(
        {
            "id": "r1",
            "job_id": "j1",
            "agent": "default",
            "model": "demo",
            "state": state,
            "revision": 1,
            "input": "x",
            "created_at": 0.0,
            "updated_at": 0.0,
            **fields,
        }
    )


def test_a_run_a_crash_put_back_in_the_queue_reads_as_interrupted_not_queued() -> None:
    # "queued · interrupted" read as if it were about to start; it waits for a person.
    assert state_text(_run(RunState.QUEUED, interrupted=True)) == "interrupted · waits for retry"
    assert state_text(_run(RunState.QUEUED)) == "queued"


def test_a_run_queued_for_a_worker_says_so_not_this_app_would_start_it() -> None:
    # Answered in the TUI, a detached run (``run --detach``) sat "queued" with no worker running.
    assert state_text(_run(RunState.QUEUED, detached=True)) == "queued for a worker"
    assert state_text(_run(RunState.INPUT_REQUIRED, detached=True)) == "input required"
    failed = _run(RunState.FAILED, failure={"code": "tool_indeterminate", "message": "?"})
    assert state_text(failed) == "failed · tool outcome unknown"


def test_a_search_snippet_reads_as_shown_with_the_match_in_bold() -> None:
    snippet = "## Plan\n1. The **«pelican»** reads `conf_file` via [docs](http://x) *now*"
    assert plain_markdown(snippet) == "Plan The «pelican» reads conf_file via docs now"
    shown = search_snippet(snippet, 80)
    assert shown.plain == "Plan The pelican reads conf_file via docs now"
    [span] = [span for span in shown.spans if "bold" in str(span.style)]
    assert shown.plain[span.start : span.end] == "pelican"


def test_a_search_snippet_of_a_tool_result_shows_paths_and_names_as_stored() -> None:
    snippet = "wrote src/pkg/«__init__.py» and\n**not bold** `__main__` *x*"
    shown = search_snippet(snippet, 80, role=Role.TOOL)
    assert shown.plain == "wrote src/pkg/__init__.py and **not bold** `__main__` *x*"
    [span] = [span for span in shown.spans if "bold" in str(span.style)]
    assert shown.plain[span.start : span.end] == "__init__.py"


def test_a_search_snippet_of_the_agent_loses_its_marks_but_not_inside_words_or_paths() -> None:
    snippet = "**Done**: edited src/pkg/__init__.py, a__b__c (**«pelican»**). Run `__main__`"
    shown = search_snippet(snippet, 100, role=Role.ASSISTANT)
    assert shown.plain == "Done: edited src/pkg/__init__.py, a__b__c (pelican). Run __main__"
    assert plain_markdown("__init__.py, then **bold**.") == "__init__.py, then bold."


def test_a_search_snippet_whose_match_is_late_starts_near_it() -> None:
    snippet = (
        "…Deltas stream to every observer; the committed message replaces them. ## «Section» 1"
    )
    shown = search_snippet(snippet, 30)
    assert "Section" in shown.plain and shown.plain.startswith("…")
    assert len(shown.plain) <= 30


async def test_a_retried_run_counts_its_time_from_the_retry_not_from_its_creation(
    db_path: Path, workspace: Path
) -> None:
    # A run a crash interrupted yesterday and retried now read "running 24h 00m".
    runtime = await open_runtime(db_path, workspace)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            status, finished = await _status_and_a_finished_run(app, runtime)
            day_old = finished.model_copy(
                update={
                    "id": "run-from-yesterday",
                    "state": RunState.RUNNING,
                    "created_at": finished.created_at - 86400,
                }
            )
            status.show(run=day_old)
            status.now = finished.created_at + 5
            assert "running 24h" in status.text  # never seen starting: its age, at worst
            status.started_running(day_old.id, finished.created_at)
            await pilot.pause()
            assert "running 5s" in status.text
    finally:
        await runtime.close()


async def test_a_follow_up_shows_step_1_and_the_context_its_job_reached_while_its_call_streams(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: a follow-up in a long conversation read "ctx 0%" while it
    streamed (the provider reports the call's context at its end); it starts from at least
    the context the job's earlier runs reached."""
    quick = await open_runtime(db_path, workspace)
    try:
        first = await quick.start("/stream 40")  # 40 KiB of answer in the job's history
        await quick.wait(first.id, timeout=60)
        second = await quick.follow_up(first.job_id, "/stream 1")
        await quick.wait(second.id, timeout=60)
        reached = (await quick.get_run(second.id)).context_tokens
        window = quick.context_window("demo")
    finally:
        await quick.close()
    percent = f"ctx {reached * 100 / window:.0f}%"
    assert percent not in ("ctx 0%", "ctx 1%")  # enough to tell from nothing
    runtime = await open_runtime(db_path, workspace, chunk_delay=0.05)  # streams slowly
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            assert isinstance(screen, MainScreen)
            screen.open_job(first.job_id)
            await wait_until(pilot, lambda: screen.selected_run is not None)
            await pilot.press(*"//stream 30", "enter")
            status = screen.query_one(StatusLine)

            def streaming_the_follow_up() -> bool:
                run = status.run
                return run is not None and run.id not in (first.id, second.id) and status.working

            await wait_until(pilot, streaming_the_follow_up)
            assert status.run is not None and status.run.context_tokens == 0
            assert percent in status.text
            assert "step 1/" in status.text  # the step in progress, not the steps done
    finally:
        await runtime.close()


def _shown(status: StatusLine) -> str:
    """The status line as the terminal shows it (cut at its edge), spaces at the ends gone."""
    return status.render_line(0).text.strip()


class _HeldTool:
    """A read-only tool whose call runs until ``release`` is set."""

    read_only = True
    approval_default = "allow"

    def __init__(self, name: str) -> None:
        self.name = name
        self.description = f"the {name} tool of the test"
        self.input_schema: dict[str, Any] = {"type": "object", "properties": {}}
        self.release = asyncio.Event()

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        await self.release.wait()
        return ToolOutput(content="fetched")

    def approval_detail(self, arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        return {}


async def test_while_a_tool_runs_the_status_line_names_it_and_fits_80_columns_whole(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: while a tool ran the line said only "⠧ running 2s │ step
    1/50", and at 80 columns its last hint was cut to "esc to int" (then shortened to "esc
    stops", a second wording of the README's "esc to interrupt": the figures give way first)."""
    tool = _HeldTool("fetch_page")
    provider = ScriptedProvider([Turn("", [("fetch_page", {})]), Turn("all done")])
    runtime = await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=Config(permissions=Permissions(allow=["fetch_page"])),
        model="scripted:test",
        providers=lambda reference: provider,
        tools={"fetch_page": tool},
    )
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=(80, 24)) as pilot:
            screen = app.screen
            assert isinstance(screen, MainScreen)
            status = screen.query_one(StatusLine)
            await pilot.press(*"fetch it", "enter")
            await wait_until(pilot, lambda: "running fetch_page" in _shown(status))
            shown = _shown(status)
            # Nothing cut at the edge: the line is all there, its hint whole.
            assert shown == status.text
            assert shown.endswith("esc to interrupt"), shown
            assert "step 1/" in shown  # the tools of step 1, whose message is committed
            tool.release.set()
            await wait_until(pilot, lambda: "completed" in _shown(status))
            assert "fetch_page" not in _shown(status)
    finally:
        await runtime.close()


async def test_the_demo_model_hint_goes_once_the_line_is_about_another_model(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: after ``/model openai:fake``, and on a run of that model, the
    line still ended "demo model — set ANTHROPIC_API_KEY for Claude"."""

    def providers(reference: str) -> ModelProvider:
        if reference.startswith("openai"):
            return ScriptedProvider([Turn("done")], reference=reference)
        return DemoProvider(instant=True)

    runtime = await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=Config(),
        model="demo:instant",
        providers=providers,
    )
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            assert isinstance(screen, MainScreen)
            status = screen.query_one(StatusLine)
            await wait_until(pilot, lambda: DEMO_HINTS[0] in _shown(status))  # the demo's line
            await pilot.press(*"/model openai:fake", "enter")
            await wait_until(pilot, lambda: "next run: model openai:fake" in _shown(status))
            assert not any(hint in _shown(status) for hint in DEMO_HINTS)
            await pilot.press(*"hello", "enter")
            await wait_until(
                pilot, lambda: status.run is not None and "completed" in _shown(status)
            )
            assert _shown(status).startswith("openai:fake │ completed")
            assert not any(hint in _shown(status) for hint in DEMO_HINTS)
    finally:
        await runtime.close()


class _DayAgo:
    """The wall clock a day back: a run created with it was created yesterday."""

    def now(self) -> float:
        return time.time() - 86400

    def monotonic(self) -> float:
        return time.monotonic()


async def test_a_run_retried_in_another_process_counts_its_time_from_the_retry_here_too(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: a run retried in one agent-tui read "running 6s" there and
    "running 22s" in another opened on it afterwards, which counted from the run's creation
    (a run interrupted yesterday and retried now read "running 24h"). Both count from the
    retry's start, as the store records it."""
    first = ScriptedProvider([Turn("started " * 10, gate=asyncio.Event())])
    yesterday = await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=Config(),
        model="scripted:test",
        providers=lambda reference: first,
        clock=_DayAgo(),
    )
    try:
        run = await yesterday.start("a long task")
        await asyncio.wait_for(first.started.wait(), timeout=30)
    finally:
        await yesterday.close()  # quits mid-run: the run waits for a retry
    gate = asyncio.Event()
    provider = ScriptedProvider([Turn("again " * 10, gate=gate)])
    executing = await open_scripted(provider, db_path, workspace)
    watching = await open_runtime(db_path, workspace)
    try:
        await executing.retry(run.id)
        await asyncio.wait_for(provider.started.wait(), timeout=30)
        retried_at = await executing.store.running_since(run.id)
        assert retried_at is not None and retried_at > run.created_at + 86000
        app = make_app(watching, workspace, open_job=run.job_id)
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            assert isinstance(screen, MainScreen)
            status = screen.status
            await wait_until(pilot, lambda: status.run is not None and status.working)
            assert status.elsewhere  # worked by the other process
            assert status.working_since(run) == retried_at
            status.now = retried_at + 6
            assert "running 6s" in status.text and "24h" not in status.text
            gate.set()
        await executing.wait(run.id, timeout=30)
    finally:
        await watching.close()
        await executing.close()


async def _held_step_runtime(
    db_path: Path, workspace: Path, *gates: asyncio.Event
) -> tuple[Runtime, ScriptedProvider, _HeldTool]:
    """A runtime whose model asks for ``fetch_page`` (held until released) and then answers;
    each model call waits after its first piece on the gate given for it."""
    tool = _HeldTool("fetch_page")
    first, second = gates
    provider = ScriptedProvider(
        [
            Turn("let me look " * 30, [("fetch_page", {})], gate=first),
            Turn("all done " * 40, gate=second),
        ]
    )
    runtime = await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=Config(permissions=Permissions(allow=["fetch_page"])),
        model="scripted:test",
        providers=lambda reference: provider,
        tools={"fetch_page": tool},
    )
    return runtime, provider, tool


async def test_the_window_running_a_run_and_one_watching_it_show_the_same_step_and_tokens(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial with two agent-tui on one database: at the same moment the
    watching one read "step 1/50 │ 92 tok" and the one running the run "step 0/50 │ ~20 tok"
    (the run as read before its step's message: the first tools read "step 0/50"). Both
    number the step in progress alike (runtime.steps) and show the tokens counted so far."""
    first_call, second_call = asyncio.Event(), asyncio.Event()
    executing, provider, tool = await _held_step_runtime(
        db_path, workspace, first_call, second_call
    )
    watching = await open_runtime(db_path, workspace)
    try:
        run = await executing.start("fetch it")
        here = make_app(executing, workspace, open_job=run.job_id)
        there = make_app(watching, workspace, open_job=run.job_id)
        async with here.run_test(size=SIZE) as pilot, there.run_test(size=SIZE):
            lines = []
            for app in (here, there):
                screen = app.screen
                assert isinstance(screen, MainScreen)
                lines.append(screen.status)

            def both(text: str) -> bool:
                return all(text in line.text for line in lines)

            await wait_until(pilot, lambda: all(line.working for line in lines))
            await asyncio.wait_for(provider.started.wait(), timeout=30)
            assert both("step 1/50")  # the first model call
            first_call.set()
            await wait_until(pilot, lambda: both("running fetch_page"))
            counted = (await executing.get_run(run.id)).usage.total_tokens
            assert counted > 0
            # The first step's tools: step 1, and the tokens its message counted (taken with
            # the message, before its tools were shown running).
            assert both(f"step 1/50 │ {counted} tok"), [line.text for line in lines]
            tool.release.set()
            await wait_until(pilot, lambda: len(provider.requests) == 2)
            await wait_until(pilot, lambda: both("step 2/50"))  # the second model call
            second_call.set()
            await wait_until(pilot, lambda: both("completed │ step 2/50"))
    finally:
        await watching.close()
        await executing.close()


@pytest.mark.slow
async def test_show_numbers_the_step_in_progress_as_the_status_line_does(
    db_path: Path, workspace: Path, tmp_path: Path
) -> None:
    """Found by a new-user trial: while a run's first model call streamed, `agent-tui show`
    said "steps: 0 of at most 50" and "tokens: 0 in, 0 out" and the status line "step 1/50 │
    ~373 tok". `show` names the step in progress as the status line numbers it, and says that
    its tokens are those counted so far (the status line's "~" is an estimate on top)."""
    first_call, second_call = asyncio.Event(), asyncio.Event()
    executing, provider, tool = await _held_step_runtime(
        db_path, workspace, first_call, second_call
    )
    cli = replace(Cli.create(tmp_path, workspace), db=db_path)

    async def show(run_id: str) -> str:
        shown = await asyncio.to_thread(cli.run, "show", run_id)
        assert shown.returncode == 0, shown.stderr
        return shown.stdout

    try:
        run = await executing.start("fetch it")
        app = make_app(executing, workspace, open_job=run.job_id)
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            assert isinstance(screen, MainScreen)
            status = screen.status
            await wait_until(pilot, lambda: status.working)
            await asyncio.wait_for(provider.started.wait(), timeout=30)
            text = await show(run.id)
            assert "step 1/50" in status.text
            assert "steps:   0 of at most 50 (step 1 in progress)\n" in text
            assert "0 cache write (counted as each model call ends)\n" in text
            first_call.set()
            await wait_until(pilot, lambda: "running fetch_page" in status.text)
            text = await show(run.id)
            assert "step 1/50 │ 15 tok" in status.text
            assert "steps:   1 of at most 50 (step 1 in progress)\n" in text
            assert "tokens:  10 in, 5 out," in text
            tool.release.set()
            second_call.set()
            await wait_until(pilot, lambda: "completed" in status.text)
        text = await show(run.id)
        assert "steps:   2 of at most 50\n" in text
        assert "0 cache write\n" in text
    finally:
        await executing.close()


async def test_while_a_sub_runs_question_has_the_keys_the_hint_names_what_stops_the_run_there(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: with a sub-run's question docked, the status line said "esc
    stops" over the running parent, but Esc leaves the prompt. Keys follow focus: the hint
    names the way to c from the answer field, c once in the browser, and both do stop it."""
    from tests.tui.test_keys_and_delegation import delegation_config
    from tui.widgets.confirm_bar import ConfirmBar
    from tui.widgets.question_prompt import AnswerInput, QuestionPrompt

    runtime = await Runtime.open(
        db_path=db_path, workspace=workspace, config=delegation_config(), model="demo:instant"
    )
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            assert isinstance(screen, MainScreen)
            status = screen.query_one(StatusLine)
            await pilot.press(*"survey this project", "enter")
            await wait_until(pilot, lambda: screen.query(QuestionPrompt))
            parent = screen.selected_run
            assert parent is not None and parent.parent_run_id is None
            await wait_until(pilot, lambda: isinstance(app.focused, AnswerInput))
            await wait_until(pilot, lambda: status.working)
            await pilot.pause()
            assert "│ esc, then c cancels" in status.text, status.text
            assert STOP_HINT not in status.text

            await pilot.press("escape")  # leaves the prompt: the run goes on
            await wait_until(pilot, lambda: app.focused is screen.job_tree)
            assert (await runtime.get_run(parent.id)).state is RunState.RUNNING
            await wait_until(pilot, lambda: "│ c cancels" in status.text)
            await pilot.press("c")
            await wait_until(pilot, lambda: screen.query(ConfirmBar))
            await pilot.press("y")
            await wait_until(
                pilot, lambda: status.run is not None and status.run.state is RunState.CANCELLED
            )
        assert (await runtime.get_run(parent.id)).state is RunState.CANCELLED
    finally:
        await runtime.close()


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
async def test_while_the_cancel_question_has_the_keys_the_hint_says_what_esc_does_there(
    db_path: Path, workspace: Path, size: tuple[int, int]
) -> None:
    """Found by a new-user trial: with "Cancel the run?" docked and focused, the status line
    still said "esc to interrupt", but Esc there answers no and the run goes on."""
    from tui.widgets.confirm_bar import ConfirmBar

    runtime = await open_runtime(db_path, workspace, model="demo")  # streams slowly
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=size) as pilot:
            screen = app.screen
            assert isinstance(screen, MainScreen)
            status = screen.query_one(StatusLine)
            await pilot.press(*"//stream 400", "enter")
            await wait_until(pilot, lambda: status.working and status.streamed_chars > 40)
            run = status.run
            assert run is not None
            await pilot.press("tab")  # the browser, where c asks to cancel
            await wait_until(pilot, lambda: app.focused is screen.job_tree)
            assert STOP_HINT in status.text
            await pilot.press("c")
            await wait_until(pilot, lambda: isinstance(app.focused, ConfirmBar))
            await wait_until(pilot, lambda: STOP_HINT not in status.text)
            # Esc answers no there; y cancels. (At 80 columns in the shorter words.)
            wording = CANCEL_QUESTION_HINTS[0 if size[0] >= 120 else 1]
            assert f"│ {wording}" in status.text, status.text
            await pilot.press("escape")  # no: the run goes on, the keys back in the browser
            await wait_until(pilot, lambda: app.focused is screen.job_tree)
            await wait_until(pilot, lambda: STOP_HINT in status.text)
            assert (await runtime.get_run(run.id)).state is RunState.RUNNING
            await pilot.press("c")
            await wait_until(pilot, lambda: isinstance(app.focused, ConfirmBar))
            await pilot.press("y")
            await wait_until(
                pilot, lambda: status.run is not None and status.run.state is RunState.CANCELLED
            )
    finally:
        await runtime.close()
