"""Delta throughput through ``observe`` and the time for a 1 MB answer, runtime alone (§13).

Baseline, side by side in the same process: iterating the demo model's stream with no runtime.
Also the draft kept while it streamed (DESIGN §5: every character shown is saved within 250 ms):
how many saves, the longest the saved draft lagged behind the stream, the text handed to the
store's ``save_draft`` against the answer's own size (each character once is the floor), and
the bytes the process wrote (``wchar`` of ``/proc/self/io``: database, WAL and all).
Run: ``.venv/bin/python bench/stream_bench.py [--size-kib N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


@dataclass
class Drafts:
    saves: int
    text: int
    """Characters handed to ``save_draft``, all saves together."""
    longest_lag: float
    """Seconds: the longest the saved draft stayed behind the streamed text."""


def _written() -> int | None:
    """Bytes this process has passed to write(2) so far (Linux), or None."""
    try:
        for line in Path("/proc/self/io").read_text().splitlines():
            if line.startswith("wchar:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


async def through_runtime(size_kib: int) -> tuple[float, int, int, int, Drafts, int | None]:
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
        drafted = 0
        saved_at: list[float] = []
        done = asyncio.Event()
        save_draft = runtime.store.save_draft

        async def counted_save(run_id: str, **fields: Any) -> None:
            nonlocal drafted
            drafted += len(fields["text"])
            await save_draft(run_id, **fields)
            saved_at.append(time.perf_counter())

        runtime.store.save_draft = counted_save  # type: ignore[method-assign]

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
        written = _written()
        started = time.perf_counter()
        run = await runtime.start(f"/stream {size_kib}")
        boundary = await runtime.wait(run.id, timeout=600)
        elapsed = time.perf_counter() - started
        after = _written()
        wrote = None if written is None or after is None else after - written
        await asyncio.wait_for(done.wait(), 30)
        watcher.cancel()
        committed = (await runtime.messages(run.id))[-1].text
        assert boundary.state.value == "completed", boundary
        await runtime.close()
        # The longest the draft lagged behind the stream: between the start and the first
        # save, between two saves, and from the last save to the end (DESIGN §5: ≤ 250 ms).
        stamps = [started, *saved_at, started + elapsed]
        lag = max(b - a for a, b in itertools.pairwise(stamps))
        drafts = Drafts(len(saved_at), drafted, lag)
        return elapsed, received, text, len(committed), drafts, wrote


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size-kib", type=int, default=1024)
    args = parser.parse_args()
    base_time, published = await provider_alone(args.size_kib)
    run_time, received, text, committed, drafts, wrote = await through_runtime(args.size_kib)
    rate = published / run_time
    print(f"answer size:                 {committed / 1024:,.0f} KiB in {published:,} deltas")
    print(f"baseline (model stream only): {base_time * 1000:8.1f} ms")
    print(f"runtime end to end:           {run_time * 1000:8.1f} ms  (start → completed)")
    print(f"ratio runtime / baseline:     {run_time / base_time:8.2f}x")
    print(
        f"deltas through observe:       {rate:,.0f}/s published; observer got {received:,} "
        f"merged events carrying {text / 1024:,.0f} KiB (goal ≥ 100,000/s)"
    )
    print(
        f"draft while it streamed: {drafts.saves} saves, the draft at most "
        f"{drafts.longest_lag * 1000:,.0f} ms behind the stream (DESIGN §5: ≤ 250 ms); "
        f"{drafts.text / 1024:,.0f} KiB of text saved = {drafts.text / committed:.2f}x the "
        "answer (each character once: 1.00x)"
    )
    if wrote is not None:
        print(
            f"bytes the process wrote (database, WAL): {wrote / 1024:,.0f} KiB = "
            f"{wrote / committed:.2f}x the answer"
        )


if __name__ == "__main__":
    asyncio.run(main())
