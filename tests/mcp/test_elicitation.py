"""A question from a server while several of its calls run: it belongs to the server session."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from runtime.config import HttpServerConfig
from runtime.mcp import McpManager
from runtime.mcp.manager import ServerConfig
from runtime.store.base import NewInputRequest
from tests.fakes.mcp_servers import serve_http, stdio_config
from tests.mcp.helpers import Recorder, tool_named

pytestmark = pytest.mark.slow  # real servers, calls that take seconds

ANSWER = {"action": "accept", "content": {"name": "Ada", "age": 36}}


@dataclass
class Scene:
    manager: McpManager
    slow_recorder: Recorder
    finished: list[str]

    def tools_in_flight(self) -> list[str]:
        connection = self.manager._connections.get("basic")
        return [call.tool for call in connection.in_flight] if connection else []


async def _until(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.01)


def _finished_on_the_server(recorder: Recorder) -> Callable[[], bool]:
    """True once the slow call's last progress ('done', sent just before its result) arrived."""
    return lambda: any(message == "done" for _, _, message in recorder.progress)


async def _two_calls_one_asking(
    manager: McpManager,
    workspace: Path,
    answer: Callable[[NewInputRequest, Scene], Awaitable[Any]],
    *,
    seconds: float,
) -> tuple[str, str, list[NewInputRequest], list[str]]:
    slow_recorder = Recorder()
    ask_recorder = Recorder()
    finished: list[str] = []
    scene = Scene(manager, slow_recorder, finished)

    async def answering(request: NewInputRequest) -> Any:
        return await answer(request, scene)

    # Either call's context may carry the question (stdio cannot say which call asked).
    slow_recorder.answer = ask_recorder.answer = answering
    slow = await tool_named(manager, "basic__slow")
    ask = await tool_named(manager, "basic__ask")

    async def run(tool: Any, arguments: dict[str, Any], recorder: Recorder, call_id: str) -> str:
        output = await tool.run(arguments, recorder.context(workspace, tool_call_id=call_id))
        finished.append(call_id)
        return str(output.content)

    slow_task = asyncio.create_task(
        run(slow, {"seconds": seconds, "steps": 4}, slow_recorder, "call-slow")
    )
    await _until(lambda: bool(slow_recorder.progress))  # the slow call is in flight
    ask_task = asyncio.create_task(run(ask, {}, ask_recorder, "call-ask"))
    async with asyncio.timeout(60):
        slow_text, ask_text = await asyncio.gather(slow_task, ask_task)
    return slow_text, ask_text, slow_recorder.requests + ask_recorder.requests, finished


async def _answer_after_the_slow_call_finished(request: NewInputRequest, scene: Scene) -> Any:
    await _until(_finished_on_the_server(scene.slow_recorder))
    await _until(lambda: "slow" not in scene.tools_in_flight())  # its result has arrived
    if request.tool_call_id == "call-slow":
        assert scene.finished == [], "the call carrying the question ended before its answer"
    return ANSWER


async def test_over_stdio_a_question_names_the_server_and_every_call_and_pauses_their_clocks(
    workspace: Path,
) -> None:
    # Each call may take 3 s of server time; the slow one works 4.5 s, and the answer comes
    # only after that: both complete because both clocks stop while the form waits.
    servers: dict[str, ServerConfig] = {"basic": stdio_config("basic", timeout=3.0)}
    async with McpManager(servers, workspace=workspace) as manager:
        slow_text, ask_text, requests, finished = await _two_calls_one_asking(
            manager, workspace, _answer_after_the_slow_call_finished, seconds=4.5
        )

    assert ask_text == "hello Ada, aged 36"
    assert slow_text == "worked 4.5 s"
    [request] = requests
    assert request.detail["server"] == "basic"
    assert sorted(request.detail["calls"]) == ["ask", "slow"]
    assert (
        request.prompt == "Who are you?\n(asked by MCP server 'basic' while it runs 'slow', 'ask')"
    )
    # The question is attached to the oldest call, which kept its result until it was answered.
    assert request.tool_call_id == "call-slow"
    assert sorted(finished) == ["call-ask", "call-slow"]


async def test_over_http_a_question_is_attached_to_the_call_that_asked(workspace: Path) -> None:
    with serve_http("basic") as url:
        servers: dict[str, ServerConfig] = {"basic": HttpServerConfig(url=url, timeout=3.0)}
        async with McpManager(servers, workspace=workspace) as manager:
            slow_text, ask_text, requests, _ = await _two_calls_one_asking(
                manager, workspace, _answer_after_the_slow_call_finished, seconds=4.5
            )

    assert (slow_text, ask_text) == ("worked 4.5 s", "hello Ada, aged 36")
    [request] = requests
    assert request.tool_call_id == "call-ask"
    assert request.detail["tool"] == "ask"
    assert request.detail["calls"] == ["ask"]
    assert request.prompt == "Who are you?"


async def test_a_question_cancelled_after_the_other_call_ended_is_clean(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def cancel_later(request: NewInputRequest, scene: Scene) -> Any:
        await _until(lambda: "slow" not in scene.tools_in_flight())
        raise asyncio.CancelledError  # the person's wait was withdrawn

    servers: dict[str, ServerConfig] = {"basic": stdio_config("basic", timeout=10.0)}
    with caplog.at_level(logging.DEBUG):
        async with McpManager(servers, workspace=workspace) as manager:
            slow_text, ask_text, _, _ = await _two_calls_one_asking(
                manager, workspace, cancel_later, seconds=0.5
            )

    assert (slow_text, ask_text) == ("worked 0.5 s", "no answer: cancel")
    assert "Cannot change state" not in caplog.text
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR]
