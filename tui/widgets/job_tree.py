"""The browser: jobs → runs (a delegation's sub-runs under their parent) → checkpoints, as a
tree paged lazily.

Each row is laid out for the width it has: the state icon, the title (ellipsised), then a
right-aligned block of agent, age, tokens and cost. When the pane is narrow the age goes first,
then the agent, then the tokens: the cost is never cut."""

from __future__ import annotations

from dataclasses import dataclass

from rich.style import Style
from rich.text import Text
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from runtime.models import Checkpoint, Job, Run
from runtime.textsafe import terminal_safe_line
from tui.widgets._format import STATE_ICONS, age, cost, run_icon, short, tokens

AGENT_WIDTH = 11
TITLE_MIN = 12
"""A title keeps at least this many cells (or its whole length) before figures are dropped."""
INTERRUPTED_ICON = "⚠"


@dataclass
class JobEntry:
    job: Job
    interrupted: bool = False
    """A run of the job was interrupted by a crash and waits to be retried or forked."""


@dataclass
class RunEntry:
    run: Run


@dataclass
class CheckpointEntry:
    checkpoint: Checkpoint


@dataclass
class MoreEntry:
    cursor: str


NodeData = JobEntry | RunEntry | CheckpointEntry | MoreEntry


def interrupted_runs(runs: list[Run]) -> list[Run]:
    """The runs of a job that a crash interrupted and nobody has retried yet."""
    from tui.widgets._format import needs_resume

    retried = {run.retry_of_run_id for run in runs if run.retry_of_run_id}
    return [run for run in runs if needs_resume(run) and run.id not in retried]


