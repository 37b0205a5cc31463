"""Commands that die with agent-tui: a small ``/bin/sh`` supervisor between agent-tui and a
command it runs unconfined (the ``shell`` tool without a sandbox, every hook, every stdio MCP
server).

The supervisor is started in a session (and process group) of its own with a parent-death
signal (``PR_SET_PDEATHSIG``, Linux): when agent-tui dies, even by ``kill -9``, the kernel sends
it SIGHUP and it kills its whole process group, the command and every child it started, so
none of them is left running as an orphan. While agent-tui lives, the supervisor only waits for
the command and exits with its status; the command keeps the supervisor's standard input,
output and error.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable

__all__ = ["group_alive", "parent_death_signal", "supervised_command", "supervised_shell"]

_PR_SET_PDEATHSIG = 1

_SUPERVISOR = (
    'trap "kill -KILL 0" HUP; exec 3<&0; /bin/sh -c "$1" <&3 3<&- & exec 3<&- 0<&-; wait $!'
)
"""A supervising shell that gets SIGHUP when agent-tui dies (parent-death signal) and then
kills its whole process group; otherwise it waits for the command and exits with its status.
The command gets the supervisor's standard input through fd 3: a non-interactive shell gives a
background command ``/dev/null`` instead, and a hook reads its event from standard input."""


def supervised_shell(command: str, *, name: str) -> list[str]:
    """The argv running ``/bin/sh -c command`` under the supervisor (``name`` is its ``$0``,
    what ``ps`` shows). Start it with ``start_new_session=True`` and
    ``preexec_fn=parent_death_signal()``."""
    return ["/bin/sh", "-c", _SUPERVISOR, name, command]


_COMMAND_SUPERVISOR = (
    'trap "kill -KILL 0" HUP; exec 3<&0; "$@" <&3 3<&- & '
    'trap "" TERM; exec 3<&- 0<&- >/dev/null 2>&1; wait $!; s=$?; '
)
"""The supervisor for a long-lived program spoken to through its standard streams. Unlike the
shell's, it hands the streams over whole: it keeps none of them open itself, so the program's
end of input and output is the program's own. It ignores SIGTERM, from after the program
started (which keeps the default), so a SIGTERM to the group stops the program while the
supervisor stays to wait for it."""

_AS_THE_PROGRAM_ENDED = (
    "case $s in 129|130|137|141|143) trap - HUP TERM; kill -$((s - 128)) $$;; esac; exit $s"
)
"""Ends the supervisor the way the program did, by the same signal for the usual ones (killed
by SIGKILL, not "code 137"), so the caller can tell."""


def supervised_command(argv: list[str], *, name: str, signals: bool = True) -> list[str]:
    """The argv running ``argv`` (no shell in between: the program found on ``PATH`` is run
    with these arguments) under the supervisor for a program spoken to through its standard
    streams (``name`` is its ``$0``). Start it as ``supervised_shell`` says. With ``signals``
    the supervisor ends by the signal that ended the program; without, it exits with the
    program's status as it is (bwrap's: the command's exit code, 128 + N when a signal N ended
    it, which a command's own ``exit 130`` gives too)."""
    ending = _AS_THE_PROGRAM_ENDED if signals else "exit $s"
    return ["/bin/sh", "-c", _COMMAND_SUPERVISOR + ending, name, *argv]


def parent_death_signal() -> Callable[[], None] | None:
    """A ``preexec_fn`` asking the kernel to send SIGHUP to the child when we die (Linux; None
    elsewhere).

    It also puts SIGHUP back to its default first: a signal ignored when a shell starts cannot
    be trapped, so under ``nohup`` (or a service manager that ignores SIGHUP) the supervisor's
    trap would be a silent no-op and the command would outlive agent-tui. Through libc, not
    ``signal.signal``: the child of a fork made on another thread is not Python's main thread."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
        set_handler = libc.signal
    except (OSError, AttributeError):
        return None
    set_handler.argtypes = (ctypes.c_int, ctypes.c_void_p)
    set_handler.restype = ctypes.c_void_p
    parent = os.getpid()

    def arm() -> None:
        set_handler(int(signal.SIGHUP), None)  # SIG_DFL
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGHUP), 0, 0, 0)
        if os.getppid() != parent:  # we died before the signal was armed
            os._exit(1)

    return arm


def group_alive(pgid: int) -> bool:
    """Whether any process of the group is still running (zombies do not count: they are dead
    and only wait for their parent, possibly init, to collect them)."""
    if sys.platform.startswith("linux") and os.path.isdir("/proc"):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as handle:
                    data = handle.read()
            except OSError:
                continue
            fields = data[data.rfind(b")") + 2 :].split()
            if len(fields) > 2 and fields[0] != b"Z" and int(fields[2]) == pgid:
                return True
        return False
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
