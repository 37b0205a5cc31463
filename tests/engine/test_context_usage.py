"""``Runtime.context_usage``: what a job's next request holds, part by part (``/context``),
estimated from the request the executor would make: the same system prompt and tool
definitions the model was sent, the messages by who wrote them, and what the latest model call
measured."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.compaction import CHARS_PER_TOKEN, MESSAGE_TOKENS, summary_allowance
from runtime.engine.context_usage import ContextUsage, usage_lines
from runtime.errors import JobNotFound
from runtime.models import Usage
from tests.fakes.scripted import ScriptedProvider, Turn, open_scripted

TASK = "Read the README and tell me what this project does, in two sentences."


async def test_a_jobs_context_is_its_requests_system_prompt_tools_and_messages_by_writer(
    db_path: Path, workspace: Path
) -> None:
    (workspace / "README.md").write_text("A sample project that counts pelicans.\n" * 20)
    (workspace / "AGENTS.md").write_text("Answer in British English.\n")
    provider = ScriptedProvider(
        [
            Turn("I will read it.", tool_calls=[("read_file", {"path": "README.md"})]),
            Turn(
                "It counts pelicans. Nothing else.",
                usage=Usage(input_tokens=900, output_tokens=12, cache_read_tokens=100),
            ),
        ]
    )
    runtime = await open_scripted(provider, db_path, workspace)
    try:
        run = await runtime.start(TASK)
        finished = await runtime.wait(run.id, timeout=30)
        assert finished.state.value == "completed"
        usage = await runtime.context_usage(run.job_id)
        sent = provider.requests[-1]
        # The parts the model was sent, estimated as compaction estimates a request.
        assert usage.system == len(sent.system) // CHARS_PER_TOKEN
        assert "British English" in sent.system and usage.system > 0
        assert usage.tool_count == len(sent.tools) > 0 and usage.tools > 0
        assert usage.by_writer["you"] == len(TASK) // CHARS_PER_TOKEN + MESSAGE_TOKENS
        results = [m for m in await runtime.all_messages(run.id) if m.role.value == "tool"]
        result_chars = sum(len(r.content) for m in results for r in m.tool_results)
        assert usage.by_writer["tool results"] == result_chars // CHARS_PER_TOKEN + MESSAGE_TOKENS
        assert usage.by_writer["the agent"] > 0
        assert usage.messages == 4 and usage.summarised == 0 and usage.mcp_not_counted == []
        # What the provider reported for the last call, beside the model's window.
        assert usage.measured == 1000 and usage.window == provider.context_window
        lines = usage_lines(usage)
        assert lines[:3] == [
            "Context of this job:",
            "  the model counted 1,000 tokens at its latest call; its window: 100,000 tokens",
            "  the next request, estimated from its characters (~4 a token):",
        ]
        assert any(line.strip().startswith("tool definitions") for line in lines)
        assert any(line.strip().startswith("free") for line in lines)
        with pytest.raises(JobNotFound):
            await runtime.context_usage("no-such-job")
    finally:
        await runtime.close()


async def test_context_counts_the_tools_of_mcp_servers_running_and_starts_none(
    db_path: Path, workspace: Path
) -> None:
    """Found by review: the report started every configured server (an HTTP server's sign-in
    with it) to count their tools."""
    from runtime.api import Runtime
    from runtime.config import Config
    from runtime.mcp import InMemoryServer, McpManager
    from tests.fakes.mcp_servers import build_server

    manager = McpManager(
        {"basic": InMemoryServer(build_server("basic"), timeout=5.0)}, workspace=workspace
    )
    runtime = await Runtime.open(
        db_path=db_path, workspace=workspace, config=Config(), model="demo:instant", mcp=manager
    )
    try:
        run = await runtime.start("hello")
        job_id = run.job_id
        await runtime.wait(run.id, timeout=30)  # its request listed the servers' tools
        started = await runtime.context_usage(job_id)
        assert started.mcp_not_counted == []
        await manager.aclose()  # stopped: the report must not start it again
        stopped = await runtime.context_usage(job_id)
        assert stopped.mcp_not_counted == ["basic"]
        assert stopped.tool_count < started.tool_count
        assert manager.status()["basic"].startswith("not started yet")
        assert any("not those of basic: not running" in line for line in usage_lines(stopped))
    finally:
        await runtime.close()


def test_the_report_says_compaction_cannot_help_when_the_summary_would_leave_too_little_room() -> (
    None
):
    """Under the threshold but with less than 2% of the window left for recent messages once a
    summary (4,096 tokens here) is counted, the engine does not compact: the report says so."""

    def usage(tools: int) -> ContextUsage:
        return ContextUsage(
            window=100_000,
            measured=0,
            system=1_000,
            tools=tools,
            tool_count=300,
            summary=0,
            summarised=0,
            compact_at=0.8,
            summary_allowance=summary_allowance(context_window=100_000),
        )

    crowded = usage(73_500)  # 80,000 - 74,500 - 4,096 = 1,404 tokens of room: under 2,000
    assert not crowded.compaction_can_help
    assert usage_lines(crowded)[-1] == (
        "  compaction cannot help: the system prompt and the tool definitions take ~74,500 of"
        " the 80,000 tokens compact_at (80%) of the window allows, leaving too little room for"
        " a summary (~4,096) and recent messages; the history is not compacted: offer fewer"
        " tools (MCP servers, the agent's tools) or use a larger window"
    )
    roomy = usage(70_000)  # 4,904 tokens of room
    assert roomy.compaction_can_help
    assert not any("compaction cannot help" in line for line in usage_lines(roomy))
