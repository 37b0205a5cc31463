"""SIGHUP: the terminal closed. agent-tui stops as on SIGTERM (the TUI quits as ctrl+q does, a
command stops its run), releasing its runs as interrupted, rather than ending on the spot with
them read "running (its process is gone)" until another agent-tui recovers them.

A terminal that hung up fails every write with EIO (and reads end at once): Textual's output
thread died on one and the quit then waited on it for ever (tried in tmux). So the standard
streams that were that terminal are first pointed at ``/dev/null``; a file or a pipe they write
to stays as it is."""

from __future__ import annotations

import os
import signal
import stat

__all__ = ["hangup_ignored", "let_go_of_a_closed_terminal"]


def hangup_ignored() -> bool:
    """Whether SIGHUP was set to be ignored before agent-tui started: ``nohup``, or a service
    manager whose reload sends it. Then a hangup is left ignored: the person asked for the
    process to outlive its terminal (a worker under ``nohup`` stopped when it closed)."""
    return signal.getsignal(signal.SIGHUP) is signal.SIG_IGN


def let_go_of_a_closed_terminal() -> None:
    """Point stdin, stdout and stderr at ``/dev/null`` where they are a terminal that hung up
    (a character device that no longer answers as a terminal). One still open (``kill -HUP``
    with the window there) is kept: then SIGHUP is as SIGTERM, the screen given back."""
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
    except OSError:
        return
    try:
        for fd in (0, 1, 2):
            try:
                closed = stat.S_ISCHR(os.fstat(fd).st_mode) and not os.isatty(fd)
            except OSError:
                continue
            if closed:
                os.dup2(devnull, fd)
    finally:
        os.close(devnull)
