"""Where the TUI's event loop is blocked: loaded into agent-tui before it starts (see
``pty_bench.py stalls`` and ``agent_tui(..., probe=PATH)`` in ``_pty.py``), it watches the loop
of the main thread (the one Textual draws and reads keys on) and writes a JSON report to PATH
when the program exits:

- ``lateness``: how late a 5 ms ticker on that loop wakes up, sampled all the time: a key typed
  at a random moment waits about that long before the app can look at it;
- ``callbacks``: how long each callback the loop ran took (one step of a task, a timer, ...);
- ``slowest``: the slowest callbacks, each with where the main thread was while it ran long
  (a sampler thread looks at ``sys._current_frames()`` every 5 ms once a callback has run for
  more than 20 ms, and keeps the innermost frames);
- ``gc_pauses``: each garbage collection's ``[time, generation, milliseconds]`` (a collection
  stops every thread, the loop's included);
- ``ticks``: each tick's ``[time, lateness]`` and each slow callback's ``at``, in
  ``time.perf_counter()`` seconds, which on Linux is the system-wide monotonic clock: a
  benchmark can keep what fell between two moments of its own (while a run streamed, say) and
  leave out the start-up and the shutdown.

Only the main thread's loop is watched; an engine on a thread of its own is not counted.
"""

from __future__ import annotations

import asyncio
import atexit
import gc
import json
import re
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

TICK = 0.005
SAMPLE_AFTER = 0.020
SAMPLE_EVERY = 0.005
KEEP_SLOWEST = 40
FRAMES = 8


class _Probe:
    def __init__(self, out: Path) -> None:
        self.out = out
        self.main = threading.get_ident()
        self.current: Any = None
        self.started = 0.0
        self.samples: list[str] = []
        self.durations: list[float] = []
        self.lateness: list[float] = []
        self.ticks: list[tuple[float, float]] = []
        self.slowest: list[dict[str, Any]] = []
        self.kinds: dict[str, list[float]] = {}
        """Per kind of callback: [count, total seconds, longest]."""
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stop = threading.Event()
        self.gc_started = 0.0
        self.collections: list[tuple[float, int, float]] = []
        """Each garbage collection: (when it started, its generation, seconds it took)."""

    def collected(self, phase: str, info: dict[str, int]) -> None:
        """``gc.callbacks``: how long each collection stops the program (any thread's)."""
        if phase == "start":
            self.gc_started = time.perf_counter()
        else:
            took = time.perf_counter() - self.gc_started
            self.collections.append((self.gc_started, info["generation"], took))

    # --- the loop side -----------------------------------------------------------------------
    def ran(self, handle: Any, duration: float) -> None:
        self.durations.append(duration)
        description = _describe(handle)
        kind = self.kinds.setdefault(_KIND.sub("", description), [0, 0.0, 0.0])
        kind[0] += 1
        kind[1] += duration
        kind[2] = max(kind[2], duration)
        if duration < SAMPLE_AFTER:
            return
        entry = {
            "at": self.started,
            "ms": round(duration * 1000, 1),
            "callback": description,
            "where": Counter(self.samples).most_common(3),
        }
        self.slowest.append(entry)
        self.slowest.sort(key=lambda e: -e["ms"])
        del self.slowest[KEEP_SLOWEST:]

    def tick(self, due: float) -> None:
        loop = self.loop
        assert loop is not None
        now = loop.time()
        late = max(0.0, now - due)
        self.lateness.append(late)
        self.ticks.append((time.perf_counter(), late))
        if not self.stop.is_set():
            loop.call_at(now + TICK, self.tick, now + TICK)

    # --- the sampler thread ------------------------------------------------------------------
    def sample(self) -> None:
        while not self.stop.wait(SAMPLE_EVERY):
            handle, started = self.current, self.started
            if handle is None or time.perf_counter() - started < SAMPLE_AFTER:
                continue
            frame = sys._current_frames().get(self.main)
            if frame is None or self.current is not handle:
                continue
            stack: list[str] = []
            while frame is not None and len(stack) < FRAMES:
                code = frame.f_code
                stack.append(f"{code.co_name} ({_short(code.co_filename)}:{frame.f_lineno})")
                frame = frame.f_back
            self.samples.append(" < ".join(stack))

    def write(self) -> None:
        self.stop.set()
        durations = sorted(self.durations)
        lateness = sorted(self.lateness)
        report = {
            "callbacks": len(durations),
            "callback_ms": _quantiles(durations),
            "callbacks_over_ms": {
                str(limit): sum(1 for d in durations if d > limit / 1000) for limit in (10, 30, 50)
            },
            "ticks": [[round(at, 6), round(late, 6)] for at, late in self.ticks],
            "lateness_ms": _quantiles(lateness),
            "lateness_over_ms": {
                str(limit): sum(1 for d in lateness if d > limit / 1000) for limit in (10, 30, 50)
            },
            "kinds": {
                name: {"n": n, "total_ms": round(total * 1000), "max_ms": round(top * 1000, 1)}
                for name, (n, total, top) in sorted(self.kinds.items(), key=lambda kv: -kv[1][1])[
                    :25
                ]
            },
            "slowest": self.slowest,
            "gc_pauses": [
                [round(at, 6), generation, round(took * 1000, 2)]
                for at, generation, took in self.collections
            ],
        }
        self.out.write_text(json.dumps(report, indent=1))


_KIND = re.compile(r"(?<=-)[0-9a-f]{32}|(?<=Task-)\d+|\(.*\)|0x[0-9a-f]+")
"""What makes callbacks of one kind differ: run ids, task numbers, widget names, addresses."""


def _quantiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}

    def at(q: float) -> float:
        return round(values[min(len(values) - 1, int(q * len(values)))] * 1000, 2)

    return {"p50": at(0.5), "p90": at(0.9), "p99": at(0.99), "max": at(1.0)}


def _short(path: str) -> str:
    parts = Path(path).parts
    return "/".join(parts[-2:])


def _describe(handle: Any) -> str:
    callback = getattr(handle, "_callback", None)
    owner = getattr(callback, "__self__", None)
    if isinstance(owner, asyncio.Task):
        coro = owner.get_coro()
        name = getattr(coro, "__qualname__", repr(coro))
        return f"task {owner.get_name()}: {name}"
    return repr(callback)[:160]


def install(out: str | Path) -> None:
    probe = _Probe(Path(out))
    original = asyncio.events.Handle._run

    def _run(self: asyncio.Handle) -> None:
        if threading.get_ident() != probe.main:
            original(self)
            return
        if probe.loop is None:
            probe.loop = asyncio.get_running_loop()
            due = probe.loop.time() + TICK
            probe.loop.call_at(due, probe.tick, due)
        probe.samples = []
        probe.started = time.perf_counter()
        probe.current = self
        try:
            original(self)
        finally:
            probe.current = None
            probe.ran(self, time.perf_counter() - probe.started)

    asyncio.events.Handle._run = _run  # type: ignore[method-assign]
    gc.callbacks.append(probe.collected)
    threading.Thread(target=probe.sample, name="loop-probe", daemon=True).start()
    atexit.register(probe.write)
