"""The status line: model, run state, step, tokens, cost and context fill."""

from __future__ import annotations

from textual.widgets import Static

from runtime.models import Run, RunState
from tui.widgets._format import CONTEXT_WINDOW, cost, needs_resume, tokens


class StatusLine(Static):
    DEFAULT_CSS = """
    StatusLine { height: 1; background: $panel; color: $text; padding: 0 1; }
    StatusLine.-waiting { background: $warning 30%; }
    StatusLine.-error { background: $error 30%; }
    StatusLine.-running { background: $primary 30%; }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__("", markup=False, **kwargs)  # type: ignore[arg-type]
        self.model = ""
        self.model_notice: str | None = None
        self.run: Run | None = None

    def show(
        self, *, model: str | None = None, notice: str | None = None, run: Run | None = None
    ) -> None:
        if model is not None:
            self.model = model
        if notice is not None:
            self.model_notice = notice
        self.run = run
        self.set_class(run is not None and run.state is RunState.INPUT_REQUIRED, "-waiting")
        self.set_class(
            run is not None and (run.state is RunState.FAILED or needs_resume(run)), "-error"
        )
        self.set_class(run is not None and run.state is RunState.RUNNING, "-running")
        self.update(self.text)

    @property
    def text(self) -> str:
        parts = [self.run.model if self.run else self.model]
        if self.model_notice:
            parts.append("demo model — set ANTHROPIC_API_KEY for Claude")
        run = self.run
        if run is not None:
            state = run.state.value
            if needs_resume(run):
                state += " (interrupted: R retry · f fork)"
            parts += [
                state,
                f"step {run.step}/{run.max_steps}",
                f"{tokens(run.usage.total_tokens)} tok",
                cost(run.cost_usd),
                f"ctx {run.context_tokens * 100 // CONTEXT_WINDOW}%",
            ]
        return "  │  ".join(parts)
