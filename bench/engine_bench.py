"""The real engine, step by step (issue 13): a ``Runtime`` on an SQLite file, an instant model
that asks for three ``read_file`` calls per step, the real built-in tools, for N steps.

Prints ms per step at steps 1–10, 490–500 and 990–1,000 (the last window at N), the ratio
late/early, CPU time per step (all threads, and the event loop's thread alone), store round
trips (hops to the database thread) and SQL statements per step (traced in those windows
only: tracing costs SQLite ~3% of a step's instructions, which is the benchmark's, not the
engine's), database bytes per step against the raw bytes of the messages it holds, and the
machine load.
With ``langgraph`` and ``langgraph-checkpoint-sqlite`` installed (``pip install -e '.[bench]'``)
it runs the same conversation through LangGraph's ``AsyncSqliteSaver`` side by side (fewer steps
by default: its database grows with the square of the steps).

    .venv/bin/python bench/engine_bench.py [--steps 1000] [--langgraph-steps 200] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import json
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from runtime.config import Config, Defaults
from runtime.models import RunState, Usage
from runtime.providers.base import (
    ModelEvent,
    ModelRequest,
    StopReason,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageReport,
)
from runtime.runtime import Runtime
from runtime.store.sqlite import SqliteStore
from runtime.tools.builtin import builtin_tools

TEXT = "I will read the three files that matter and then summarise them."
FILES = [f"src/module_{i}.py" for i in range(3)]
FILE_TEXT = ("def handler(event):\n    return {'status': 'ok', 'event': event}\n" * 16)[:1000]


def _workspace(root: Path) -> Path:
    (root / "src").mkdir(parents=True)
    for name in FILES:
        (root / name).write_text(FILE_TEXT)
    return root


def _windows(steps: int) -> list[tuple[int, int]]:
    """(first, last) step numbers, 1-based and inclusive."""
    wanted = [(1, 10), (steps // 2 - 10, steps // 2), (steps - 10, steps)]
    return [(a, b) for a, b in wanted if a >= 1 and b <= steps and b > a]


class InstantModel:
    """Answers at once: a sentence and three read_file calls per step, then a final answer.
    Records when each call started (a step runs from one call to the next)."""

    def __init__(
        self,
        steps: int,
        count: Callable[[], tuple[int, int, int]],
        trace: Callable[[bool], None] = lambda on: None,
    ) -> None:
        self.steps = steps
        self.calls = 0
        self._traced = {step for first, last in _windows(steps) for step in range(first, last + 1)}
        """The steps whose SQL statements are counted (the windows reported)."""
        self._trace = trace
        self.stamps: list[float] = []
        self.cpu: list[float] = []
        self.loop_cpu: list[float] = []
        self.counts: list[tuple[int, int, int]] = []
        self._count = count
        self.wal: Path | None = None
        self.largest_wal = 0
        """The WAL file's largest size seen at a step's start (the database while it runs)."""

    @property
    def reference(self) -> str:
        return "bench:instant"

    @property
    def context_window(self) -> int:
        return 1_000_000

    def cost_usd(self, usage: Usage) -> float:
        return 0.0

    async def aclose(self) -> None:
        return None

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.stamps.append(time.perf_counter())
        self.cpu.append(time.process_time())
        self.loop_cpu.append(time.thread_time())
        self.counts.append(self._count())
        self.calls += 1
        self._trace(self.calls in self._traced)
        if self.wal is not None and self.wal.exists():
            self.largest_wal = max(self.largest_wal, self.wal.stat().st_size)
        if self.calls > self.steps:
            yield TextDelta(text="Done: the three modules all return the event unchanged.")
            yield UsageReport(usage=Usage(input_tokens=1200, output_tokens=40))
            yield StopReason(reason="end_turn")
            return
        yield TextDelta(text=TEXT)
        for index, name in enumerate(FILES):
            yield ToolCallStart(index=index, id=f"toolu_{self.calls}_{index}", name="read_file")
            yield ToolCallDelta(index=index, json_fragment=json.dumps({"path": name}))
            yield ToolCallEnd(index=index)
        yield UsageReport(usage=Usage(input_tokens=1200, output_tokens=80))
        yield StopReason(reason="tool_use")


class Counted:
    """Counts the real store's round trips (each read and each write transaction, whether it
    runs on the caller's thread or hops to the store's thread) and the SQL statements it runs."""

    def __init__(self, store: SqliteStore) -> None:
        self.hops = 0
        self.execution_hops = 0
        """Round trips made by the executions themselves (not by ``wait`` or the pump's poll)."""
        self.statements = 0
        self._tracing = False
        self._conn: Any = None
        inside = contextvars.ContextVar("inside", default=False)

        def counting(original: Any) -> Any:
            async def counted(fn: Any) -> Any:
                if inside.get():  # _read or _write falling back to the store's thread
                    return await original(fn)
                self.hops += 1
                task = asyncio.current_task()
                if task is not None and task.get_name().startswith("run-"):
                    self.execution_hops += 1
                token = inside.set(True)
                try:
                    return await original(fn)
                finally:
                    inside.reset(token)

            return counted

        self._original = store._call
        for name in ("_call", "_read", "_write"):
            setattr(store, name, counting(getattr(store, name)))

    async def trace(self) -> None:
        self._conn = await self._original(lambda conn: conn)
        self.hops = self.execution_hops = 0

    def statements_counted(self, on: bool) -> None:
        """Count the statements from now on, or stop. Only the steps of the windows reported
        are counted: SQLite expands every traced statement with its values, about 3% of a
        step's instructions (callgrind), which is the benchmark's cost, not the engine's."""
        if on != self._tracing:
            self._tracing = on
            self._conn.set_trace_callback(self._on_statement if on else None)

    def _on_statement(self, _sql: str) -> None:
        self.statements += 1

    def now(self) -> tuple[int, int, int]:
        return self.hops, self.statements, self.execution_hops


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.iterdir() if p.name.startswith(path.name))


