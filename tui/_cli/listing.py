"""How ``agent-tui runs`` prints a page of runs: the table, its cells, the JSON of a run and the
line for an empty page. The one definition both ``runs`` paths use — the read-only fast path
(``tui._cli.fast_runs``, plain tuples from ``sqlite3``) and the full one (``cmd_runs``, the
runtime's models, through ``tui._cli.render``) — so the two cannot drift apart.

Standard library only (no pydantic, no runtime models): ``runs`` starts in milliseconds.
"""

from __future__ import annotations

from runtime.owners import ACTIVE_STATES
from tui.formatting import format_age, format_tokens

TYPE_CHECKING = False  # not typing's: light
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Any

HEADERS = ("RUN", "STATE", "AGENT", "MODEL", "AGE", "TOKENS", "COST", "JOB")

RUN_COLUMNS = (
    "id",
    "job_id",
    "agent",
    "model",
    "state",
    "revision",
    "input",
    "parent_run_id",
    "parent_tool_call_id",
    "history_run_id",
    "history_position",
    "forked_from_checkpoint_id",
    "retry_of_run_id",
    "idempotency_key",
    "owner_id",
    "execution_token",
    "step",
    "max_steps",
    "interrupted",
    "detached",
    "outcome",
    "failure",
    "cancel_reason",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cost_usd",
    "context_tokens",
    "created_at",
    "updated_at",
)
"""The columns of the ``runs`` table the fast path reads, in this order (``run_json``)."""

RUN_JSON_FIELDS = (
    *RUN_COLUMNS[: RUN_COLUMNS.index("input_tokens")],
    "usage",
    *RUN_COLUMNS[RUN_COLUMNS.index("cost_usd") :],
)
"""The keys of ``Run.model_dump(mode="json")``, in its order (tests/cli/test_fast_runs.py
checks them against ``runtime.models.Run``)."""

_USAGE = RUN_COLUMNS.index("input_tokens")
_ID, _AGENT, _MODEL, _STATE, _PARENT, _OWNER, _INTERRUPTED, _COST, _CREATED = (
    RUN_COLUMNS.index(name)
    for name in (
        "id",
        "agent",
        "model",
        "state",
        "parent_run_id",
        "owner_id",
        "interrupted",
        "cost_usd",
        "created_at",
    )
)
OWNER_GONE = "its process is gone: interrupted when agent-tui next opens this database"
"""What a queued or running run whose owner is provably gone (``runtime.owners``) is, until a
process that may execute opens the database and recovers it (the read-only commands never do)."""
OWNER_GONE_SHORT = "process gone"
"""``OWNER_GONE`` in a table's state column (the whole sentence made every row 200 wide)."""
SHORT_ID = 8
"""How many characters of an id the output shows where the whole one is not needed (a prefix
is enough to name it to any command, as the TUI's hints do)."""
_FLOATS = frozenset({"cost_usd", "created_at", "updated_at"})
_BOOLS = frozenset({"interrupted", "detached"})


class RunLine:
    """What one row of the table shows about a run."""

    __slots__ = (
        "agent",
        "cost_usd",
        "created_at",
        "interrupted",
        "job_title",
        "model",
        "owner_gone",
        "parent_run_id",
        "run_id",
        "state",
        "total_tokens",
    )

    def __init__(
        self,
        *,
        run_id: str,
        state: str,
        interrupted: bool,
        agent: str,
        model: str,
        created_at: float,
        total_tokens: int,
        cost_usd: float,
        parent_run_id: str | None,
        job_title: str,
        owner_gone: bool = False,
    ) -> None:
        self.run_id = run_id
        self.state = state
        self.interrupted = interrupted
        self.agent = agent
        self.model = model
        self.created_at = created_at
        self.total_tokens = total_tokens
        self.cost_usd = cost_usd
        self.parent_run_id = parent_run_id
        self.job_title = job_title
        self.owner_gone = owner_gone


def short_id(full_id: str) -> str:
    """The short form of an id: its first ``SHORT_ID`` characters."""
    return full_id[:SHORT_ID]


def format_cost(usd: float) -> str:
    if usd <= 0:
        return "$0.00"  # as the TUI shows it
    if usd < 0.01:
        return f"${usd:.4f}"
    return f"${usd:.2f}"


