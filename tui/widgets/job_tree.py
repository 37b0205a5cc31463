"""The browser: jobs → runs (a delegation's sub-runs under their parent) → checkpoints, as a
tree paged lazily.

Each row is laid out in columns for the width the tree has: the state icon, the title
(ellipsised), then fixed-width columns of agent, age ("updated … ago"), tokens and cost, named
by a header row over the tree. The agent column shows only while the jobs listed name two agents
or more (with one, it repeated "default" on every row; the agents of a delegation's sub-runs do
not count: above them, every job's row read "coordinator"), and only where the titles keep
``AGENT_TITLE_MIN`` cells beside it (it left them 13 cells at 120 columns). The cost is never
dropped; the tokens, the agent and the age are kept in that order as the room allows (the age
may stay where the agent does not fit). While no job or run listed cost anything (a free model:
the demo, a local one), there is no cost column: the age takes its place, then the tokens and
the agent as the room allows (at 80 columns every row read "$0.00" and nothing else).
Every row shows the same columns, so they line up and a wide cost never shifts the agent. The
ages tick while the screen is open: a timer recomputes them from the rows' timestamps (no query)
and redraws the rows that changed.
A detail line under the tree says what the row under the cursor is, its age in words, on as
many lines as its width needs (in shorter words when the long ones take more than two).

While the run on screen streams, its row and its job's say so as the status line does: tokens
estimated from the text streamed (``~``, until the provider's usage arrives), the run's row the
very figure of the status line (one count, the status line's, not a second one that started and
stopped at other moments: a trial read "~125" on the row and "~238" on the status line). Deltas
are only counted here; the rows are drawn again at most once a ``LIVE_TICK``, the detail line
(one line, repainted in place) with each delta that changes its figure, as the status line is
(a tick behind, it read "~530 tok" while the status line read "~582 tok"). Elsewhere the rows
show the committed figures, those `agent-tui show` prints (only the run on screen streams here:
a run streaming in another process, or not on screen, has no estimate). A running run's row and
its job's read updated "now" in every window, estimate or not (a window watching a run another
process streamed read "upd 25s" while that one read "now")."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Unpack

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import Static, Tree
from textual.widgets.tree import TreeNode

from runtime.interrupted import needs_resume, not_retried, superseded
from runtime.kinds import RunState
from runtime.results import CHARS_PER_TOKEN  # the estimate the status line and runtime use
from runtime.textsafe import terminal_safe_line, terminal_safe_title
from tui.widgets._format import (
    AGE_TICK,
    STATE_ICONS,
    age,
    cost,
    pad,
    run_icon,
    short,
    state_text,
    tokens,
    typed_text,
)
from tui.widgets._options import WidgetOptions
from tui.widgets.sized_by_layout import SizedByLayout

if TYPE_CHECKING:
    from textual.events import Resize
    from textual.timer import Timer

    from runtime.models import Checkpoint, Job, Run

COLUMNS = ("agent", "age", "tokens", "cost")
COLUMN_WIDTHS = {"agent": 10, "age": 3, "tokens": 5, "cost": 7}
COLUMN_TITLES = {"agent": "agent", "age": "upd", "tokens": "tok", "cost": "cost"}
TITLE_MIN = 13
"""A title keeps at least this many cells before figure columns are dropped: at 80 columns
the tokens give way (the detail line says them), or titles were cut to "list the TO…"."""
AGENT_TITLE_MIN = 24
"""The agent column shows only where the titles keep this many cells beside it: with it, the
browser at 120 columns cut them to "summarise this p…" (the detail line names the agent)."""
INTERRUPTED_ICON = "⚠"
LIVE_TICK = 1.0
"""Seconds between two redraws of a streaming run's rows (its deltas come many times a second)."""
LIVE_AGE = "now"


@dataclass
class LiveCount:
    """Text a running run streamed since the provider last counted its usage (the status
    line's count)."""

    job_id: str
    counted: int
    """The run's usage (total tokens) the estimate adds to: a new figure starts it again."""
    chars: int = 0
    drawn: int = -1
    """``chars`` when its rows were last drawn."""

    @property
    def estimate(self) -> int:
        return self.chars // CHARS_PER_TOKEN


def live_tokens(count: int, width: int) -> str:
    """``~1.2k``: an estimate of ``count`` tokens in at most ``width`` cells (``~12k`` rather
    than ``~12.3k`` when the decimal does not fit)."""
    text = "~" + tokens(count)
    if len(text) > width and count >= 1000:
        unit, suffix = (1_000_000, "M") if count >= 1_000_000 else (1000, "k")
        text = f"~{count // unit}{suffix}"
    return text