def _message_bytes(messages: list[Any]) -> int:
    total = 0
    for message in messages:
        total += len(json.dumps([b.model_dump(mode="json") for b in message.content]))
    return total


async def engine(steps: int, tmp: Path) -> dict[str, Any]:
    workspace = _workspace(tmp / "project")
    db = tmp / "engine.db"
    store = SqliteStore(db)
    counter = Counted(store)
    model = InstantModel(steps, counter.now, counter.statements_counted)
    model.wal = db.with_name(db.name + "-wal")
    config = Config(defaults=Defaults(max_steps=steps + 5, job_step_budget=steps + 5))
    runtime = await Runtime.open(
        db_path=db,
        workspace=workspace,
        config=config,
        model="bench:instant",
        providers=lambda reference: model,
        tools=builtin_tools(),
        store=store,
    )
    await counter.trace()
    started = time.perf_counter()
    run = await runtime.start("Read the three modules and summarise them.")
    boundary = await runtime.wait(run.id, timeout=3600)
    elapsed = time.perf_counter() - started
    if boundary.state is not RunState.COMPLETED:
        raise SystemExit(f"the benchmark run ended {boundary.state.value}: {boundary.run.failure}")
    messages = await runtime.all_messages(run.id)
    await runtime.close()
    return {
        "elapsed": elapsed,
        "stamps": model.stamps,
        "cpu": model.cpu,
        "loop_cpu": model.loop_cpu,
        "counts": model.counts,
        "size": _size(db),
        "largest_wal": model.largest_wal,
        "raw": _message_bytes(messages),
        "messages": len(messages),
    }


async def langgraph(steps: int, tmp: Path) -> dict[str, Any] | None:
    try:
        from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
        from langgraph.graph import END, START, MessagesState, StateGraph
    except ImportError as exc:
        print(f"LangGraph: skipped ({exc.name} is not installed: pip install -e '.[bench]')")
        return None
    workspace = tmp / "lg-project"
    _workspace(workspace)
    stamps: list[float] = []
    cpu: list[float] = []

    def agent(state: Any) -> dict[str, Any]:
        stamps.append(time.perf_counter())
        cpu.append(time.process_time())
        if len(stamps) > steps:
            return {"messages": [AIMessage(content="Done: the three modules are the same.")]}
        calls = [
            {"name": "read_file", "args": {"path": name}, "id": f"toolu_{len(stamps)}_{i}"}
            for i, name in enumerate(FILES)
        ]
        return {"messages": [AIMessage(content=TEXT, tool_calls=calls)]}

    async def tools(state: Any) -> dict[str, Any]:
        last = state["messages"][-1]
        results = []
        for call in getattr(last, "tool_calls", []):
            text = await asyncio.to_thread((workspace / call["args"]["path"]).read_text)
            results.append(ToolMessage(content=text, tool_call_id=call["id"]))
        return {"messages": results}

    def route(state: Any) -> str:
        return "tools" if getattr(state["messages"][-1], "tool_calls", None) else END

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", tools)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route, ["tools", END])
    graph.add_edge("tools", "agent")
    db = tmp / "langgraph.db"
    started = time.perf_counter()
    async with AsyncSqliteSaver.from_conn_string(str(db)) as saver:
        app = graph.compile(checkpointer=saver)
        await app.ainvoke(
            {"messages": [HumanMessage(content="Read the three modules and summarise them.")]},
            {"configurable": {"thread_id": "bench"}, "recursion_limit": 2 * steps + 10},
            durability="sync",  # each step on disk before the next, as the engine commits
        )
    elapsed = time.perf_counter() - started
    return {"elapsed": elapsed, "stamps": stamps, "cpu": cpu, "size": _size(db)}


