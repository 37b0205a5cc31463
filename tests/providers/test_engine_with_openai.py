"""The engine driving the OpenAI-compatible provider against the fake server on loopback."""

from __future__ import annotations

from pathlib import Path

from runtime.api import Runtime
from runtime.config import Config
from runtime.models import Role, RunState, ToolCallState
from tests.fakes.openai_server import (
    FakeOpenAIServer,
    openai_error_response,
    openai_text_response,
    openai_tool_calls_response,
)

WAIT = 20


async def test_a_tool_round_over_chat_completions_completes_the_run(
    db_path: Path, workspace: Path
) -> None:
    async with FakeOpenAIServer() as server:
        server.add(
            openai_tool_calls_response([("call_1", "read_file", {"path": "notes.txt"})]),
            openai_text_response(["The answer ", "is 42."]),
        )
        runtime = await Runtime.open(
            db_path=db_path,
            workspace=workspace,
            config=Config(),
            model="openai:llama3.1",
            env={"OPENAI_BASE_URL": server.base_url},
        )
        try:
            run = await runtime.start("what is the answer?")
            boundary = await runtime.wait(run.id, timeout=WAIT)
            assert boundary.state is RunState.COMPLETED, boundary.run.failure
            assert boundary.run.outcome == "The answer is 42."
            [call] = await runtime.tool_calls(run.id)
            assert call.state is ToolCallState.COMPLETED and call.provider_id == "call_1"
            second = server.requests[1].body
            tool_message = next(m for m in second["messages"] if m["role"] == "tool")
            assert tool_message["tool_call_id"] == "call_1"
            assert "the answer is 42" in tool_message["content"]
            roles = [m.role for m in await runtime.messages(run.id)]
            assert roles == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]
        finally:
            await runtime.close()


async def test_a_rejected_key_fails_the_run_naming_openai_api_key(
    db_path: Path, workspace: Path
) -> None:
    async with FakeOpenAIServer() as server:
        server.add(openai_error_response(401, "bad key", error_type="authentication_error"))
        runtime = await Runtime.open(
            db_path=db_path,
            workspace=workspace,
            config=Config(),
            model="openai:llama3.1",
            env={"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-nope"},
        )
        try:
            run = await runtime.start("hi")
            boundary = await runtime.wait(run.id, timeout=WAIT)
            assert boundary.state is RunState.FAILED and boundary.run.failure is not None
            assert "OPENAI_API_KEY" in boundary.run.failure.message
        finally:
            await runtime.close()
