"""Small builders shared by the store tests."""

from __future__ import annotations

from typing import Any

from runtime.models import Role, Run, TextBlock, ToolCall, ToolResultBlock, ToolUseBlock, Usage
from runtime.store.base import NewMessage, NewRun, NewToolCall, Store


def new_run(text: str | None = "Summarise the README", **extra: Any) -> NewRun:
    fields: dict[str, Any] = {
        "agent": "default",
        "model": "demo",
        "input": text,
        "workspace": "/tmp/project",
    }
    fields.update(extra)
    return NewRun(**fields)


async def running_run(store: Store, *, owner_id: str = "owner-1", **extra: Any) -> tuple[Run, str]:
    """A claimed run and its execution token."""
    created = await store.create_run(new_run(owner_id=owner_id, **extra))
    claimed = await store.claim_run(created.id, owner_id=owner_id)
    assert claimed.execution_token is not None
    return claimed, claimed.execution_token


def assistant(text: str, *, usage: Usage | None = None, cost: float = 0.0) -> NewMessage:
    return NewMessage(
        role=Role.ASSISTANT, content=[TextBlock(text=text)], usage=usage, cost_usd=cost
    )


def tool_calls(*names: str, idempotent: bool = False) -> list[NewToolCall]:
    return [
        NewToolCall(
            provider_id=f"toolu_{i}", name=name, arguments={"path": f"f{i}"}, idempotent=idempotent
        )
        for i, name in enumerate(names)
    ]


async def step_with_tools(
    store: Store, run: Run, token: str, *names: str, idempotent: bool = False
) -> list[ToolCall]:
    calls = tool_calls(*names, idempotent=idempotent)
    content: list[Any] = [TextBlock(text="Let me look.")]
    _, reserved = await store.commit_message(
        run.id,
        token=token,
        message=NewMessage(role=Role.ASSISTANT, content=content),
        tool_calls=calls,
    )
    return reserved


def tool_result_message(calls: list[ToolCall], text: str) -> NewMessage:
    return NewMessage(
        role=Role.TOOL,
        content=[
            ToolResultBlock(tool_use_id=c.provider_id, tool_call_id=c.id, content=text)
            for c in calls
        ],
    )


def tool_use_message(calls: list[NewToolCall]) -> NewMessage:
    return NewMessage(
        role=Role.ASSISTANT,
        content=[
            ToolUseBlock(id=c.provider_id, tool_call_id=c.id or "", name=c.name, input=c.arguments)
            for c in calls
        ],
    )


WRITER = "test-host:1:writer"
"""The writer of the drafts a store test saves (a process's owner id)."""


async def composer_text(store: Store, job_id: str | None, *, writer: str | None = None) -> str:
    """The composer draft ``writer`` keeps for ``job_id`` (None: every writer's, joined)."""
    drafts = await store.get_composer_drafts(job_id)
    return "\n\n".join(d.text for d in drafts if writer is None or d.writer == writer)


async def queued_messages(store: Store, job_id: str, *, writer: str | None = None) -> list[str]:
    """The messages ``writer`` queued for ``job_id`` (None: every writer's)."""
    drafts = await store.get_composer_drafts(job_id)
    return [text for d in drafts if writer is None or d.writer == writer for text in d.queued]


async def answer_text(store: Store, request_id: str, *, writer: str | None = None) -> str:
    """The answer ``writer`` was typing to ``request_id`` (None: every writer's, joined)."""
    drafts = await store.get_answer_drafts(request_id)
    return "\n\n".join(d.text for d in drafts if writer is None or d.writer == writer)