def _per_step(stamps: list[float], first: int, last: int) -> float:
    """Mean ms per step over steps first..last (step k runs from call k to call k+1)."""
    return (stamps[last] - stamps[first - 1]) / (last - first + 1) * 1000


def report(result: dict[str, Any], steps: int, label: str) -> None:
    stamps, counts, cpu = result["stamps"], result.get("counts"), result.get("cpu")
    rate = steps / result["elapsed"]
    print(f"{label}: {steps} steps in {result['elapsed']:.2f} s ({rate:.0f} steps/s)")
    windows = _windows(steps)
    early = _per_step(stamps, *windows[0])
    for first, last in windows:
        ms = _per_step(stamps, first, last)
        line = f"  steps {first:>4}–{last:<4} {ms:7.2f} ms/step  ({ms / early:4.2f}× steps 1–10)"
        if cpu is not None:
            line += f"  {_per_step(cpu, first, last):6.2f} ms CPU/step"
        if "loop_cpu" in result:
            line += f" ({_per_step(result['loop_cpu'], first, last):5.2f} on the event loop)"
        if counts is not None:
            span = last - first + 1
            hops = (counts[last][0] - counts[first - 1][0]) / span
            statements = (counts[last][1] - counts[first - 1][1]) / span
            own = (counts[last][2] - counts[first - 1][2]) / span
            line += (
                f"  {hops:4.1f} store round trips/step ({own:3.1f} by the execution)"
                f"  {statements:5.1f} SQL statements/step"
            )
        print(line)
    late = _per_step(stamps, *windows[-1])
    line = f"  late/early ratio: {late / early:.2f} (budget ≤ 1.20)"
    if cpu is not None:
        cpu_ratio = _per_step(cpu, *windows[-1]) / _per_step(cpu, *windows[0])
        line += f"; CPU time late/early: {cpu_ratio:.2f}"
    print(line)
    per_step = result["size"] / steps
    line = f"  database: {result['size'] / 1e6:.2f} MB, {per_step / 1024:.1f} KB per step"
    if "raw" in result:
        line += (
            f" against {result['raw'] / steps / 1024:.1f} KB of message content per step"
            f" ({result['size'] / result['raw']:.2f}× the raw bytes of {result['messages']}"
            " messages)"
        )
    print(line)
    if "largest_wal" in result:
        print(
            f"  its WAL file at its largest while the steps ran: {result['largest_wal'] / 1e6:.2f}"
            " MB (the database's size above is after closing, the WAL copied back)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--langgraph-steps", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="200 engine steps, 100 LangGraph")
    args = parser.parse_args()
    steps, lg_steps = args.steps, args.langgraph_steps
    if args.quick:
        steps, lg_steps = 200, min(lg_steps, 100)
    if steps < 20:
        raise SystemExit("--steps must be at least 20")
    print(f"machine load (1, 5, 15 min): {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as tmp:
        result = asyncio.run(engine(steps, Path(tmp)))
    report(result, steps, "agent-tui engine")
    overhead = result["elapsed"] / steps * 1000
    print(f"  end to end: {overhead:.2f} ms per step (budget ≤ 2 ms, ≥ 500 steps/s)")
    if lg_steps >= 20:
        with tempfile.TemporaryDirectory() as tmp:
            lg = asyncio.run(langgraph(lg_steps, Path(tmp)))
        if lg is not None:
            report(lg, lg_steps, "LangGraph + AsyncSqliteSaver, same conversation")
            ours = [_per_step(result["stamps"], a, b) for a, b in _windows(lg_steps)]
            theirs = [_per_step(lg["stamps"], a, b) for a, b in _windows(lg_steps)]
            pairs = ", ".join(
                f"steps {a}–{b}: {t / o:.1f}×"
                for (a, b), o, t in zip(_windows(lg_steps), ours, theirs, strict=True)
            )
            print(f"  LangGraph time per step against the engine's: {pairs}")
    print(f"machine load after (1, 5, 15 min): {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
