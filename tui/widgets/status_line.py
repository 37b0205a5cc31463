"""The status line: model, run state, step, tokens, cost and context fill.

The figures come first and the hints after them. Where the whole line does not fit, parts give
way in a fixed order — a hint to a shorter wording, then away whole, then the least needed
figures — so nothing is cut mid-word at the edge (at 80 columns "esc to interrupt" read "esc to
int"). While the run works: a spinner, the tool running, the time it has run, the key that stops
it, and the tokens counted live as text streams — estimated (``~``, about four characters a
token) until the provider's usage arrives with the committed message."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Unpack

from textual.timer import Timer
from textual.visual import VisualType
from textual.widgets import Static

from runtime.interrupted import before_its_first_checkpoint, needs_resume
from runtime.kinds import RunState, ToolCallState
from runtime.results import CHARS_PER_TOKEN  # the estimate the runtime records too
from runtime.steps import step_shown
from runtime.textsafe import terminal_safe_line
from tui.widgets._format import context_fill, cost, state_text, tokens
from tui.widgets._options import WidgetOptions

if TYPE_CHECKING:
    from collections.abc import Callable

    from runtime.models import Run

SEPARATOR = " │ "
DEMO_HINTS = (
    "demo model — set ANTHROPIC_API_KEY for Claude",
    "demo — set ANTHROPIC_API_KEY for Claude",
    "demo model",
)
"""The notice for the demo model, longest first: the longest that fits is shown (only while the
model the line is about is the demo model)."""
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
SPIN_INTERVAL = 0.1
SANDBOX_HINT = "shell not sandboxed: every shell call asks"
"""Shown while ``sandbox_notice`` is set: bubblewrap is missing or cannot start here."""
ATTACHED_HINT = "attached: new jobs go to workers"
"""Shown in attach mode (``agent-tui --attach``)."""
STOP_HINT = "esc to interrupt"
"""Where Esc stops the run on screen (the screen's binding). It has no shorter wording (the
README's keys say this one): where the line is short, the figures give way before it."""
CANCEL_QUESTION_HINTS = ("y cancels · esc keeps it running", "y cancels · esc: no")
"""While "Cancel the run?" has the keys: there Esc answers no (the run goes on), y stops it."""
QUESTION_HINT = "esc answers no"
"""While another yes/no question has the keys (fork this step?): Esc answers it."""
ELSEWHERE = "worked by another process"


@dataclass(frozen=True)
class _Part:
    """One part of the line: its wordings, longest first, and for each shorter one (or for
    going away, ``""``) the order in which it gives way when the line does not fit (lowest
    first)."""

    text: str
    shorter: tuple[tuple[str, int], ...] = ()


def fit(parts: list[_Part], room: int) -> str:
    """``parts`` joined by the separator, each part as long as ``room`` allows: the step that
    gives way first is taken until the line fits (or nothing can give way: the edge cuts)."""
    shown = [part.text for part in parts]
    taken = [0] * len(parts)

    def width() -> int:
        present = [text for text in shown if text]
        return sum(map(len, present)) + len(SEPARATOR) * (len(present) - 1)

    while width() > room:
        steps = [
            (part.shorter[taken[index]][1], index)
            for index, part in enumerate(parts)
            if taken[index] < len(part.shorter)
        ]
        if not steps:
            break
        _, index = min(steps)
        shown[index] = parts[index].shorter[taken[index]][0]
        taken[index] += 1
    return SEPARATOR.join(text for text in shown if text)


def format_elapsed(seconds: float) -> str:
    """``7s``, ``1m 05s``, ``1h 02m``."""
    seconds = int(max(0.0, seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60:02d}s"
    return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"


class StatusLine(Static):
    DEFAULT_CSS = """
    StatusLine { height: 1; background: $panel; color: $text; padding: 0 1; text-wrap: nowrap; }
    StatusLine.-waiting { background: $warning 30%; }
    StatusLine.-error { background: $error 30%; }
    StatusLine.-running { background: $primary 30%; }
    """

    def __init__(self, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__("", markup=False, **kwargs)
        self.model = ""
        self.model_notice: str | None = None
        self.sandbox_notice: str | None = None
        """Why shell commands run unconfined here (None: they are sandboxed)."""
        self.attached = False
        self.elsewhere = False
        """The run shown is executed by another process: Esc does not stop it here."""
        self.stop_hint: tuple[str, ...] = (STOP_HINT,)
        """What stops the run shown from where the focus is, and what Esc does there (the
        screen says), longest wording first: ``STOP_HINT`` where Esc interrupts it, else the
        keys to its cancel (``c cancels``, ``esc, then c cancels``), or a question's keys."""
        self.gone_past = False
        """Later runs of its job went on past the run shown: it is not retried, only forked."""
        self.run: Run | None = None
        self.context_window: int | None = None
        self.context_floor = 0
        """The context of the job's earlier runs: shown for a run whose model call has not
        reported its own yet (a follow-up read "ctx 0%" over a long conversation)."""
        self.next_run: dict[str, str] = {}
        """``/model`` or ``/agent`` chosen for the next run (shown until it starts)."""
        self.streamed_chars = 0
        """Characters streamed since the run's usage was last counted by the provider."""
        self.now: float | None = None
        """The clock for the elapsed time (None: the wall clock)."""
        self._running_since: dict[str, float] = {}
        """When each run was last seen to start running (its events say when)."""
        self._open_tools: dict[str, tuple[str, ToolCallState]] = {}
        """The tool calls of the run shown that are pending or running: id → (tool name,
        state). Those running are named; any open one means the step in progress is theirs."""
        self._frame = 0
        self._spinner: Timer | None = None
        self._shown: str | None = ""
        """The text on the line (None: something else was shown)."""
        self.count_shown: Callable[[Run, int], None] | None = None
        """Told the run and its streamed count each time the line draws a new count: the
        browser's detail shows the same estimate, drawn in the same frame."""
        self._count_told: tuple[str, int] | None = None

    def show(
        self,
        *,
        model: str | None = None,
        notice: str | None = None,
        run: Run | None = None,
        context_window: int | None = None,
        context_floor: int = 0,
    ) -> None:
        """Show the default model (and its notice), or a run with its model's context window
        (None when it is not known: the fill shows as "ctx —") and ``context_floor``, the
        context its job reached before it (shown until the run's own figure comes)."""
        if model is not None:
            self.model = model
        if notice is not None:
            self.model_notice = notice
        previous = self.run
        if (
            run is None
            or run.state is not RunState.RUNNING
            or previous is None
            or previous.id != run.id
            or previous.usage.total_tokens != run.usage.total_tokens
        ):
            # The provider's figure replaces the estimate; a run that is not running streams
            # nothing, so what it counts is all there is (the run may have been read after
            # its usage was committed, and deltas queued before that counted after it).
            self.streamed_chars = 0
        if run is None or previous is None or previous.id != run.id:
            self._open_tools.clear()
        self.run = run
        self.context_window = context_window
        self.context_floor = context_floor
        self.set_class(run is not None and run.state is RunState.INPUT_REQUIRED, "-waiting")
        self.set_class(
            run is not None and (run.state is RunState.FAILED or needs_resume(run)), "-error"
        )
        working = run is not None and run.state is RunState.RUNNING and not needs_resume(run)
        self.set_class(working, "-running")
        if working and self._spinner is None:
            self._spinner = self.set_interval(SPIN_INTERVAL, self._spin)
        elif not working and self._spinner is not None:
            self._spinner.stop()
            self._spinner = None
        self.redraw()

    def started_running(self, run_id: str, at: float) -> None:
        """The run started (or went back to) running at ``at``: its elapsed time counts from
        there, not from its creation (a run retried a day after a crash read "running 24h").
        Seen as it happened or read from the store when the run was opened, whichever came
        first: the later start counts."""
        self._running_since[run_id] = max(at, self._running_since.get(run_id, at))
        if self.run is not None and self.run.id == run_id:
            self.redraw()

    def tool_state(self, run_id: str, tool_call_id: str, name: str, state: ToolCallState) -> None:
        """A tool call of ``run_id`` changed state: while one of the run shown runs, the line
        names it (a run that only said "running 2s" for a minute looked stuck)."""
        if self.run is None or self.run.id != run_id:
            return
        if not state.is_terminal:
            self._open_tools[tool_call_id] = (name, state)
        elif self._open_tools.pop(tool_call_id, None) is None:
            return
        self.redraw()

    def _step_shown(self, run: Run) -> int:
        return step_shown(run, working=self.working, calls_open=bool(self._open_tools))

    def show_open_tools(self, open_tools: dict[str, tuple[str, ToolCallState]]) -> None:
        """The tool calls of the run shown that are pending or running (id → (name, state)),
        as read with it."""
        self._open_tools = dict(open_tools)
        self.redraw()

    def working_since(self, run: Run) -> float:
        """Where the elapsed time of ``run`` counts from: its latest start into running, seen
        here or read from the store when it was opened (``started_running``); its creation
        only when neither is known yet."""
        return self._running_since.get(run.id, run.created_at)

    def streamed(self, run_id: str, chars: int) -> Run | None:
        """Text (or thinking) of the run on screen arrived: count it until usage comes. The
        run counted for (None: not the run shown, or it does not run)."""
        run = self.run
        if run is not None and run.id == run_id and run.state is RunState.RUNNING:
            self.streamed_chars += chars
            if self._spinner is None:
                self.redraw()
            # Else the spinner's next turn (within ``SPIN_INTERVAL``) draws it: a redraw at
            # each delta put this row, the screen's width, in every frame of a stream, and a
            # frame draws every widget in the rectangle around all that changed: with the
            # answer's rows that was the whole screen, the browser and the composer too.
            return run
        return None

    @property
    def working(self) -> bool:
        return self._spinner is not None

    def _spin(self) -> None:
        self._frame = (self._frame + 1) % len(SPINNER)
        self.redraw()

    def on_resize(self) -> None:
        self.redraw()

    def redraw(self) -> None:
        """Show ``text`` if it changed (and tell ``count_shown`` a new streamed count)."""
        text = self.text
        if text != self._shown:
            self.update(text)
        run = self.run
        if run is not None and self.count_shown is not None:
            counted = (run.id, self.streamed_chars)
            if counted != self._count_told:
                self._count_told = counted
                self.count_shown(run, self.streamed_chars)

    def update(self, content: VisualType = "", *, layout: bool = False) -> None:
        """Only this line is repainted: its size never depends on what it says (one row, the
        screen's width), so no layout of the screen is asked for by default. With Static's
        default, every streamed delta of the run on screen laid the whole screen out again,
        once per frame while it streamed."""
        self._shown = content if isinstance(content, str) else None
        super().update(content, layout=layout)

    @property
    def demo_shown(self) -> bool:
        """Whether the model the line is about is the demo model: the run's, else the default,
        and the one chosen for the next run if any (the demo notice is about no other)."""
        model = self.run.model if self.run is not None else self.model
        return all(
            chosen.startswith("demo") for chosen in (model, self.next_run.get("model", model))
        )

    def _stop_part(self) -> _Part:
        """The keys that stop the run, as they work where the focus is: the Esc hint was read while
        a sub-run's question had the keys, where Esc leaves the prompt (a new-user trial)."""
        hint, *shorter = self.stop_hint
        steps = tuple((wording, 3) for wording in shorter)
        if self.elsewhere and hint != STOP_HINT:
            return _Part(f"{ELSEWHERE} · {hint}", ((hint, 3), *steps, ("", 10)))
        return _Part(hint, (*steps, ("", 10)))

    @property
    def text(self) -> str:
        run = self.run
        parts = [_Part(run.model if run else self.model)]
        if self.next_run:
            parts.append(
                _Part(
                    "next run: " + ", ".join(f"{k} {v}" for k, v in sorted(self.next_run.items())),
                    (("", 8),),
                )
            )
        if run is not None:
            state = state_text(run)
            if needs_resume(run):
                if self.gone_past:
                    state += " (f fork)"
                elif before_its_first_checkpoint(run):
                    state += " (R retry)"  # no checkpoint to fork from: f would say so
                else:
                    state += " (R retry · f fork)"
            state_part = _Part(state)
            if self.working:
                now = self.now if self.now is not None else time.time()
                elapsed = format_elapsed(now - self.working_since(run))
                spun = f"{SPINNER[self._frame]} {state}"
                tools = [
                    name
                    for name, state in self._open_tools.values()
                    if state is ToolCallState.RUNNING
                ]
                if tools:
                    named = terminal_safe_line(tools[0])  # an MCP server names its tools
                    named += f" +{len(tools) - 1}" if len(tools) > 1 else ""
                    state_part = _Part(f"{spun} {named} {elapsed}", ((f"{spun} {elapsed}", 7),))
                else:
                    state_part = _Part(f"{spun} {elapsed}")
            count = tokens(run.usage.total_tokens + self.streamed_chars // CHARS_PER_TOKEN)
            parts += [
                state_part,
                # While it works, the step in progress, as every window and `agent-tui show`
                # number it (runtime.steps): its model call is step 1, and so are its tools.
                _Part(f"step {self._step_shown(run)}/{run.max_steps}", (("", 9),)),
                _Part(f"~{count} tok" if self.streamed_chars else f"{count} tok", (("", 6),)),
                _Part(cost(run.cost_usd), (("", 4),)),
                _Part(
                    context_fill(run.context_tokens or self.context_floor, self.context_window),
                    (("", 5),),
                ),
            ]
            if self.working:
                parts.append(self._stop_part())
        if self.sandbox_notice:
            parts.append(_Part(SANDBOX_HINT, (("not sandboxed", 2), ("", 6))))
        if self.attached:
            parts.append(_Part(ATTACHED_HINT, (("attached", 2), ("", 6))))
        if self.model_notice and self.demo_shown:
            long_hint, *shorter_hints = DEMO_HINTS
            parts.append(_Part(long_hint, (*((hint, 0) for hint in shorter_hints), ("", 1))))
        # The width inside its padding; not laid out yet, it has none to fit.
        room = self.size.width or None
        return fit(parts, room) if room is not None else SEPARATOR.join(p.text for p in parts)
