"""Which unsent text a process may put back in its boxes (DESIGN §12: a quit or a crash loses
nothing typed).

A draft is kept per writer, the owner id of the process that typed it. A process restores its
own drafts, and those of writers that are gone (quit, crashed, recovered): a second live
agent-tui on the same database neither shows nor sends the half-typed text of the first. A
writer is gone when the owners table says it released its lease or was recovered, or when it
is provably gone (``runtime.owners``: its process is dead on this host; on another host, it
holds no live lease). A writer that never ran anything holds no lease: on this host its live
process keeps its drafts its own.

The last text typed wins: each save carries a revision (``draft_revision``, taken when the text
was taken from the box), and a store drops a save older than one it has written for the same
draft (``DraftRevisions``); the messages queued for a job are saved under the same rule, apart
from its text. Two saves running at once (two workers; one waiting for the write
lock on a thread while the next one wrote at once) put an older text back over a newer one,
and a restart showed it.

Standard library only at import: the TUI imports it before its first frame.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from runtime.owners import owner_gone

if TYPE_CHECKING:  # the TUI imports this before its first frame: no pydantic
    from runtime.store.base import WrittenDraft

__all__ = ["DraftRevisions", "Restorable", "draft_revision", "restorable"]

_revisions = itertools.count(1)


def draft_revision() -> int:
    """A number greater than every one given before in this process: take it when the text to
    save is taken from the box, so saves compare in the order the text was typed."""
    return next(_revisions)


class DraftRevisions:
    """The newest revision a store object wrote of each draft: what it is (composer text,
    queue, answer), its key (job or request) and its writer.

    Kept in memory: a writer is one process (its owner id), so its drafts are written by this
    process only, and a new process is a new writer. A blank save deletes the row, so the row
    could not carry the revision that makes a late older save stale."""

    def __init__(self) -> None:
        self._newest: dict[tuple[str, str, str], int] = {}
        self._locks: dict[tuple[str, str, str], asyncio.Lock] = {}

    @asynccontextmanager
    async def turn(self, draft: tuple[str, str, str], revision: int) -> AsyncIterator[bool]:
        """Held while one save of ``draft`` is written (so saves of it commit one at a time,
        on any number of connections); yields whether ``revision`` may be written: not older
        than the newest written. Recorded once the block ends without an error."""
        lock = self._locks.setdefault(draft, asyncio.Lock())
        async with lock:
            newest = self._newest.get(draft)
            fresh = newest is None or revision >= newest
            yield fresh
            if fresh:
                self._newest[draft] = revision


@dataclass(frozen=True)
class Restorable:
    """What a writer may put back: its own draft, and the drafts of writers that are gone."""

    own: WrittenDraft | None
    left: tuple[WrittenDraft, ...]
    """Drafts left by writers that are gone, oldest first: restored, they are replaced."""

    @property
    def left_by(self) -> list[str]:
        """The writers whose drafts ``text`` takes in (to delete once it is saved as ours)."""
        return [draft.writer for draft in self.left]

    @property
    def queued(self) -> list[str]:
        """The messages gone writers had queued for the job (never sent by themselves after a
        restart: they come back in the box, for the person to send)."""
        return [text for draft in self.left for text in draft.queued]

    @property
    def text(self) -> str:
        """All of it as one text for the box: the queued messages, the texts left by gone
        writers, then this writer's own."""
        parts = [*self.queued, *(draft.text for draft in self.left)]
        if self.own is not None:
            parts.append(self.own.text)
        return "\n\n".join(part for part in parts if part.strip())


def restorable(drafts: Sequence[WrittenDraft], *, writer: str) -> Restorable:
    """Split ``drafts`` (one item's, any writers') into ``writer``'s own and those it may
    restore; the drafts of other live writers are theirs and left out."""
    own = next((draft for draft in drafts if draft.writer == writer), None)
    left = tuple(
        draft
        for draft in drafts
        if draft.writer != writer
        and owner_gone(
            draft.writer, said_gone=draft.writer_released, lease_live=draft.writer_lease_live
        )
    )
    return Restorable(own=own, left=left)