def one_line(text: str, width: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    materialised = [list(row) for row in rows]
    widths = [len(h) for h in headers]
    for row in materialised:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines = ["  ".join(h.ljust(widths[i]) for i, h in enumerate(headers)).rstrip()]
    for row in materialised:
        lines.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
    return lines


def shown_title(title: str, archived: bool) -> str:
    """A job's title in the table: marked when the job is archived (``runs --archived``)."""
    return f"[archived] {title}" if archived else title


def state_label(
    state: str, interrupted: bool, *, owner_gone: bool = False, explained: bool = False
) -> str:
    """A run's state for the tables: one a quit or a crash put back in the queue is not going
    to run by itself (it waits for a person, DESIGN §5) — said so, as the TUI says it, instead
    of "queued", which reads as about to start. One whose process was killed is said to be gone
    (``OWNER_GONE_SHORT``; ``explained``: ``OWNER_GONE``, for ``show``): the store still says
    running, but nothing runs it."""
    if owner_gone:
        return f"{state} ({OWNER_GONE if explained else OWNER_GONE_SHORT})"
    if interrupted and state == "queued":
        return "interrupted (waits for retry)"
    return state + " (interrupted)" if interrupted else state


def runs_table(runs: Iterable[RunLine], *, now: float) -> list[str]:
    rows = []
    for run in runs:
        title = one_line(run.job_title, 40)
        if run.parent_run_id:
            # The parent's row is in the table with its whole id; 32 characters here made
            # every child's line wrap at 80 columns.
            title = f"↳ child of {short_id(run.parent_run_id)}: {title}"
        rows.append(
            [
                run.run_id,
                state_label(run.state, run.interrupted, owner_gone=run.owner_gone),
                run.agent,
                run.model,
                format_age(now - run.created_at),
                format_tokens(run.total_tokens),
                format_cost(run.cost_usd),
                title,
            ]
        )
    return table(HEADERS, rows)


def no_runs(state: str | None) -> str:
    """What ``runs`` says (on stderr) when the page is empty."""
    if state == "interrupted":
        return "No interrupted runs: nothing a crash stopped waits for a retry."
    return "No runs" + (f" in state {state}." if state else " yet.")


def owner_to_check(row: Sequence[Any]) -> str | None:
    """The owner of a ``RUN_COLUMNS`` tuple's run when recovery would act on the run if that
    owner were gone (a queued or running run with an owner), else None."""
    owner: str | None = row[_OWNER]
    return owner if owner is not None and row[_STATE] in ACTIVE_STATES else None


def run_line(row: Sequence[Any], job_title: str, *, owner_gone: bool = False) -> RunLine:
    """The table row of a ``RUN_COLUMNS`` tuple."""
    return RunLine(
        run_id=row[_ID],
        state=row[_STATE],
        interrupted=bool(row[_INTERRUPTED]),
        agent=row[_AGENT],
        model=row[_MODEL],
        created_at=float(row[_CREATED]),
        total_tokens=int(sum(row[_USAGE : _USAGE + 4])),
        cost_usd=float(row[_COST]),
        parent_run_id=row[_PARENT],
        job_title=job_title,
        owner_gone=owner_gone,
    )


def run_json(row: Sequence[Any], job_title: str, *, owner_gone: bool = False) -> dict[str, Any]:
    """A ``RUN_COLUMNS`` tuple as ``Run.model_dump(mode="json")`` gives it, with the job's
    title and whether its process is gone (``OWNER_GONE``): the object ``runs --json``
    prints."""
    import json

    data: dict[str, Any] = {}
    for name, value in zip(RUN_COLUMNS[:_USAGE], row[:_USAGE], strict=True):
        if name in _BOOLS:
            value = bool(value)
        elif name == "failure":
            if value:
                failure = json.loads(value)
                value = {"code": failure["code"], "message": failure["message"]}
            else:
                value = None
        data[name] = value
    data["usage"] = {
        "input_tokens": row[_USAGE],
        "output_tokens": row[_USAGE + 1],
        "cache_read_tokens": row[_USAGE + 2],
        "cache_write_tokens": row[_USAGE + 3],
    }
    for name, value in zip(RUN_COLUMNS[_USAGE + 4 :], row[_USAGE + 4 :], strict=True):
        data[name] = float(value) if name in _FLOATS else value
    data["job_title"] = job_title
    data["owner_gone"] = owner_gone
    return data
