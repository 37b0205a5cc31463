"""The UI under load (DESIGN §13), headless, side by side with the runtime alone:

1. a 1 MB streamed answer: time for the app to show it (streamed and committed) vs. the runtime
   alone (start → completed), goal ≤ 2×;
2. the longest event-loop stall while the app streams it, goal ≤ 50 ms;
3. keypress latency while 10 runs stream at once, goal ≤ 50 ms;
4. time to the first frame (browser's first page shown) on a 100,000-job database.

    .venv/bin/python bench/ui_bench.py [--size-kib 1024] [--jobs 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from textual import events  # noqa: E402

from runtime.api import Runtime  # noqa: E402
from runtime.config import Config  # noqa: E402
from runtime.errors import RunStateConflict  # noqa: E402
from runtime.models import RunState  # noqa: E402
from tui.app import Settings, create_app  # noqa: E402
from tui.screens.main import MainScreen  # noqa: E402
from tui.widgets.message_view import MessageView  # noqa: E402

SIZE = (120, 36)


async def _open(base: Path) -> Runtime:
    workspace = base / "ws"
    workspace.mkdir(exist_ok=True)
    return await Runtime.open(
        db_path=base / "bench.db", workspace=workspace, config=Config(), model="demo:instant"
    )


def _app(runtime: Runtime, base: Path) -> Any:
    return create_app(
        runtime, Settings(workspace=base / "ws", theme="agent-dusk", remember_theme=False)
    )


async def _until(pilot: Any, condition: Callable[[], object], timeout: float = 600) -> None:
    """Poll ``condition`` every 5 ms, then let the screen paint once.

    Polling with ``pilot.pause`` would be unfair: each pause forces a full layout and paint (and
    posts a callback to every widget), 200 times a second, where a real terminal paints at most
    ``TEXTUAL_FPS`` (60) times a second."""
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.005)
        await pilot.pause(0)


class StallMonitor:
    """Measures how late a 5 ms ticker wakes up: the longest time the loop was blocked."""

    def __init__(self) -> None:
        self.longest = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            before = loop.time()
            await asyncio.sleep(0.005)
            self.longest = max(self.longest, loop.time() - before - 0.005)

    def __enter__(self) -> StallMonitor:
        self._task = asyncio.get_running_loop().create_task(self._tick())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


async def runtime_alone(size_kib: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        runtime = await _open(Path(tmp))
        try:
            started = time.perf_counter()
            run = await runtime.start(f"/stream {size_kib}")
            boundary = await runtime.wait(run.id, timeout=600)
            assert boundary.state is RunState.COMPLETED, boundary
            return time.perf_counter() - started
        finally:
            await runtime.close()


async def app_streaming(size_kib: int) -> tuple[float, float, int]:
    with tempfile.TemporaryDirectory() as tmp:
        runtime = await _open(Path(tmp))
        try:
            app = _app(runtime, Path(tmp))
            async with app.run_test(size=SIZE) as pilot:
                await pilot.pause()
                screen = app.screen
                assert isinstance(screen, MainScreen)
                composer_input = screen.composer.input
                composer_input.value = f"//stream {size_kib}"  # //: a message
                composer_input.focus()
                await pilot.pause()

                def shown() -> bool:
                    run = screen.selected_run
                    if run is None or run.state is not RunState.COMPLETED:
                        return False
                    views = [v for v in screen.query(MessageView) if v.committed]
                    return any(len(v.text) >= size_kib * 1000 for v in views)

                with StallMonitor() as monitor:
                    started = time.perf_counter()
                    await pilot.press("enter")  # the composer's Enter: sent
                    await _until(pilot, shown)
                    elapsed = time.perf_counter() - started
                text = max(len(v.text) for v in screen.query(MessageView))
                return elapsed, monitor.longest, text
        finally:
            await runtime.close()


async def keypress_latency(runs: int, size_kib: int, presses: int = 20) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        runtime = await _open(Path(tmp))
        try:
            app = _app(runtime, Path(tmp))
            async with app.run_test(size=SIZE) as pilot:
                await pilot.pause()
                screen = app.screen
                assert isinstance(screen, MainScreen)
                started = [await runtime.start(f"/stream {size_kib}") for _ in range(runs)]
                screen.open_run(started[0].id)
                composer_input = screen.composer.input
                composer_input.focus()
                await pilot.pause()
                streaming = [
                    r for r in started if (await runtime.get_run(r.id)).state is RunState.RUNNING
                ]
                print(f"  ({len(streaming)} of {runs} runs streaming when the keys were pressed)")
                latencies: list[float] = []
                for index in range(presses):
                    expected = len(composer_input.value) + 1
                    t0 = time.perf_counter()
                    app.post_message(events.Key("x", "x"))
                    async with asyncio.timeout(10):
                        while len(composer_input.value) < expected:
                            await asyncio.sleep(0)
                    latencies.append(time.perf_counter() - t0)
                    if index % 5 == 4:
                        await asyncio.sleep(0.05)
                still_streaming = [
                    r for r in started if (await runtime.get_run(r.id)).state is RunState.RUNNING
                ]
                print(f"  ({len(still_streaming)} of {runs} runs were still streaming at the end)")
                for run in started:
                    # A run may finish between the check and the cancel.
                    with contextlib.suppress(RunStateConflict):
                        await runtime.cancel(run.id)
                return latencies
        finally:
            await runtime.close()


async def first_frame(jobs: int) -> tuple[float, float]:
    import browser_bench

    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        fill_started = time.perf_counter()
        browser_bench.fill(
            base / "bench.db", jobs, max(jobs * 2, browser_bench.BIG_RUN_MESSAGES * 2)
        )
        fill_time = time.perf_counter() - fill_started
        started = time.perf_counter()
        runtime = await _open(base)
        try:
            app = _app(runtime, base)
            async with app.run_test(size=SIZE) as pilot:
                screen = app.screen
                assert isinstance(screen, MainScreen)
                await _until(pilot, lambda: screen.job_tree.job_ids, timeout=60)
                return time.perf_counter() - started, fill_time
        finally:
            await runtime.close()


async def bare_textual_first_frame() -> float:
    from textual.app import App
    from textual.widgets import Static

    class Bare(App[None]):
        def compose(self) -> Any:
            yield Static("hello")

    started = time.perf_counter()
    async with Bare().run_test(size=SIZE) as pilot:
        await pilot.pause()
        return time.perf_counter() - started


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size-kib", type=int, default=1024)
    parser.add_argument("--jobs", type=int, default=100_000)
    args = parser.parse_args()

    alone = await runtime_alone(args.size_kib)
    with_ui, stall, shown = await app_streaming(args.size_kib)
    print(f"1 MB answer ({shown / 1024:,.0f} KiB shown)")
    print(f"  runtime alone:         {alone * 1000:9.1f} ms")
    print(f"  through the app:       {with_ui * 1000:9.1f} ms")
    print(f"  ratio app / runtime:   {with_ui / alone:9.2f}x   (goal ≤ 2x)")
    print(f"  longest loop stall:    {stall * 1000:9.1f} ms   (goal ≤ 50 ms)")

    latencies = await keypress_latency(10, 2048)
    print("keypress latency while 10 runs stream")
    print(f"  median:                {statistics.median(latencies) * 1000:9.1f} ms")
    print(f"  worst:                 {max(latencies) * 1000:9.1f} ms   (goal ≤ 50 ms)")

    bare = await bare_textual_first_frame()
    frame, fill_time = await first_frame(args.jobs)
    print(f"first frame with {args.jobs:,} jobs (database filled in {fill_time:.1f} s)")
    print(f"  bare Textual app:      {bare * 1000:9.1f} ms")
    print(f"  agent-tui (headless):  {frame * 1000:9.1f} ms   (open + first page shown)")
    print(f"  ratio:                 {frame / bare:9.2f}x")


if __name__ == "__main__":
    asyncio.run(main())
