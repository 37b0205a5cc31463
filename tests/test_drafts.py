"""Which drafts a process may put back in its boxes (``runtime.drafts``): its own, and those
of writers that are gone; never the half-typed text of another live agent-tui."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from runtime.drafts import restorable
from runtime.owners import new_owner_id, process_start
from runtime.store.base import WrittenDraft

HOST = socket.gethostname()


def _draft(
    writer: str,
    text: str,
    *,
    at: float,
    queued: tuple[str, ...] = (),
    released: bool = False,
    lease_live: bool = False,
) -> WrittenDraft:
    return WrittenDraft(
        writer=writer,
        text=text,
        queued=queued,
        updated_at=at,
        writer_released=released,
        writer_lease_live=lease_live,
    )


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=30)
    return child.pid


def test_a_writer_restores_its_own_draft_and_those_of_writers_that_are_gone() -> None:
    me = new_owner_id()
    pid = os.getpid()
    # Another agent-tui alive on this host that never ran anything (no lease): its own.
    alive_here = f"{HOST}:{pid}:{process_start(pid) or 'x'}-0ther000"
    crashed_here = f"{HOST}:{_dead_pid()}:x-crash000"
    quit_elsewhere = "other-host:5:1-qu1t0000"
    live_elsewhere = "other-host:6:1-l1ve0000"
    drafts = [
        _draft("", "from before drafts had writers", at=1),
        _draft(crashed_here, "typed, then kill -9", at=2, queued=("queued first",)),
        _draft(alive_here, "typed in the other window", at=3),
        _draft(quit_elsewhere, "typed, then ctrl+q", at=4, released=True),
        _draft(live_elsewhere, "typed on the other machine", at=5, lease_live=True),
        _draft(me, "mine", at=6),
    ]

    restored = restorable(drafts, writer=me)

    assert restored.own is not None and restored.own.text == "mine"
    assert restored.left_by == ["", crashed_here, quit_elsewhere]
    assert restored.queued == ["queued first"]
    assert restored.text == (
        "queued first\n\nfrom before drafts had writers\n\ntyped, then kill -9\n\n"
        "typed, then ctrl+q\n\nmine"
    )


def test_another_live_writers_draft_alone_restores_nothing() -> None:
    pid = os.getpid()
    alive_here = f"{HOST}:{pid}:{process_start(pid) or 'x'}-0ther000"
    restored = restorable([_draft(alive_here, "not yours", at=1)], writer=new_owner_id())
    assert (restored.own, restored.left, restored.text) == (None, (), "")
