"""Ids by unique prefix, like git: ``agent-tui show 3fa2`` finds the one run whose id starts so.

A prefix that matches nothing is "not found" naming the database looked in; one that matches
several is ambiguous and lists a few. An exact id is taken as it is. Ids are lower-case hex
(``runtime.ids``): one typed in capitals, or a prefix, finds them too. Where a job is asked, the
id (or unique prefix) of one of its runs names it too: ``runs`` lists run ids, and a new-user
trial typed one to ``--resume``, ``export`` and ``follow-up``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime.errors import InvalidInput, NotFoundError

if TYPE_CHECKING:
    from runtime.store.base import Store

SHOWN = 5


async def resolve_id(
    store: Store,
    kind: str,
    text: str,
    *,
    db_path: Path | str | None,
    note: Callable[[str], None] | None = None,
    run_names_job: bool = True,
    named_run: Callable[[str], None] | None = None,
) -> str:
    """The one id of ``kind`` that is or starts with ``text``; for a job, also the job of the
    one run whose id is or starts with ``text`` (told to ``note`` in one line, and that run's
    id to ``named_run``), unless not ``run_names_job``."""
    prefix = text.strip().lower()
    if not prefix:
        raise InvalidInput(f"the {kind} id is empty")
    found: list[str] = await store.ids_with_prefix(kind, prefix, limit=SHOWN + 1)
    if prefix in found:
        return prefix
    from tui._cli.settings import shown

    where = f" in {shown(db_path)}" if db_path is not None else ""
    if not found and kind == "job" and run_names_job:
        job_id = await _job_of_a_run(store, prefix, note, named_run)
        if job_id is not None:
            return job_id
    if not found:
        hint = await _other_kind(store, kind, prefix)
        raise NotFoundError(f"no {kind} id starts with {prefix!r}{where}{hint}")
    if len(found) > 1:
        listed = ", ".join(found[:SHOWN]) + (", …" if len(found) > SHOWN else "")
        raise InvalidInput(
            f"{kind} id prefix {prefix!r} is ambiguous: it starts {listed}; type more of it"
        )
    return found[0]


async def _job_of_a_run(
    store: Store,
    prefix: str,
    note: Callable[[str], None] | None,
    named_run: Callable[[str], None] | None = None,
) -> str | None:
    """The job of the one run whose id is or starts with ``prefix`` (None: no run's does);
    several runs are as ambiguous as several jobs."""
    runs: list[str] = await store.ids_with_prefix("run", prefix, limit=SHOWN + 1)
    if not runs:
        return None
    if len(runs) > 1:
        listed = ", ".join(runs[:SHOWN]) + (", …" if len(runs) > SHOWN else "")
        raise InvalidInput(
            f"no job id starts with {prefix!r}, and it starts several run ids: {listed}; "
            "type more of one"
        )
    run = await store.get_run(runs[0])
    if named_run is not None:
        named_run(run.id)
    if note is not None:
        from tui._cli.listing import short_id

        note(f"agent-tui: run {short_id(run.id)} is in job {short_id(run.job_id)}: using that job")
    return run.job_id


async def _other_kind(store: Store, kind: str, prefix: str) -> str:
    """When ``prefix`` names one id of another kind (a run's id given where a checkpoint's is
    asked, found by a new-user trial): what it is, and the id that was meant, if one follows."""
    for other in ("run", "job", "checkpoint"):
        if other == kind:
            continue
        found = await store.ids_with_prefix(other, prefix, limit=2)
        if len(found) != 1:
            continue
        if other == "run" and kind == "checkpoint":
            checkpoints = await store.list_checkpoints(found[0])
            if not checkpoints:
                return f"; {prefix} is run {found[0]}, which has no checkpoint yet"
            last = checkpoints[-1]
            return (
                f"; {prefix} is run {found[0]}: its last checkpoint is {last.id} (step {last.step})"
            )
        if other == "checkpoint":
            checkpoint = await store.get_checkpoint(found[0])
            return f"; {prefix} is checkpoint {checkpoint.id}, of run {checkpoint.run_id}"
        return f"; {prefix} is a {other} id ({found[0]})"
    return ""


ARGUMENT_KINDS = (("run_id", "run"), ("job_id", "job"), ("checkpoint_id", "checkpoint"))
EXACT_IDS = ("request",)
"""Id arguments taken whole (``respond --request``): only their case is made the ids'."""


async def resolve_arguments(
    store: Store,
    args: Any,
    *,
    db_path: Path | str | None,
    note: Callable[[str], None] | None = None,
) -> None:
    """Replace every id argument of a parsed command by the full id it names, in lower case
    (``note``: told when a run's id named its job). ``delete`` takes a job's own id only: what
    it deletes cannot come back, so it is never inferred from a run's."""
    run_names_job = getattr(args, "command", None) != "delete"
    for attribute, kind in ARGUMENT_KINDS:
        value = getattr(args, attribute, None)
        if isinstance(value, str):
            resolved = await resolve_id(
                store, kind, value, db_path=db_path, note=note, run_names_job=run_names_job
            )
            setattr(args, attribute, resolved)
    for attribute in EXACT_IDS:
        value = getattr(args, attribute, None)
        if isinstance(value, str):
            setattr(args, attribute, value.strip().lower())
