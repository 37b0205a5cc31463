"""The browser: jobs → runs → checkpoints as a tree, paged lazily."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from runtime.models import Checkpoint, Job, Run
from tui.widgets._format import STATE_ICONS, age, cost, run_icon, short, tokens


@dataclass
class JobEntry:
    job: Job


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


class JobTree(Tree[NodeData]):
    """Attributes down: the screen feeds pages of jobs, runs and checkpoints into it."""

    DEFAULT_CSS = """
    JobTree { background: $surface; }
    """

    def __init__(self, *, hide_ages: bool = False, **kwargs: object) -> None:
        super().__init__("jobs", **kwargs)  # type: ignore[arg-type]
        self.show_root = False
        self.guide_depth = 2
        self.hide_ages = hide_ages
        self._jobs: dict[str, TreeNode[NodeData]] = {}
        self._runs: dict[str, TreeNode[NodeData]] = {}
        self._more: TreeNode[NodeData] | None = None
        self.loaded_runs: set[str] = set()
        """Jobs whose runs have been loaded."""

    # --- labels --------------------------------------------------------------------------------
    def _job_label(self, job: Job) -> Text:
        label = Text()
        label.append(STATE_ICONS[job.latest_run_state] + " ", style="bold")
        label.append(short(job.title, 24))
        meta = [job.agent]
        if not self.hide_ages:
            meta.append(age(job.updated_at))
        meta += [tokens(job.usage.total_tokens), cost(job.cost_usd)]
        label.append("  " + " ".join(meta), style="dim")
        return label

    def _run_label(self, run: Run) -> Text:
        label = Text()
        label.append(run_icon(run) + " ", style="bold")
        kind = "sub-run" if run.parent_run_id else ("retry" if run.retry_of_run_id else "run")
        text = run.input or kind
        label.append(short(text, 18))
        meta = [run.agent]
        if not self.hide_ages:
            meta.append(age(run.updated_at))
        meta += [tokens(run.usage.total_tokens), cost(run.cost_usd)]
        label.append("  " + " ".join(meta), style="dim")
        return label

    @staticmethod
    def _checkpoint_label(checkpoint: Checkpoint) -> Text:
        return Text.assemble(
            ("◆ ", "bold"),
            f"step {checkpoint.step}",
            (f"  msg {checkpoint.last_position} {tokens(checkpoint.usage.total_tokens)}", "dim"),
        )

    # --- feeding -------------------------------------------------------------------------------
    def add_jobs(self, jobs: list[Job], next_cursor: str | None) -> None:
        if self._more is not None:
            self._more.remove()
            self._more = None
        for job in jobs:
            if job.id in self._jobs:
                continue
            node = self.root.add(self._job_label(job), JobEntry(job))
            self._jobs[job.id] = node
        if next_cursor is not None:
            self._more = self.root.add_leaf(Text("… more", style="dim"), MoreEntry(next_cursor))

    def clear_jobs(self) -> None:
        self.clear()
        self._jobs.clear()
        self._runs.clear()
        self._more = None
        self.loaded_runs.clear()

    def upsert_job(self, job: Job) -> TreeNode[NodeData]:
        node = self._jobs.get(job.id)
        if node is None:
            first = self.root.children[0] if self.root.children else None
            if first is not None:
                node = self.root.add(self._job_label(job), JobEntry(job), before=first)
            else:
                node = self.root.add(self._job_label(job), JobEntry(job))
            self._jobs[job.id] = node
        else:
            node.data = JobEntry(job)
            node.set_label(self._job_label(job))
        return node

    def set_runs(self, job_id: str, runs: list[Run]) -> None:
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
        node = parent.add(self._run_label(run), RunEntry(run), expand=True)
        self._runs[run.id] = node
        return node

    def upsert_run(self, run: Run) -> None:
        node = self._runs.get(run.id)
        if node is not None:
            node.data = RunEntry(run)
            node.set_label(self._run_label(run))
            return
        if run.job_id in self.loaded_runs:
            parent = self._runs.get(run.parent_run_id or "") or self._jobs.get(run.job_id)
            if parent is not None:
                self._runs[run.id] = parent.add(self._run_label(run), RunEntry(run), expand=True)

    def set_checkpoints(self, run_id: str, checkpoints: list[Checkpoint]) -> None:
        node = self._runs.get(run_id)
        if node is None:
            return
        for child in list(node.children):
            if isinstance(child.data, CheckpointEntry):
                child.remove()
        for checkpoint in checkpoints:
            node.add_leaf(self._checkpoint_label(checkpoint), CheckpointEntry(checkpoint))

    def job_node(self, job_id: str) -> TreeNode[NodeData] | None:
        return self._jobs.get(job_id)

    def run_node(self, run_id: str) -> TreeNode[NodeData] | None:
        return self._runs.get(run_id)

    def select_run(self, run_id: str) -> None:
        node = self._runs.get(run_id)
        if node is not None:
            if node.parent is not None:
                node.parent.expand()
            self.move_cursor(node)

    @property
    def job_ids(self) -> list[str]:
        return list(self._jobs)
