"""Delta throughput through ``observe`` and the time for a 1 MB answer, runtime alone (§13).

Baseline, side by side in the same process: iterating the demo model's stream with no runtime.
Run: ``.venv/bin/python bench/stream_bench.py [--size-kib N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runtime.api import Runtime
from runtime.config import Config
from runtime.events import MessageCommitted, MessageDelta
from runtime.models import Message, Role, TextBlock
from runtime.providers.base import ModelRequest, TextDelta
from runtime.providers.demo import DemoProvider


async def provider_alone(size_kib: int) -> tuple[float, int]:
    provider = DemoProvider(instant=True)
    prompt = Message(
        id="m",
        run_id="r",
        job_id="j",
        position=0,
        role=Role.USER,
        content=[TextBlock(text=f"/stream {size_kib}")],
        created_at=0,
    )
    request = ModelRequest(model="instant", system="", messages=[prompt])
    started = time.perf_counter()
    deltas = 0
    async for event in provider.stream(request):
        if isinstance(event, TextDelta):
            deltas += 1
    return time.perf_counter() - started, deltas


async def through_runtime(size_kib: int) -> tuple[float, int, int, int]:
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "ws"
        workspace.mkdir()
        runtime = await Runtime.open(
            db_path=Path(tmp) / "bench.db",
            workspace=workspace,
            config=Config(),
            model="demo:instant",
        )
        received = 0
        text = 0
        done = asyncio.Event()

        async def observe() -> None:
            nonlocal received, text
            async for event in runtime.observe():
                if isinstance(event, MessageDelta):
                    received += 1
                    text += len(event.text)
                elif isinstance(event, MessageCommitted) and event.message.role is Role.ASSISTANT:
                    done.set()
                    return

        watcher = asyncio.create_task(observe())
        await asyncio.sleep(0)
        started = time.perf_counter()
        run = await runtime.start(f"/stream {size_kib}")
        boundary = await runtime.wait(run.id, timeout=600)
        elapsed = time.perf_counter() - started
        await asyncio.wait_for(done.wait(), 30)
        watcher.cancel()
        committed = (await runtime.messages(run.id))[-1].text
        assert boundary.state.value == "completed", boundary
        await runtime.close()
        return elapsed, received, text, len(committed)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size-kib", type=int, default=1024)
    args = parser.parse_args()
    base_time, published = await provider_alone(args.size_kib)
    run_time, received, text, committed = await through_runtime(args.size_kib)
    rate = published / run_time
    print(f"answer size:                 {committed / 1024:,.0f} KiB in {published:,} deltas")
    print(f"baseline (model stream only): {base_time * 1000:8.1f} ms")
    print(f"runtime end to end:           {run_time * 1000:8.1f} ms  (start → completed)")
    print(f"ratio runtime / baseline:     {run_time / base_time:8.2f}x")
    print(
        f"deltas through observe:       {rate:,.0f}/s published; observer got {received:,} "
        f"merged events carrying {text / 1024:,.0f} KiB (goal ≥ 100,000/s)"
    )


if __name__ == "__main__":
    asyncio.run(main())
