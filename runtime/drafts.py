"""Which unsent text a process may put back in its boxes (DESIGN §12: a quit or a crash loses
nothing typed).

A draft is kept per writer, the owner id of the process that typed it. A process restores its
own drafts, and those of writers that are gone (quit, crashed, recovered): a second live
agent-tui on the same database neither shows nor sends the half-typed text of the first. A
writer is gone when the owners table says it released its lease or was recovered, or when it
is provably gone (``runtime.owners``: its process is dead on this host; on another host, it
holds no live lease). A writer that never ran anything holds no lease: on this host its live
process keeps its drafts its own.

Standard library only at import: the TUI imports it before its first frame.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from runtime.owners import owner_gone

if TYPE_CHECKING:  # the TUI imports this before its first frame: no pydantic
    from runtime.store.base import WrittenDraft

__all__ = ["Restorable", "restorable"]


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
