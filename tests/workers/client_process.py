"""A client process of the multi-process worker test: it queues runs for workers (detached),
answers every question and approval they ask, and executes nothing itself.

    python -m tests.workers.client_process DB-OR-URL WORKSPACE NAME DEMO_RUNS STREAM_RUNS STREAM_KIB

Prints one JSON line per run it created and per answer, then ``{"kind": "done"}`` once every
run it created is terminal."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from runtime.api import Runtime
from runtime.config import Config
from runtime.errors import AlreadyAnswered, RunStateConflict
from runtime.models import InputKind


def say(**data: object) -> None:
    sys.stdout.write(json.dumps(data) + "\n")
    sys.stdout.flush()


async def main(db: str, workspace: str, name: str, demo: int, stream: int, kib: int) -> None:
    runtime = await Runtime.open(
        db_path=db if db.startswith("postgresql://") else Path(db),
        workspace=Path(workspace),
        config=Config(),
        model="demo:instant",
        env={},
    )
    try:
        mine: set[str] = set()
        prompts = [f"/stream {kib}"] * stream + [f"{name}: look around, {n}" for n in range(demo)]
        for prompt in prompts:
            run = await runtime.start(prompt, detached=True)
            mine.add(run.id)
            say(kind="created", run_id=run.id, stream=prompt.startswith("/stream"))
        while True:
            for request in await runtime.inbox(limit=1000):
                if request.run_id not in mine:
                    continue
                if request.kind is InputKind.QUESTION:
                    value: object = request.options[0]
                else:
                    value = {"decision": "allow_once", "reason": None}
                try:
                    await runtime.respond(request.run_id, request.id, value)
                except (AlreadyAnswered, RunStateConflict):
                    continue
                say(kind="answered", run_id=request.run_id, request=request.kind.value)
            runs = [await runtime.get_run(run_id) for run_id in sorted(mine)]
            if all(run.state.is_terminal for run in runs):
                say(kind="done", states=sorted({run.state.value for run in runs}))
                return
            await runtime.dispatch.await_change()
    finally:
        await runtime.close()


if __name__ == "__main__":
    db, workspace, name, demo, stream, kib = sys.argv[1:7]
    asyncio.run(main(db, workspace, name, int(demo), int(stream), int(kib)))
