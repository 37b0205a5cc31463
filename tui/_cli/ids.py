"""Ids by unique prefix, like git: ``agent-tui show 3fa2`` finds the one run whose id starts so.

A prefix that matches nothing is "not found" naming the database looked in; one that matches
several is ambiguous and lists a few. An exact id is taken as it is.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime.errors import InvalidInput, NotFoundError

if TYPE_CHECKING:
    from runtime.store.base import Store

SHOWN = 5


async def resolve_id(store: Store, kind: str, text: str, *, db_path: Path | str | None) -> str:
    """The one id of ``kind`` that is or starts with ``text``."""
    prefix = text.strip()
    if not prefix:
        raise InvalidInput(f"the {kind} id is empty")
    found: list[str] = await store.ids_with_prefix(kind, prefix, limit=SHOWN + 1)
    if prefix in found:
        return prefix
    from tui._cli.settings import shown

    where = f" in {shown(db_path)}" if db_path is not None else ""
    if not found:
        hint = await _other_kind(store, kind, prefix)
        raise NotFoundError(f"no {kind} id starts with {prefix!r}{where}{hint}")
    if len(found) > 1:
        listed = ", ".join(found[:SHOWN]) + (", …" if len(found) > SHOWN else "")
        raise InvalidInput(
            f"{kind} id prefix {prefix!r} is ambiguous: it starts {listed}; type more of it"
        )
    return found[0]


async def _other_kind(store: Store, kind: str, prefix: str) -> str:
    """When ``prefix`` names one id of another kind (a run's id given where a job's is asked,
    found by a new-user trial): what it is, and the id that was meant, if one follows."""
    for other in ("run", "job", "checkpoint"):
        if other == kind:
            continue
        found = await store.ids_with_prefix(other, prefix, limit=2)
        if len(found) != 1:
            continue
        if other == "run" and kind == "job":
            run = await store.get_run(found[0])
            return f"; {prefix} is run {run.id}, of job {run.job_id}"
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


async def resolve_arguments(store: Store, args: Any, *, db_path: Path | str | None) -> None:
    """Replace every id argument of a parsed command by the full id it names."""
    for attribute, kind in ARGUMENT_KINDS:
        value = getattr(args, attribute, None)
        if isinstance(value, str):
            setattr(args, attribute, await resolve_id(store, kind, value, db_path=db_path))