class BrowserHeader(Static):
    """The column names over the tree (the tree keeps it up to date)."""

    DEFAULT_CSS = """
    BrowserHeader { height: 1; color: $text-muted; text-wrap: nowrap; }
    """

    def __init__(self, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__("", markup=False, **kwargs)


def filter_line(state_name: str, width: int) -> str:
    """The browser's state filter and the key that changes it, in the longest wording that
    fits ``width`` cells (0, not laid out: the longest), shorter by whole phrases: at 80
    columns "filter: cancelled  (s to change)" was cut to "filter: cancelled  (s to"."""
    wordings = (
        f"filter: {state_name}  (s to change)",
        f"filter (s): {state_name}",
        f"filter: {state_name}",
        state_name,
    )
    if width <= 0:
        return wordings[0]
    return next((text for text in wordings if len(text) <= width), wordings[-1])


class FilterLine(Static):
    """The line over the browser: its state filter and the key that changes it, worded for
    the width it has (a new width words it again)."""

    def __init__(self, state_name: str, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(filter_line(state_name, 0), markup=False, **kwargs)
        self.state_name = state_name
        self._shown = filter_line(state_name, 0)

    def show(self, state_name: str) -> None:
        self.state_name = state_name
        self._draw()

    def _draw(self) -> None:
        text = filter_line(self.state_name, self.content_size.width)
        if text != self._shown:
            self._shown = text
            self.update(text)

    def on_resize(self) -> None:
        self._draw()


DetailWords = tuple[tuple[str, str], ...]
"""The detail line's pieces, each in long and short words: ("updated 3m ago", "3m ago")."""
DETAIL_LINES = 2
"""Lines the detail takes in long words at most; past that, it says the same in short ones."""
SEPARATOR = " · "


def _pack(pieces: Iterable[str], width: int) -> list[str]:
    """``pieces`` joined by " · " into lines of at most ``width`` cells, broken between pieces
    (never inside one: "… · 1.2k" then "tokens · $0.00" read as two figures)."""
    lines: list[str] = []
    for piece in pieces:
        if lines and len(lines[-1]) + len(SEPARATOR) + len(piece) <= width:
            lines[-1] += SEPARATOR + piece
        else:
            lines.append(piece)
    return lines


def detail_lines(words: DetailWords, width: int) -> str:
    """The detail for ``width`` cells: in long words if they take ``DETAIL_LINES`` lines at
    most, else in short ones (at 80 columns the cost was cut off the end of "run · default ·
    completed · updated 3m ago · 1.2k tokens · $0.00"). ``width`` 0 (not laid out): one line."""
    long = [piece for piece, _ in words if piece]
    if width <= 0:
        return SEPARATOR.join(long)
    lines = _pack(long, width)
    if len(lines) > DETAIL_LINES:
        lines = _pack([piece for _, piece in words if piece], width)
    return "\n".join(lines)


class BrowserDetail(SizedByLayout, Static):
    """The row under the cursor in words: "run · default · completed · updated 3m ago · …",
    packed for the width it has (the tree gives the words; a new width packs them again)."""

    DEFAULT_CSS = """
    BrowserDetail {
        height: auto; max-height: 4; color: $text-muted; padding: 0 1;
        border-top: hkey $panel-lighten-1;
    }
    """

    def __init__(self, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__("", markup=False, **kwargs)
        self.words: DetailWords = ()
        self._shown = ""

    def show(self, words: DetailWords) -> None:
        self.words = words
        self._draw()

    def _draw(self) -> None:
        text = detail_lines(self.words, self.content_size.width)
        if text != self._shown:
            # A layout only for another number of lines: the figure of the run on screen
            # changes with its deltas, mostly in place (each piece fits its line's width).
            lines_changed = text.count("\n") != self._shown.count("\n")
            self._shown = text
            self.update(text, layout=lines_changed or self.content_size.width <= 0)

    def on_resize(self) -> None:
        self._draw()


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


@dataclass
class EmptyEntry:
    """The one row of an empty page: what is empty (a filter with no match, a new database)."""

    text: str


NodeData = JobEntry | RunEntry | CheckpointEntry | MoreEntry | EmptyEntry


class JobTree(Tree[NodeData]):
    """Attributes down: the screen feeds pages of jobs, runs and checkpoints into it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        # The screen's keys for what is under the cursor, in the footer while the browser has
        # the focus (they work from the conversation too, unshown there): a new-user trial
        # found e, x, s and / at work in the browser with none of them in its footer.
        Binding("f", "screen.fork", "Fork"),
        Binding("e", "screen.export", "Export"),
        Binding("x", "screen.archive_job", "Archive"),
        Binding("s", "screen.cycle_filter", "Filter"),
        Binding("slash", "screen.search", "Search", key_display="/"),
        # The screen's follow-up, with priority: run as the app reads the key, before the keys
        # typed with it (at once, as tmux sends them) are handed on. As the screen's plain
        # binding it ran only once the key had passed through the tree, and those keys had
        # been handed to the tree by then: it ran them as its letters (i opened the inbox).
        Binding(
            "ctrl+t", "screen.follow_up", "Follow up the highlighted job", show=False, priority=True
        ),
    ]

    DEFAULT_CSS = """
    JobTree { background: $surface; scrollbar-size-vertical: 1; }
    JobTree > .tree--guides { color: $panel-lighten-2; }
    """

    def __init__(
        self,
        *,
        hide_ages: bool = False,
        here: str | None = None,
        **kwargs: Unpack[WidgetOptions],
    ) -> None:
        """``here``: the folder agent-tui was opened in; a job of another folder says which."""
        super().__init__("jobs", **kwargs)
        self.show_root = False
        self.guide_depth = 2
        self.hide_ages = hide_ages
        self.here = here
        self._elsewhere: dict[str, bool] = {}
        self._jobs: dict[str, TreeNode[NodeData]] = {}
        self._runs: dict[str, TreeNode[NodeData]] = {}
        self._job_runs: dict[str, dict[str, Run]] = {}
        self._more: TreeNode[NodeData] | None = None
        self.loaded_runs: set[str] = set()
        """Jobs whose runs have been loaded."""
        self._synced_header: Text | None = None
        self._synced_detail: DetailWords | None = None
        """What the header and detail lines show now (updated only when it changes)."""
        self._rows_width = -1
        """The width the rows were last drawn for (see ``on_resize``)."""
        self.now: float | None = None
        """The clock the ages are computed against (None: the wall clock)."""
        self._shown_ages: dict[int, str] = {}
        self._job_agents: Counter[str] = Counter()
        """How many of the jobs listed each agent coordinates (the agent column shows while
        there are two)."""
        self._costing: set[str] = set()
        """The jobs and runs listed (by id) whose cost is not zero: the cost column shows while
        there is one."""
        self.empty_text = ""
        """Shown as the only row when a first page has no job ("" shows nothing)."""
        self._live: dict[str, LiveCount] = {}
        """Runs streaming (the run on screen), by id: their rows show live figures."""
        self._live_timer: Timer | None = None
        self.cursor_waits_on_top = False
        """The cursor was put on the first row for the person (``wait_on_top``) and has not
        moved since: a job that comes above it, from another process, takes it, so Tab goes to
        the newest job. Any other move of the cursor ends it."""

    # --- rows ----------------------------------------------------------------------------------
    def columns(self, room: int | None = None) -> tuple[str, ...]:
        """The figure columns shown at this width, left to right (a subset of ``COLUMNS``):
        every row uses the same set, so the header names them and they line up. The cost
        always stays; then, as the room allows, the tokens, the agent and the age, each while
        the title keeps ``TITLE_MIN`` cells (``AGENT_TITLE_MIN`` beside the agent column).
        While nothing listed cost anything, the age always stays (the tokens, with the ages
        hidden), then the tokens and the agent as the room allows."""
        if room is None:
            room = self._width_room(depth=0, expandable=True)
        order = (
            ("cost", "tokens", "agent", "age") if self.shows_costs else ("age", "tokens", "agent")
        )
        kept: list[str] = []
        for name in order:
            if (name == "age" and self.hide_ages) or (name == "agent" and not self.names_agents):
                continue
            tried = [*kept, name]
            title = room - 2 - sum(COLUMN_WIDTHS[shown] + 1 for shown in tried)
            if not kept or title >= (AGENT_TITLE_MIN if "agent" in tried else TITLE_MIN):
                kept = tried  # the first column stays whatever the room
            elif name != "agent":
                break  # the agent alone needs more room than the title keeps beside it
        return tuple(name for name in COLUMNS if name in kept)

    @property
    def shows_costs(self) -> bool:
        """Whether the cost column tells something: a job or run listed cost money (with a
        free model every row read "$0.00")."""
        return bool(self._costing)

    @property
    def names_agents(self) -> bool:
        """Whether the agent column tells something: the jobs listed name two agents."""
        return len(self._job_agents) >= 2

    def _cells(self, data: NodeData | None) -> tuple[str, str, dict[str, str]]:
        """(icon, title, figure per column) of a row."""
        if isinstance(data, JobEntry):
            job = data.job
            icon = INTERRUPTED_ICON if data.interrupted else STATE_ICONS[job.latest_run_state]
            return icon, job.title, self._figures(data)
        if isinstance(data, RunEntry):
            return run_icon(data.run), self._run_title(data.run), self._figures(data)
        if isinstance(data, CheckpointEntry):
            checkpoint = data.checkpoint
            figures = {
                "agent": f"msg {checkpoint.last_position}",
                "age": self._age(checkpoint.created_at),
                "tokens": tokens(checkpoint.usage.total_tokens),
                "cost": "",
            }
            return "◆", f"step {checkpoint.step}", figures
        if isinstance(data, EmptyEntry):
            return "", data.text, {}
        return "", "… more", {}

    def _run_title(self, run: Run) -> str:
        """A run's row title: its message as typed, else what the run is. A fork with no
        message of its own reads as its job is titled, "Fork of survey the code at step 2", as
        `agent-tui runs` names it (it read "fork", which said nothing of where it came from)."""
        started_as = self._started_as(run)
        if started_as is not None:
            return started_as
        typed = typed_text(run.input or "", self._workspace_of(run.job_id))
        if typed:
            return typed
        if run.parent_run_id:
            return "sub-run"
        if run.retry_of_run_id:
            # "retry" alone did not say which of the job's runs it goes on with.
            retried = self._runs.get(run.retry_of_run_id)
            if retried is not None and isinstance(retried.data, RunEntry):
                title = self._run_title(retried.data.run)  # a retry's retry: its origin
                return title if title.startswith("retry of: ") else f"retry of: {title}"
            return "retry"
        if run.forked_from_checkpoint_id:
            # A fork starts a job of its own, titled by the rule the runtime words it with
            # (``fork_title``): "Fork of <source job> at step <N>".
            node = self._jobs.get(run.job_id)
            return node.data.job.title if node and isinstance(node.data, JobEntry) else "fork"
        return "run"

    def _started_as(self, run: Run) -> str | None:
        """What the person typed to start ``run``'s job, as the job is titled, when ``run`` is
        the run that started it and the job was titled as typed rather than by the text sent
        (an MCP prompt, a custom command: ``/basic:review README``); else None. The job's row
        read the command and its run's row the prompt's text ("Please review the README…")."""
        if run.parent_run_id or run.history_run_id or run.retry_of_run_id:
            return None  # a sub-run, a follow-up, a retry or a fork did not start the job
        node = self._jobs.get(run.job_id)
        if node is None or not isinstance(node.data, JobEntry):
            return None
        from runtime.store.rules import title_from  # the runtime's rule, loaded with it

        title = node.data.job.title
        return None if title == title_from(run.input) else title

    def _age(self, timestamp: float) -> str:
        return "" if self.hide_ages else age(timestamp, now=self.now)

    def _figures(self, data: JobEntry | RunEntry) -> dict[str, str]:
        """A job's or run's figures: the tokens estimated while text of the run on screen
        streams (``~``), else the committed ones."""
        item = data.job if isinstance(data, JobEntry) else data.run
        live = self._live_total(data)
        return {
            "agent": item.agent,
            "age": self._age_of(data),
            "tokens": tokens(item.usage.total_tokens)
            if live is None
            else live_tokens(live, COLUMN_WIDTHS["tokens"]),
            "cost": cost(item.cost_usd),
        }

    def _live_total(self, data: JobEntry | RunEntry) -> int | None:
        """The tokens estimated for a row while text of the run on screen streams: the run's
        as the status line shows them, its job's total plus that run's estimate (None: no
        run of the row streams here)."""
        if isinstance(data, RunEntry):
            live = self._live.get(data.run.id)
            return None if live is None else live.counted + live.estimate
        counts = [live.estimate for live in self._live.values() if live.job_id == data.job.id]
        return data.job.usage.total_tokens + sum(counts) if counts else None

    def _works(self, data: JobEntry | RunEntry) -> bool:
        """Whether the run (the job's latest run) works now, here or in another process: its
        row reads updated "now" in every window, whether its text streams here or not."""
        if isinstance(data, RunEntry):
            run = data.run
            return run.id in self._live or (run.state is RunState.RUNNING and not needs_resume(run))
        job = data.job
        return any(live.job_id == job.id for live in self._live.values()) or (
            job.latest_run_state is RunState.RUNNING and not data.interrupted
        )

    def _width_room(self, *, depth: int, expandable: bool) -> int:
        guides = depth * self.guide_depth
        expander = 2 if expandable else 0
        width = self.scrollable_content_region.width or self.size.width or 60
        return max(12, width - guides - expander - 1)

    def _room(self, node: TreeNode[NodeData]) -> int:
        """Cells left for a node's label after its guides and expander."""
        depth = 0  # ancestors drawn as guides (the hidden root is not)
        ancestor = node.parent
        while ancestor is not None and ancestor is not self.root:
            depth += 1
            ancestor = ancestor.parent
        return self._width_room(depth=depth, expandable=node.allow_expand)

    def process_label(self, label: str | Text) -> Text:
        """A node's label as given, never read as markup: ``render_label`` draws each row from
        its node's data, and what is given here is a job's title, a person's prompt (Tree's own
        reading of "fix the [/usr] path" as markup raised MarkupError, and the app quit at every
        start while that job was in the database; "a [b] c" lost its "[b]")."""
        return Text(label) if isinstance(label, str) else label

    def render_label(self, node: TreeNode[NodeData], base_style: Style, style: Style) -> Text:
        label = self._label(node)
        label.stylize(style)
        if node.allow_expand:
            prefix = self.ICON_NODE_EXPANDED if node.is_expanded else self.ICON_NODE
            return Text.assemble((prefix, base_style + Style(bold=True)), label)
        return label

    def _label(self, node: TreeNode[NodeData]) -> Text:
        # The age this row is drawn with: the next tick redraws it only if that changed (a row
        # drawn since the last tick, as a run's row when a run opens, is not drawn again).
        self._shown_ages[id(node)] = self._age_of(node.data)
        room = self._room(node)
        icon, title, figures = self._cells(node.data)
        title = terminal_safe_title(title)  # a job title comes from a prompt
        if isinstance(node.data, MoreEntry | EmptyEntry):
            return Text(short(title, room), style="dim italic")
        right = self._right(figures, room)
        title_room = max(1, room - 2 - (len(right) + 1 if right else 0))
        label = Text()
        label.append(icon + " ", style="bold")
        data = node.data
        if isinstance(data, JobEntry) and self.is_elsewhere(data.job.workspace):
            # The folder's name before the title: a new-user trial could not tell another
            # folder's job from this one's until its approval named the folder.
            # Narrow (80 columns), an arrow; the detail line under the tree names the folder.
            folder = short(terminal_safe_line(Path(data.job.workspace).name or "/"), 16) + ": "
            if cell_len(folder) >= title_room - 8:
                folder = "↗ "
            if cell_len(folder) < title_room:
                label.append(folder, style="dim italic")
                title_room -= cell_len(folder)
        label.append(pad(short(title, title_room), title_room))
        if right:
            label.append(" " + right, style="dim")
        return label

    def _right(self, figures: dict[str, str], room: int) -> str:
        """The figure columns, each padded to its width (the cost, the tokens and the age
        right-aligned, the agent left-aligned and shortened to fit)."""
        cells = []
        for name in self.columns():
            width = COLUMN_WIDTHS[name]
            text = figures.get(name, "")
            cells.append(short(text, width).ljust(width) if name == "agent" else text.rjust(width))
        return " ".join(cells)

    def header(self) -> Text:
        """The column names over the rows, aligned with a job row's cells."""
        room = self._width_room(depth=0, expandable=True)
        names = self.columns(room)
        widths = [COLUMN_WIDTHS[name] for name in names]
        used = sum(width + 1 for width in widths)
        title_room = max(1, room - 2 - used)
        header = Text(no_wrap=True, overflow="crop")
        header.append("    ")
        header.append("job", style="underline")
        header.append(" " * (title_room - 3))
        for name, width in zip(names, widths, strict=True):
            title = COLUMN_TITLES[name]
            pad = " " * (width - len(title))
            header.append(" " if name == "agent" else " " + pad)
            header.append(title, style="underline")
            if name == "agent":
                header.append(pad)
        return header

    def header_text(self) -> str:
        return self.header().plain

    def detail_text(self) -> str:
        """What the row under the cursor is, in words (ages spelled out), on one line."""
        return SEPARATOR.join(piece for piece, _ in self.detail_words() if piece)

    def detail_words(self) -> DetailWords:
        """What the row under the cursor is, piece by piece, each in long and short words."""
        node = self.cursor_node
        data = node.data if node is not None else None
        words: list[tuple[str, str]]
        live: int | None = None
        if isinstance(data, JobEntry):
            job = data.job
            live = self._live_total(data)
            words = [("job", "job"), (job.agent, job.agent)]
            if self.is_elsewhere(job.workspace):
                # A new-user trial could not tell which folder a job worked in.
                words.append((f"in {job.workspace}",) * 2)
            words.append(self._ago("updated", job.updated_at, data))
            usage, money = job.usage.total_tokens, job.cost_usd
        elif isinstance(data, RunEntry):
            run = data.run
            state = state_text(run)
            live = self._live_total(data)
            words = [("run", "run"), (run.agent, run.agent), (state, state)]
            words.append(self._ago("updated", run.updated_at, data))
            usage, money = run.usage.total_tokens, run.cost_usd
        elif isinstance(data, CheckpointEntry):
            checkpoint = data.checkpoint
            words = [
                ("checkpoint", "checkpoint"),
                (f"step {checkpoint.step}",) * 2,
                (f"msg {checkpoint.last_position}",) * 2,
                self._ago("saved", checkpoint.created_at),
            ]
            usage, money = checkpoint.usage.total_tokens, -1.0
        else:
            return ()
        count_text = f"~{tokens(live)}" if live is not None else tokens(usage)
        words.append((f"{count_text} tokens", f"{count_text} tok"))  # "tok" as the status line
        if money >= 0:
            words.append((cost(money),) * 2)
        return tuple(words)

    def is_elsewhere(self, workspace: str) -> bool:
        """Whether ``workspace`` is not the folder agent-tui was opened in (``here``)."""
        if self.here is None or workspace == self.here:
            return False
        found = self._elsewhere.get(workspace)
        if found is None:
            found = self._elsewhere[workspace] = (
                Path(workspace).resolve() != Path(self.here).resolve()
            )
        return found

    def _ago(
        self, verb: str, timestamp: float, data: JobEntry | RunEntry | None = None
    ) -> tuple[str, str]:
        """("updated 3m ago", "3m ago"), or "updated now" while ``data``'s run works; ("", "")
        with the ages hidden."""
        if self.hide_ages:
            return "", ""
        works = data is not None and self._works(data)
        when = LIVE_AGE if works else f"{age(timestamp, now=self.now)} ago"
        return f"{verb} {when}", when

    def get_label_width(self, node: TreeNode[NodeData]) -> int:
        return self._room(node) + (2 if node.allow_expand else 0)

    def row_text(self, node: TreeNode[NodeData]) -> str:
        """A row's label as a person reads it, without the tree's guides and expander."""
        return self._label(node).plain

    # --- the clock and the labels around the tree -----------------------------------------------
    def on_mount(self) -> None:
        if not self.hide_ages:
            self.set_interval(AGE_TICK, self.tick)

    def tick(self, now: float | None = None) -> None:
        """Redraw the rows whose age label changed (no database query: ages are computed
        from the rows' timestamps), and the detail line."""
        self.now = now
        # Ages the rows do not show (the column gave way at this width) change nothing drawn.
        shown = "age" in self.columns()
        for node in self._visible_nodes() if shown else ():
            text = self._age_of(node.data)
            if text != self._shown_ages.get(id(node)):
                self._shown_ages[id(node)] = text
                self._redraw_node(node)
        self._sync_labels()

    def _age_of(self, data: NodeData | None) -> str:
        if self.hide_ages:
            return ""
        if isinstance(data, JobEntry):
            return LIVE_AGE if self._works(data) else self._age(data.job.updated_at)
        if isinstance(data, RunEntry):
            return LIVE_AGE if self._works(data) else self._age(data.run.updated_at)
        if isinstance(data, CheckpointEntry):
            return self._age(data.checkpoint.created_at)
        return ""

    def _visible_nodes(self) -> list[TreeNode[NodeData]]:
        shown: list[TreeNode[NodeData]] = []
        pending = list(self.root.children)
        while pending:
            node = pending.pop()
            shown.append(node)
            if node.is_expanded:
                pending.extend(node.children)
        return shown

    def _sync_labels(self) -> None:
        parent = self.parent
        if parent is None:
            return
        # Only what changed is updated: the age tick calls this every second, and an update
        # redraws the line even when its text is the same (a frame a second at rest).
        header_text = self.header()
        if header_text != self._synced_header:
            self._synced_header = header_text
            for header in parent.query_children(BrowserHeader):
                header.update(header_text, layout=False)  # one row, always
        self._sync_detail()

    def _sync_detail(self) -> None:
        parent = self.parent
        if parent is None:
            return
        detail_words = self.detail_words()
        if detail_words != self._synced_detail:
            self._synced_detail = detail_words
            for detail in parent.query_children(BrowserDetail):
                detail.show(detail_words)

    def on_resize(self, event: Resize) -> None:
        if event.size.width == self._rows_width:
            # Only the height changed (the detail pane under the tree took a row more or
            # less): the rows are drawn as they were. Tree's own handler would throw them
            # away and ask for another layout of the whole screen, a frame of ~10 ms as each
            # run starts (its detail grows by a row) and again as it ends.
            event.prevent_default()
        self._rows_width = event.size.width
        self._sync_labels()

    def watch_show_vertical_scrollbar(self) -> None:
        # The scrollbar takes a column from the rows (or gives it back) with no change of the
        # tree's width: when only its height changed (above), a trial at 80x24 saw the rows
        # drawn before keep their old width, their figures a column out of line with the
        # header and the rows drawn since. Every row is drawn again for the room it has now.
        self._clear_line_cache()
        self.refresh()
        self._sync_labels()

    def wait_on_top(self) -> None:
        """The cursor on the first row, where it stays as jobs come above it until it moves
        (``cursor_waits_on_top``)."""
        self.move_cursor_to_line(0)
        self.cursor_waits_on_top = True

    def watch_cursor_line(self, previous_line: int, line: int) -> None:
        before = self.cursor_node
        super().watch_cursor_line(previous_line, line)
        node = self.cursor_node
        if node is not self._top_row():
            self.cursor_waits_on_top = False
        if previous_line == line and node is not None and node is not before:
            # The row under the cursor went (archived) and the next one took its line: Tree
            # says nothing then, and the composer's ctrl+t went on addressing the job archived.
            self.post_message(self.NodeHighlighted(node))
        self._sync_labels()

    def move_cursor(self, node: TreeNode[NodeData] | None, animate: bool = False) -> None:
        """Tree's ``move_cursor`` goes to ``node``'s line as of the last build: a node added or
        expanded since has a stale line (-1 for a new one), and the cursor would land on another
        row. The lines are built first, so the cursor lands on ``node`` itself."""
        self._tree_lines  # noqa: B018 (the property rebuilds the lines when they are stale)
        super().move_cursor(node, animate=animate)

    # --- feeding -------------------------------------------------------------------------------
    def _count_agents(self, listed: Iterable[str] = (), gone: Iterable[str] = ()) -> None:
        """The agents of jobs ``listed`` now and of jobs ``gone`` from the list: when that
        shows or hides the agent column, every row is drawn again."""
        before = self.names_agents
        self._job_agents.update(listed)
        self._job_agents.subtract(gone)
        self._job_agents = +self._job_agents  # the agents of no job listed go
        if self.names_agents != before:
            self._redraw_rows_all()

    def _count_costs(self, items: Iterable[Job | Run] = (), gone: Iterable[str] = ()) -> None:
        """The costs of jobs or runs ``items`` listed now, and the ids of those ``gone`` from
        the list: when that shows or hides the cost column, every row is drawn again."""
        before = self.shows_costs
        for item in items:
            if item.cost_usd > 0:
                self._costing.add(item.id)
            else:
                self._costing.discard(item.id)
        self._costing.difference_update(gone)
        if self.shows_costs != before:
            self._redraw_rows_all()

    def _redraw_rows_all(self) -> None:
        """Every row drawn again (the set of columns changed)."""
        for node in self._visible_nodes():
            self._redraw_node(node)

    def _redraw_node(self, node: TreeNode[NodeData]) -> None:
        node.refresh()  # bumps the node's version: its line is drawn again

    def _replace_data(self, node: TreeNode[NodeData], data: NodeData) -> None:
        """The row shows ``data`` now; drawn again only if what it shows changed (a run's
        rows are read again at each checkpoint and state change, mostly to the same cells)."""
        before = self._cells(node.data)
        node.data = data
        if self._cells(data) != before:
            self._redraw_node(node)

    def add_jobs(self, jobs: list[Job], next_cursor: str | None) -> None:
        if self._more is not None:
            self._more.remove()
            self._more = None
        listed = []
        for job in jobs:
            if job.id in self._jobs:
                continue
            node = self.root.add(job.title, JobEntry(job))
            self._jobs[job.id] = node
            listed.append(job.agent)
        self._count_agents(listed)
        self._count_costs(jobs)
        if next_cursor is not None:
            self._more = self.root.add_leaf("… more", MoreEntry(next_cursor))
        if not self._jobs and self.empty_text:
            self.root.add_leaf(self.empty_text, EmptyEntry(self.empty_text))
        self._sync_labels()

    def clear_jobs(self) -> None:
        self.clear()
        self._jobs.clear()
        self._job_agents.clear()
        self._costing.clear()
        self._runs.clear()
        self._job_runs.clear()
        self._more = None
        self.loaded_runs.clear()

    def _top_row(self) -> TreeNode[NodeData] | None:
        return self.root.children[0] if self.root.children else None

    def upsert_job(self, job: Job) -> TreeNode[NodeData]:
        # No cursor yet (an empty browser at start) waits on top as well. Not while the browser
        # has the focus: a person looking at the rows keeps the one under the cursor.
        on_top = (self.cursor_waits_on_top or self.cursor_line == -1) and not self.has_focus
        self._count_costs((job,))
        node = self._jobs.get(job.id)
        if node is None:
            for child in list(self.root.children):
                if isinstance(child.data, EmptyEntry):
                    child.remove()
            node = self._insert_job(job)
            self._count_agents((job.agent,))
            self._mark_interrupted(job.id)
        else:
            interrupted = isinstance(node.data, JobEntry) and node.data.interrupted
            if isinstance(node.data, JobEntry) and node.data.job.agent != job.agent:
                self._count_agents((job.agent,), gone=(node.data.job.agent,))
            if self._moves_up(node, job):
                node = self._move_up(node, JobEntry(job, interrupted=interrupted))
            else:
                self._replace_data(node, JobEntry(job, interrupted=interrupted))
        top = self._top_row()
        if on_top and top is not None and top is not self.cursor_node:
            self.move_cursor(top)
            self.cursor_waits_on_top = True  # the lines rebuilt for the move had ended it
        self._sync_labels()
        return node

    def _insert_job(
        self, job: Job, data: JobEntry | None = None, *, expand: bool = False
    ) -> TreeNode[NodeData]:
        """A job's row in its place by activity, as the pages come: a new job at the top, a
        job brought back from the archive among its peers (it went to the top, out of order)."""
        after = next(
            (
                child
                for child in self.root.children
                if not isinstance(child.data, JobEntry)
                or child.data.job.updated_at <= job.updated_at
            ),
            None,
        )
        entry = data or JobEntry(job)
        if after is not None:
            node = self.root.add(job.title, entry, before=after, expand=expand)
        else:
            node = self.root.add(job.title, entry, expand=expand)
        self._jobs[job.id] = node
        return node

    def _moves_up(self, node: TreeNode[NodeData], job: Job) -> bool:
        """Whether the job's row, with new activity, goes up to its place by activity (a
        long-lived agent-tui kept a job worked elsewhere under rows idle for minutes). Any
        job's row does, expanded or not, the cursor on it or not: the cursor goes with the row
        it is on (an expanded job stayed under older ones, its "upd" column contradicting the
        order, while a folded one updated the same way went to the top)."""
        if node.parent is not self.root:
            return False
        siblings = self.root.children
        index = siblings.index(node)
        above = siblings[index - 1].data if index > 0 else None
        return isinstance(above, JobEntry) and above.job.updated_at < job.updated_at

    def _move_up(self, node: TreeNode[NodeData], data: JobEntry) -> TreeNode[NodeData]:
        """The job's row in its new place, with the rows under it as they were (expanded or
        folded, the checkpoints listed), the cursor on the row it was on."""
        cursor = self.cursor_node
        moved = self._insert_job(data.job, data, expand=node.is_expanded)
        copies = {node: moved}
        self._copy_children(node, moved, copies)
        node.remove()
        if cursor is not None:
            self.move_cursor(copies.get(cursor, cursor))  # the same row, wherever it is now
        return moved

    def _copy_children(
        self,
        source: TreeNode[NodeData],
        target: TreeNode[NodeData],
        copies: dict[TreeNode[NodeData], TreeNode[NodeData]],
    ) -> None:
        """``source``'s rows under ``target`` (Tree cannot move a node), each as it was;
        ``copies`` maps each row to its copy."""
        for child in source.children:
            copy = target.add(
                child.label,
                child.data,
                expand=child.is_expanded,
                allow_expand=child.allow_expand,
            )
            copies[child] = copy
            if isinstance(child.data, RunEntry):
                self._runs[child.data.run.id] = copy
            self._copy_children(child, copy, copies)

    def remove_job(self, job_id: str) -> None:
        """The job's rows go (it was archived, maybe in another process)."""
        node = self._jobs.pop(job_id, None)
        if node is None:
            return
        if isinstance(node.data, JobEntry):
            self._count_agents(gone=(node.data.job.agent,))
        runs = self._job_runs.pop(job_id, {})
        for run_id in runs:
            self._runs.pop(run_id, None)
        self._count_costs(gone=(job_id, *runs))
        self.loaded_runs.discard(job_id)
        node.remove()
        if not self._jobs and self.empty_text:
            self.root.add_leaf(self.empty_text, EmptyEntry(self.empty_text))
        # Tree keeps its cursor on a removed row until its lines are built again: built now,
        # the cursor is on the row that took its place, and the detail line synced below
        # describes that row, not the archived job's run.
        self._build_lines()
        self._sync_labels()

    def _mark_interrupted(self, job_id: str) -> None:
        node = self._jobs.get(job_id)
        if node is None or not isinstance(node.data, JobEntry):
            return
        interrupted = bool(not_retried(self._runs_in_order(job_id)))
        if node.data.interrupted != interrupted:
            node.data = JobEntry(node.data.job, interrupted=interrupted)
            self._redraw_node(node)

    def set_runs(self, job_id: str, runs: list[Run]) -> None:
        known = self._job_runs.get(job_id, {})
        # A page of runs read before a change shown here already (a refresh came first) does
        # not put back the older copy: a row's figures went back to an earlier step's.
        runs = [
            known[run.id] if run.id in known and known[run.id].revision > run.revision else run
            for run in runs
        ]
        by_id = {run.id: run for run in runs}
        if job_id in self.loaded_runs and self._job_runs.get(job_id) == by_id:
            # The same runs again (Enter on a job reads them once to open its latest run and
            # once for the expanded row): rebuilding the rows would only redraw the whole tree.
            return
        self._job_runs[job_id] = by_id
        job_node = self._jobs.get(job_id)
        if job_node is None:
            return
        self._count_costs(runs)
        job_node.remove_children()
        self.loaded_runs.add(job_id)
        for run in runs:
            self._runs.pop(run.id, None)
        for run in sorted(runs, key=lambda r: r.created_at):
            self._add_run_node(run, by_id)
        self._mark_interrupted(job_id)
        self._sync_labels()

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
        node = self._add_run_child(parent, run)
        self._runs[run.id] = node
        return node

    def _workspace_of(self, job_id: str) -> str | None:
        """The folder of a job the tree lists (where its skills are), else None."""
        node = self._jobs.get(job_id)
        return node.data.job.workspace if node and isinstance(node.data, JobEntry) else None

    def _add_run_child(self, parent: TreeNode[NodeData], run: Run) -> TreeNode[NodeData]:
        """A run row, collapsed: expanding it lists its checkpoints (the screen loads them on
        ``NodeExpanded``). A run that gets a sub-run is expanded through ``expand()`` so the
        sub-run shows and the event still fires, loading the parent's checkpoints too."""
        node = parent.add(self._run_title(run), RunEntry(run))
        if isinstance(parent.data, RunEntry) and not parent.is_expanded:
            parent.expand()
        return node

    def upsert_run(self, run: Run) -> None:
        self._job_runs.setdefault(run.job_id, {})[run.id] = run
        if run.job_id in self._jobs:  # a run of a job listed (not one the filter leaves out)
            self._count_costs((run,))
        live = self._live.get(run.id)
        if live is not None and (
            run.state is not RunState.RUNNING or run.usage.total_tokens != live.counted
        ):
            # The provider's figure replaces the estimate (or the run stopped streaming).
            self._end_live(run.id)
        node = self._runs.get(run.id)
        if node is not None:
            self._replace_data(node, RunEntry(run))
        elif run.job_id in self.loaded_runs:
            parent = self._runs.get(run.parent_run_id or "") or self._jobs.get(run.job_id)
            if parent is not None:
                self._runs[run.id] = self._add_run_child(parent, run)
        self._mark_interrupted(run.job_id)
        self._sync_labels()

    # --- the run streaming now ---------------------------------------------------------------
    def show_streamed(self, run: Run, streamed_chars: int) -> None:
        """The status line's count for the run on screen: ``streamed_chars`` of text (or
        thinking) streamed since ``run``'s usage (as the status line has it) was counted; 0,
        or a run that no longer runs: no estimate, the rows show the committed figures. Kept
        only: the rows are drawn with the first piece, then at most once a ``LIVE_TICK`` (a
        delta comes every frame or so, and each redraw of the tree's rows costs the stream's
        budget); the detail line, when it is about the run, at once."""
        if streamed_chars <= 0 or run.state is not RunState.RUNNING:
            self._end_live(run.id)
            return
        live = self._live.get(run.id)
        if live is None or live.counted != run.usage.total_tokens:
            live = self._live[run.id] = LiveCount(run.job_id, run.usage.total_tokens)
        estimate, live.chars = live.estimate, streamed_chars
        if live.estimate != estimate and self._live_total_shown(run.id):
            self._sync_detail()
        if self._live_timer is None:
            self._show_live()

    def _live_total_shown(self, run_id: str) -> bool:
        """Whether the detail line shows a figure ``run_id``'s stream changes: the cursor on
        its row or its job's."""
        node = self.cursor_node
        data = node.data if node is not None else None
        if isinstance(data, RunEntry):
            return data.run.id == run_id
        live = self._live.get(run_id)
        return isinstance(data, JobEntry) and live is not None and live.job_id == data.job.id

    def keep_live(self, run_id: str | None) -> None:
        """Only ``run_id`` (the run on screen) streams here now: the others' rows stop saying
        so (their deltas no longer come)."""
        for other in [other for other in self._live if other != run_id]:
            self._end_live(other)

    def _show_live(self) -> None:
        changed = [live for live in self._live.values() if live.chars != live.drawn]
        if not changed:
            self._live_timer = None
            return
        for run_id, live in self._live.items():
            if live in changed:
                live.drawn = live.chars
                self._redraw_rows(run_id, live.job_id)
        self._sync_labels()
        self._live_timer = self.set_timer(LIVE_TICK, self._show_live)

    def _end_live(self, run_id: str) -> None:
        live = self._live.pop(run_id, None)
        if live is not None:
            self._redraw_rows(run_id, live.job_id)
            self._sync_labels()

    def _redraw_rows(self, run_id: str, job_id: str) -> None:
        for node in (self._runs.get(run_id), self._jobs.get(job_id)):
            if node is not None:
                self._redraw_node(node)

    def set_checkpoints(self, run_id: str, checkpoints: list[Checkpoint]) -> None:
        node = self._runs.get(run_id)
        if node is None:
            return
        for child in list(node.children):
            if isinstance(child.data, CheckpointEntry | EmptyEntry):
                child.remove()
        for checkpoint in checkpoints:
            node.add_leaf(f"step {checkpoint.step}", CheckpointEntry(checkpoint))
        if not checkpoints and not node.children:
            node.add_leaf("no checkpoint yet", EmptyEntry("no checkpoint yet"))

    def job_node(self, job_id: str) -> TreeNode[NodeData] | None:
        return self._jobs.get(job_id)

    def _build_lines(self) -> None:
        """The tree's lines built now if rows were added or removed since (``Tree`` builds
        them when it next reads them: its public ``last_line`` reads them)."""
        _ = self.last_line

    def cursor_job(self) -> Job | None:
        """The job of the row under the cursor: its own row, or a row under it (a run, a
        sub-run, a checkpoint); None without a cursor or on a row of no job ("… more")."""
        self._build_lines()  # a removed row gives the cursor to the one in its place
        node = self.cursor_node
        while node is not None and not isinstance(node.data, JobEntry):
            node = node.parent
        return node.data.job if node is not None and isinstance(node.data, JobEntry) else None

    def shown_rows(self, run: Run) -> tuple[Run | None, Job | None]:
        """The rows of ``run`` (as last given) and of its job that the browser shows."""
        node = self._jobs.get(run.job_id)
        job = node.data.job if node is not None and isinstance(node.data, JobEntry) else None
        return self._job_runs.get(run.job_id, {}).get(run.id), job

    def gone_past(self, run: Run) -> bool:
        """Later root runs of its job (as loaded here) went on past ``run``, which ended: a
        retry is refused, a fork is the way on from it (``runtime.interrupted.superseded``)."""
        return superseded(run, self._runs_in_order(run.job_id))

    def _runs_in_order(self, job_id: str) -> list[Run]:
        """The job's runs loaded here, oldest first (they arrive as they come: an upsert may
        add a newer run before older ones are loaded)."""
        return sorted(self._job_runs.get(job_id, {}).values(), key=lambda r: r.created_at)

    def context_before(self, run: Run) -> int:
        """The context the job's latest earlier root run reached (0 when none is loaded): a
        follow-up's model call starts from about that much (not the largest of them: a
        compaction shrinks it), which its status line shows until the call reports its own."""
        earlier = [
            other
            for other in self._runs_in_order(run.job_id)
            if other.parent_run_id is None
            and other.id != run.id
            and other.created_at <= run.created_at
            and other.context_tokens
        ]
        return earlier[-1].context_tokens if earlier else 0

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
