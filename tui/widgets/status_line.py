"""The status line: model, run state, step, tokens, cost and context fill.

The figures come first and the demo-model notice last, so a narrow terminal clips the notice,
never the figures."""

from __future__ import annotations

from textual.widgets import Static

from runtime.models import Run, RunState
from tui.widgets._format import context_fill, cost, needs_resume, tokens

SEPARATOR = " │ "
DEMO_HINTS = (
    "demo model — set ANTHROPIC_API_KEY for Claude",
    "demo — set ANTHROPIC_API_KEY for Claude",
    "demo model",
)
"""The notice for the demo model, longest first: the longest that fits is shown."""


class StatusLine(Static):
    DEFAULT_CSS = """
    StatusLine { height: 1; background: $panel; color: $text; padding: 0 1; text-wrap: nowrap; }
    StatusLine.-waiting { background: $warning 30%; }
    StatusLine.-error { background: $error 30%; }
    StatusLine.-running { background: $primary 30%; }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__("", markup=False, **kwargs)  # type: ignore[arg-type]
        self.model = ""
        self.model_notice: str | None = None
        self.run: Run | None = None
        self.context_window: int | None = None
        self.next_run: dict[str, str] = {}
        """``/model`` or ``/agent`` chosen for the next run (shown until it starts)."""

    def show(
        self,
        *,
        model: str | None = None,
        notice: str | None = None,
        run: Run | None = None,
        context_window: int | None = None,
    ) -> None:
        """Show the default model (and its notice), or a run with its model's context window
        (None when it is not known: the fill shows as "ctx —")."""
        if model is not None:
            self.model = model
        if notice is not None:
            self.model_notice = notice
        self.run = run
        self.context_window = context_window
        self.set_class(run is not None and run.state is RunState.INPUT_REQUIRED, "-waiting")
        self.set_class(
            run is not None and (run.state is RunState.FAILED or needs_resume(run)), "-error"
        )
        self.set_class(run is not None and run.state is RunState.RUNNING, "-running")
        self.update(self.text)

    def on_resize(self) -> None:
        self.update(self.text)

    @property
    def text(self) -> str:
        run = self.run
        parts = [run.model if run else self.model]
        if self.next_run:
            parts.append(
                "next run: " + ", ".join(f"{k} {v}" for k, v in sorted(self.next_run.items()))
            )
        if run is not None:
            state = run.state.value.replace("_", " ")
            if needs_resume(run):
                state = "interrupted (R retry · f fork)"
            parts += [
                state,
                f"step {run.step}/{run.max_steps}",
                f"{tokens(run.usage.total_tokens)} tok",
                cost(run.cost_usd),
                context_fill(run.context_tokens, self.context_window),
            ]
        figures = SEPARATOR.join(parts)
        if not self.model_notice:
            return figures
        room = self.size.width - 2 if self.size.width else 0
        hint = DEMO_HINTS[0]
        if room:
            fitting = [h for h in DEMO_HINTS if len(figures) + len(SEPARATOR) + len(h) <= room]
            hint = fitting[0] if fitting else DEMO_HINTS[-1]
        return figures + SEPARATOR + hint