class JobTree(Tree[NodeData]):
    """Attributes down: the screen feeds pages of jobs, runs and checkpoints into it."""

    DEFAULT_CSS = """
    JobTree { background: $surface; scrollbar-size-vertical: 1; }
    JobTree > .tree--guides { color: $panel-lighten-2; }
    """

    def __init__(self, *, hide_ages: bool = False, **kwargs: object) -> None:
        super().__init__("jobs", **kwargs)  # type: ignore[arg-type]
        self.show_root = False
        self.guide_depth = 2
        self.hide_ages = hide_ages
        self._jobs: dict[str, TreeNode[NodeData]] = {}
        self._runs: dict[str, TreeNode[NodeData]] = {}
        self._job_runs: dict[str, dict[str, Run]] = {}
        self._more: TreeNode[NodeData] | None = None
        self.loaded_runs: set[str] = set()
        """Jobs whose runs have been loaded."""

    # --- rows ----------------------------------------------------------------------------------
    def _row(self, data: NodeData | None) -> tuple[str, str, list[str], str]:
        """(icon, title, meta in reading order — agent, age, tokens —, cost)."""
        if isinstance(data, JobEntry):
            job = data.job
            icon = INTERRUPTED_ICON if data.interrupted else STATE_ICONS[job.latest_run_state]
            return icon, job.title, self._meta(job.agent, job.updated_at, job), cost(job.cost_usd)
        if isinstance(data, RunEntry):
            run = data.run
            kind = "sub-run" if run.parent_run_id else ("retry" if run.retry_of_run_id else "run")
            meta = self._meta(run.agent, run.updated_at, run)
            return run_icon(run), run.input or kind, meta, cost(run.cost_usd)
        if isinstance(data, CheckpointEntry):
            checkpoint = data.checkpoint
            meta = [f"msg {checkpoint.last_position}", tokens(checkpoint.usage.total_tokens)]
            return "◆", f"step {checkpoint.step}", meta, ""
        return "", "… more", [], ""

    def _meta(self, agent: str, updated_at: float, item: Job | Run) -> list[str]:
        meta = [short(agent, AGENT_WIDTH).ljust(AGENT_WIDTH)]
        if not self.hide_ages:
            meta.append(age(updated_at).rjust(3))
        meta.append(tokens(item.usage.total_tokens).rjust(5))
        return meta

    def _room(self, node: TreeNode[NodeData]) -> int:
        """Cells left for a node's label after its guides and expander."""
        depth = 0  # ancestors drawn as guides (the hidden root is not)
        ancestor = node.parent
        while ancestor is not None and ancestor is not self.root:
            depth += 1
            ancestor = ancestor.parent
        guides = depth * self.guide_depth
        expander = 2 if node.allow_expand else 0
        width = self.scrollable_content_region.width or self.size.width or 60
        return max(12, width - guides - expander - 1)

    def render_label(self, node: TreeNode[NodeData], base_style: Style, style: Style) -> Text:
        label = self._label(node)
        label.stylize(style)
        if node.allow_expand:
            prefix = self.ICON_NODE_EXPANDED if node.is_expanded else self.ICON_NODE
            return Text.assemble((prefix, base_style + Style(bold=True)), label)
        return label

    def _label(self, node: TreeNode[NodeData]) -> Text:
        room = self._room(node)
        icon, title, meta, money = self._row(node.data)
        title = terminal_safe_line(title)  # a job title comes from a prompt
        if isinstance(node.data, MoreEntry):
            return Text("… more", style="dim")
        right = self._figures(room - 2 - min(len(title), TITLE_MIN) - 1, meta, money)
        title_room = max(1, room - 2 - (len(right) + 1 if right else 0))
        label = Text()
        label.append(icon + " ", style="bold")
        label.append(short(title, title_room).ljust(title_room))
        if right:
            label.append(" " + right, style="dim")
        return label

    @staticmethod
    def _figures(room: int, meta: list[str], money: str) -> str:
        """The right-hand figures that fit in ``room``: the cost always; then the tokens, the
        agent (padded to a column, or shortened to no less than 6 cells) and the age."""
        padded, *rest = meta if meta else [""]
        agent = padded.rstrip()
        tokens_text = rest[-1] if rest else ""
        age_text = rest[0] if len(rest) == 2 else ""
        parts = {"cost": money, "tokens": "", "agent": "", "age": ""}

        def width() -> int:
            return len(" ".join(p for p in parts.values() if p))

        for name, text in (("tokens", tokens_text), ("agent", agent), ("age", age_text)):
            if not text:
                continue
            parts[name] = text
            if width() <= room:
                continue
            if name == "agent":
                for cut in range(len(agent) - 1, 5, -1):
                    parts[name] = short(agent, cut)
                    if width() <= room:
                        break
                if width() <= room:
                    continue
            parts[name] = ""
        if parts["agent"] == agent and width() + len(padded) - len(agent) <= room:
            parts["agent"] = padded  # a column, so the figures line up row under row
        order = ("agent", "age", "tokens", "cost")
        return " ".join(parts[name] for name in order if parts[name]).strip()

    def get_label_width(self, node: TreeNode[NodeData]) -> int:
        return self._room(node) + (2 if node.allow_expand else 0)

    def row_text(self, node: TreeNode[NodeData]) -> str:
        """A row's label as a person reads it, without the tree's guides and expander."""
        return self._label(node).plain

    # --- feeding -------------------------------------------------------------------------------
    def _redraw_node(self, node: TreeNode[NodeData]) -> None:
        node.set_label(node.label)  # bumps the node's version: its line is drawn again

    def add_jobs(self, jobs: list[Job], next_cursor: str | None) -> None:
        if self._more is not None:
            self._more.remove()
            self._more = None
        for job in jobs:
            if job.id in self._jobs:
                continue
            node = self.root.add(job.title, JobEntry(job))
            self._jobs[job.id] = node
        if next_cursor is not None:
            self._more = self.root.add_leaf("… more", MoreEntry(next_cursor))

    def clear_jobs(self) -> None:
        self.clear()
        self._jobs.clear()
        self._runs.clear()
        self._job_runs.clear()
        self._more = None
        self.loaded_runs.clear()

    def upsert_job(self, job: Job) -> TreeNode[NodeData]:
        node = self._jobs.get(job.id)
        if node is None:
            first = self.root.children[0] if self.root.children else None
            if first is not None:
                node = self.root.add(job.title, JobEntry(job), before=first)
            else:
                node = self.root.add(job.title, JobEntry(job))
            self._jobs[job.id] = node
            self._mark_interrupted(job.id)
        else:
            interrupted = isinstance(node.data, JobEntry) and node.data.interrupted
            node.data = JobEntry(job, interrupted=interrupted)
            self._redraw_node(node)
        return node

    def _mark_interrupted(self, job_id: str) -> None:
        node = self._jobs.get(job_id)
        if node is None or not isinstance(node.data, JobEntry):
            return
        interrupted = bool(interrupted_runs(list(self._job_runs.get(job_id, {}).values())))
        if node.data.interrupted != interrupted:
            node.data = JobEntry(node.data.job, interrupted=interrupted)
            self._redraw_node(node)

    def set_runs(self, job_id: str, runs: list[Run]) -> None:
        self._job_runs[job_id] = {run.id: run for run in runs}
        job_node = self._jobs.get(job_id)
        if job_node is None:
            return
        job_node.remove_children()
        self.loaded_runs.add(job_id)
        by_id = {run.id: run for run in runs}
        for run in runs:
            self._runs.pop(run.id, None)
        for run in sorted(runs, key=lambda r: r.created_at):
            self._add_run_node(run, by_id)
        self._mark_interrupted(job_id)

    def _add_run_node(self, run: Run, by_id: dict[str, Run]) -> TreeNode[NodeData] | None:
        if run.id in self._runs:
            return self._runs[run.id]
        parent: TreeNode[NodeData] | None
        if run.parent_run_id and run.parent_run_id in by_id:
            parent = self._add_run_node(by_id[run.parent_run_id], by_id)
        else:
            parent = self._jobs.get(run.job_id)
        if parent is None:
            return None
        node = parent.add(run.input or "run", RunEntry(run), expand=True)
        self._runs[run.id] = node
        return node

    def upsert_run(self, run: Run) -> None:
        self._job_runs.setdefault(run.job_id, {})[run.id] = run
        node = self._runs.get(run.id)
        if node is not None:
            node.data = RunEntry(run)
            self._redraw_node(node)
        elif run.job_id in self.loaded_runs:
            parent = self._runs.get(run.parent_run_id or "") or self._jobs.get(run.job_id)
            if parent is not None:
                self._runs[run.id] = parent.add(run.input or "run", RunEntry(run), expand=True)
        self._mark_interrupted(run.job_id)

    def set_checkpoints(self, run_id: str, checkpoints: list[Checkpoint]) -> None:
        node = self._runs.get(run_id)
        if node is None:
            return
        for child in list(node.children):
            if isinstance(child.data, CheckpointEntry):
                child.remove()
        for checkpoint in checkpoints:
            node.add_leaf(f"step {checkpoint.step}", CheckpointEntry(checkpoint))

    def job_node(self, job_id: str) -> TreeNode[NodeData] | None:
        return self._jobs.get(job_id)

    def run_node(self, run_id: str) -> TreeNode[NodeData] | None:
        return self._runs.get(run_id)

    def select_run(self, run_id: str) -> None:
        node = self._runs.get(run_id)
        if node is not None:
            ancestor = node.parent
            while ancestor is not None:
                ancestor.expand()
                ancestor = ancestor.parent
            self.move_cursor(node)

    @property
    def job_ids(self) -> list[str]:
        return list(self._jobs)
