"""Automatic compaction counts the whole request, tool definitions included (as ``/context``
does), and does not compact when the system prompt and the tool definitions alone are past the
threshold: a scripted model, a real SQLite store, the real built-in tools, and many small tools
standing for an MCP server's."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from runtime.compaction import SUMMARISER_SYSTEM, estimate_tokens, tool_specs_tokens
from runtime.config import Config, Defaults
from runtime.events import Notice, RunStateChanged
from runtime.models import RunState
from runtime.providers.base import ModelRequest
from runtime.tools.base import Tool, ToolContext, ToolOutput
from runtime.tools.builtin import builtin_tools
from tests.extensions.conftest import Factory
from tests.fakes.scripted import Turn

WAIT = 20


class _CatalogueTool:
    """One of many tools of a (pretend) MCP server: its definition takes 150 tokens."""

    read_only = True
    approval_default = "allow"
    input_schema: dict[str, Any] = {"type": "object", "properties": {}}

    def __init__(self, number: int) -> None:
        self.name = f"catalogue_{number:02d}"
        schema_chars = len('{"type": "object", "properties": {}}')
        self.description = "Looks an entry up in the catalogue. ".ljust(600 - 12 - schema_chars)

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        return ToolOutput(content="an entry")

    def approval_detail(self, arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        return {}


def _many_tools(count: int) -> dict[str, Tool]:
    tools: dict[str, Tool] = dict(builtin_tools())
    tools.update((tool.name, tool) for tool in map(_CatalogueTool, range(count)))
    return tools


@asynccontextmanager
async def _notices_until_the_run_ends(runtime: Any) -> AsyncIterator[list[Notice]]:
    """The notices published while the block runs, and until the run it starts ends (they are
    transient: observed from before the run starts)."""
    notices: list[Notice] = []
    ended = asyncio.Event()

    async def collect() -> None:
        async for event in runtime.observe():
            if isinstance(event, Notice):
                notices.append(event)
            elif isinstance(event, RunStateChanged) and event.to_state.is_terminal:
                ended.set()
                return

    watcher = asyncio.create_task(collect())
    await asyncio.sleep(0)  # subscribed before the run starts
    yield notices
    async with asyncio.timeout(WAIT):
        await ended.wait()
        await watcher


def _read_big() -> Turn:
    return Turn(tool_calls=[("read_file", {"path": "big.txt"})])


async def test_tool_definitions_that_take_a_short_conversation_past_the_threshold_compact_it(
    make_runtime: Factory, workspace: Path
) -> None:
    (workspace / "big.txt").write_text("lorem ipsum dolor " * 110)  # ~500 tokens read
    window = 10_000  # compacted past 8,000 tokens
    runtime, provider = await make_runtime(
        [_read_big(), _read_big(), Turn(text="SUMMARY-TOOLS"), Turn(text="final")],
        config=Config(defaults=Defaults(context_window=window, compact_at=0.8)),
        # ~7,200 tokens a request before its messages: 38 × 150 tokens of catalogue tools,
        # the built-in tools' definitions and the system prompt. That leaves room below the
        # threshold for a summary (500 tokens expected) and the last read.
        tools=_many_tools(38),
    )
    run = await runtime.start("read big.txt twice")
    assert (await runtime.wait(run.id, timeout=WAIT)).state is RunState.COMPLETED

    assert [r.system == SUMMARISER_SYSTEM for r in provider.requests] == [
        False,
        False,
        True,
        False,
    ]
    stored = await runtime.all_messages(run.id)
    assert len(stored) == 6  # nothing deleted
    before = stored[:5]  # the history when the third request was about to go
    second = provider.requests[1]
    # The conversation alone was far under the threshold; with the definitions it was over.
    assert estimate_tokens(before, system=second.system) < 1_500
    assert estimate_tokens(before, system=second.system, tools=second.tools) > 0.8 * window
    [note] = [n for n in await runtime.extensions.notes(run.id) if n.note == "compaction"]
    assert note.data["summary"] == "SUMMARY-TOOLS"
    # The request after the compaction is under the threshold, definitions included.
    after = provider.requests[3]
    assert "SUMMARY-TOOLS" in after.messages[0].text
    assert estimate_tokens(after.messages, system=after.system, tools=after.tools) <= 0.8 * window
    # /context shows the definitions as compaction counted them.
    usage = await runtime.context_usage(run.job_id)
    assert usage.tools == tool_specs_tokens(after.tools) and usage.tool_count == 45


async def test_definitions_alone_past_the_threshold_are_told_once_an_execution_and_not_compacted(
    make_runtime: Factory, workspace: Path
) -> None:
    (workspace / "big.txt").write_text("lorem ipsum dolor " * 70)
    # The built-in tools' definitions alone (~1,400 tokens) are past 80% of 1,000 tokens.
    runtime, provider = await make_runtime(
        [
            Turn(tool_calls=[("ask_user", {"question": "which file?"})]),
            _read_big(),
            _read_big(),
            Turn(text="final"),
        ],
        config=Config(defaults=Defaults(context_window=1000, compact_at=0.8)),
    )
    async with _notices_until_the_run_ends(runtime) as notices:
        run = await runtime.start("read big.txt")
        asked = await runtime.wait(run.id, timeout=WAIT)
        assert asked.state is RunState.INPUT_REQUIRED and asked.request is not None
        await runtime.respond(run.id, asked.request.id, "big.txt")  # a second execution
        assert (await runtime.wait(run.id, timeout=WAIT)).state is RunState.COMPLETED

    # Every request went without a summary call in between: four steps, four requests.
    assert len(provider.requests) == 4
    assert all(r.system != SUMMARISER_SYSTEM for r in provider.requests)
    assert [n.note for n in await runtime.extensions.notes(run.id)].count("compaction") == 0
    # Said once in each execution: before the question, and after the answer.
    told = [n for n in notices if "tool definitions" in n.text]
    assert len(told) == 2 and all(n.level == "warning" and n.run_id == run.id for n in told)
    assert "compacting cannot make room" in told[0].text
    assert "1,000-token context window" in told[0].text


async def test_definitions_just_under_the_threshold_compact_at_most_once_and_say_so_once(
    make_runtime: Factory, workspace: Path
) -> None:
    (workspace / "big.txt").write_text("lorem ipsum dolor " * 70)
    window = 10_000  # compacted past 8,000 tokens
    steps = [*(_read_big() for _ in range(5)), Turn(text="final")]

    def answer(request: ModelRequest) -> Turn:
        # A summary request gets a summary whenever it comes; a step gets the next step.
        return Turn(text="SUMMARY") if request.system == SUMMARISER_SYSTEM else steps.pop(0)

    runtime, provider = await make_runtime(
        [answer] * 12,
        config=Config(defaults=Defaults(context_window=window, compact_at=0.8)),
        # ~7,800 tokens a request before its messages (~97% of the threshold): 42 × 150 tokens
        # of catalogue tools, the built-in tools' definitions and the system prompt.
        tools=_many_tools(42),
    )
    async with _notices_until_the_run_ends(runtime) as notices:
        run = await runtime.start("read big.txt five times")
        assert (await runtime.wait(run.id, timeout=WAIT)).state is RunState.COMPLETED

    summary_calls = [r for r in provider.requests if r.system == SUMMARISER_SYSTEM]
    assert len(summary_calls) <= 1
    steps = [r for r in provider.requests if r.system != SUMMARISER_SYSTEM]
    assert len(steps) == 6  # five reads and the answer
    told = [n for n in notices if n.level == "warning" and "compact" in n.text]
    assert len(told) == 1 and told[0].run_id == run.id
    assert "10,000-token context window" in told[0].text


async def test_a_compaction_that_leaves_the_request_past_the_threshold_is_not_tried_again(
    make_runtime: Factory, workspace: Path
) -> None:
    # Five reads in one turn (~2,600 tokens) cannot be summarised away while they are the last
    # turn: a compaction keeps them, and the request after it is still past the threshold.
    (workspace / "big.txt").write_text("lorem ipsum dolor " * 510)
    window = 10_000  # compacted past 8,000 tokens
    five_reads = Turn(tool_calls=[("read_file", {"path": "big.txt"})] * 5)
    steps = [five_reads, *(_read_big() for _ in range(3)), Turn(text="final")]

    def answer(request: ModelRequest) -> Turn:
        return Turn(text="SUMMARY") if request.system == SUMMARISER_SYSTEM else steps.pop(0)

    runtime, provider = await make_runtime(
        [answer] * 12,
        config=Config(defaults=Defaults(context_window=window, compact_at=0.8)),
        tools=_many_tools(30),  # ~5,800 tokens a request before its messages
    )
    async with _notices_until_the_run_ends(runtime) as notices:
        run = await runtime.start("read big.txt four times")
        assert (await runtime.wait(run.id, timeout=WAIT)).state is RunState.COMPLETED

    assert [r.system == SUMMARISER_SYSTEM for r in provider.requests].count(True) == 1
    assert [n.note for n in await runtime.extensions.notes(run.id)].count("compaction") == 1
    told = [n for n in notices if n.level == "warning" and "compact" in n.text]
    assert len(told) == 1 and told[0].run_id == run.id
    assert "after compacting, the request still takes about" in told[0].text
