"""Small builders shared by the provider tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from runtime.models import ContentBlock, Message, Role
from runtime.providers.base import ModelEvent, ModelProvider, ModelRequest, ToolSpec

API_KEY = "sk-ant-test-SECRET-0123456789"


def message(position: int, role: Role, *blocks: ContentBlock) -> Message:
    return Message(
        id=f"msg-{position}",
        run_id="run-1",
        job_id="job-1",
        position=position,
        role=role,
        content=list(blocks),
        created_at=1_700_000_000.0 + position,
    )


def tool(name: str, description: str = "A tool.") -> ToolSpec:
    return ToolSpec(
        name=name,
        description=description,
        input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
    )


def request(
    messages: Sequence[Message] = (),
    *,
    model: str = "claude-test",
    system: str = "You are a careful assistant.",
    tools: Sequence[ToolSpec] = (),
    thinking_budget: int | None = None,
    max_tokens: int = 4096,
) -> ModelRequest:
    if not messages:
        messages = [message(0, Role.USER, _text("Say hello."))]
    return ModelRequest(
        model=model,
        system=system,
        messages=list(messages),
        tools=list(tools),
        thinking_budget=thinking_budget,
        max_tokens=max_tokens,
    )


def _text(text: str) -> ContentBlock:
    from runtime.models import TextBlock

    return TextBlock(text=text)


async def collect(provider: ModelProvider, model_request: ModelRequest) -> list[ModelEvent]:
    return [event async for event in provider.stream(model_request)]


async def collect_until_error(
    stream: AsyncIterator[ModelEvent],
) -> tuple[list[ModelEvent], BaseException | None]:
    events: list[ModelEvent] = []
    try:
        async for event in stream:
            events.append(event)
    except Exception as err:  # the test inspects which error it was
        return events, err
    return events, None
