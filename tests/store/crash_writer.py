"""A process that commits agent steps in a loop through SqliteStore until it is killed.

After each step it prints ``step N`` (flushed), so a test can kill it once some are durable."""

from __future__ import annotations

import asyncio
import sys

from runtime.models import Role, TextBlock, ToolCallState, ToolResultBlock, Usage
from runtime.store.base import NewMessage, NewRun, NewToolCall
from runtime.store.sqlite import SqliteStore


async def main(path: str) -> None:
    store = SqliteStore(path)
    await store.open()
    await store.register_owner("writer", lease_seconds=60)
    run = await store.create_run(
        NewRun(agent="default", model="demo", input="loop", workspace="/w", owner_id="writer")
    )
    run = await store.claim_run(run.id, owner_id="writer")
    token = run.execution_token
    assert token is not None
    step = 0
    print("ready", run.id, flush=True)
    while True:
        step += 1
        calls = [
            NewToolCall(provider_id=f"toolu_{step}_{i}", name="read_file", arguments={"i": i})
            for i in range(3)
        ]
        _, reserved = await store.commit_message(
            run.id,
            token=token,
            message=NewMessage(
                role=Role.ASSISTANT,
                content=[TextBlock(text=f"step {step} " + "x" * 500)],
                usage=Usage(input_tokens=10, output_tokens=5),
            ),
            tool_calls=calls,
        )
        for call in reserved:
            await store.set_tool_state(call.id, token=token, to=ToolCallState.RUNNING)
            await store.set_tool_state(
                call.id, token=token, to=ToolCallState.COMPLETED, result="r" * 1000
            )
        await store.commit_message(
            run.id,
            token=token,
            message=NewMessage(
                role=Role.TOOL,
                content=[
                    ToolResultBlock(tool_use_id=c.provider_id, tool_call_id=c.id, content="ok")
                    for c in reserved
                ],
            ),
        )
        await store.create_checkpoint(run.id, token=token, step=step)
        print("step", step, flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
