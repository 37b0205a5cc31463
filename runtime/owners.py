"""Whether the owner of a run is gone (DESIGN §4.4): the decision recovery acts on, and that the
read-only commands (``runs``, ``show``, ``doctor``) show without acting on it.

An owner is ``host:pid:start-nonce`` (``new_owner_id``). It is provably gone when it said so
(released, or recovered by another process, or it has no row at all), or when its lease ran out
and it runs on another host, or when it runs on this host and its process is dead or its pid now
names another process (whatever its lease says). Deciding reads only.

Standard library only, and ``socket`` and ``uuid`` only when used: ``agent-tui runs`` reads the
database without the runtime (``tui._cli.fast_runs``) and decides with this module too.
"""

from __future__ import annotations

import os
from pathlib import Path

TYPE_CHECKING = False  # not typing's: this module is on the light path of ``agent-tui runs``
if TYPE_CHECKING:
    from runtime.store.base import Store

__all__ = [
    "ACTIVE_STATES",
    "gone_owners",
    "new_owner_id",
    "owner_gone",
    "owner_process",
    "pid_alive",
    "process_start",
    "provably_gone",
]

ACTIVE_STATES = frozenset({"queued", "running"})
"""The states of a run that recovery changes when its owner is gone (an ``input_required`` run
waits for its answer whoever owns it)."""


def _hostname() -> str:
    import socket

    return socket.gethostname()


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (Linux), from the state on."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()


def process_start(pid: int) -> str | None:
    """When the process started (clock ticks since boot, Linux), to tell a reused pid apart."""
    fields = _stat_fields(pid)
    return fields[19] if fields is not None and len(fields) > 19 else None


def new_owner_id() -> str:
    """``host:pid:start-nonce``: recovery reads the host, pid and process start back."""
    import uuid

    pid = os.getpid()
    return f"{_hostname()}:{pid}:{process_start(pid) or 'x'}-{uuid.uuid4().hex[:8]}"


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid runs. A killed process whose parent has not collected it
    yet (a zombie: ``kill -9`` of a process whose parent is busy, or gone and not replaced by a
    reaping init) still answers signals, but runs nothing: it is dead."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    fields = _stat_fields(pid)
    return fields is None or not fields or fields[0] not in ("Z", "X")


def owner_process(owner_id: str) -> str | None:
    """Which process an owner is, as a person would look for it: ``pid 4242`` on this host,
    ``pid 4242 on HOST`` on another; None when the id does not say (not one of
    ``new_owner_id``'s)."""
    host, _, rest = owner_id.partition(":")
    pid_text = rest.partition(":")[0]
    if not pid_text.isdigit():
        return None
    return f"pid {pid_text}" if host == _hostname() else f"pid {pid_text} on {host}"


def provably_gone(owner_id: str, *, lease_live: bool) -> bool:
    """Whether the owner cannot be running any more. Another host's owner: when its lease ran
    out. An owner on this host: when its process is dead or its pid now names another process
    (whatever its lease says)."""
    host, _, rest = owner_id.partition(":")
    pid_text, _, nonce = rest.partition(":")
    if host != _hostname() or not pid_text.isdigit():
        return not lease_live
    pid = int(pid_text)
    if not pid_alive(pid):
        return True
    started = nonce.partition("-")[0]
    actual = process_start(pid)
    return started not in ("", "x") and actual is not None and started != actual


def owner_gone(owner_id: str, *, said_gone: bool, lease_live: bool) -> bool:
    """Whether an owner is gone, from its row: ``said_gone`` when it released its lease, was
    recovered, or has no row; ``lease_live`` when its lease has not run out."""
    return said_gone or provably_gone(owner_id, lease_live=lease_live)


async def gone_owners(store: Store, *, other_than: str | None = None) -> list[str]:
    """The owners (other than ``other_than``) that are provably gone and not recovered yet,
    sorted: the queued and running runs they name are those recovery changes when it next runs.
    Reads only: the owners of such runs whose lease is not live, and this host's live leases."""
    gone = [
        stale.owner_id
        for stale in await store.stale_owners()
        if stale.owner_id != other_than
        and owner_gone(stale.owner_id, said_gone=stale.released, lease_live=False)
    ]
    host = _hostname() + ":"
    gone += [
        owner
        for owner in await store.live_owners()
        if owner != other_than
        and owner.startswith(host)
        and owner_gone(owner, said_gone=False, lease_live=True)
    ]
    return sorted(set(gone))
