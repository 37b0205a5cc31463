"""The ``shell`` tool's sandbox: bubblewrap (``bwrap``) on Linux.

Inside the sandbox a command sees the whole filesystem read-only, except:

- the workspace folder, bound read-write at its own path;
- ``/tmp``, a private, empty, throwaway tmpfs (when the workspace lives under ``/tmp``, the
  workspace's parent folder is bound read-only on top of it, so ``..`` is read-only as
  everywhere else); ``/dev`` is a minimal device tree and ``/proc`` the sandbox's own;
- credentials in ``$HOME`` (``HIDDEN_HOME_PATHS``: ``~/.ssh``, ``~/.aws``,
  ``~/.config/agent-tui`` and a few other well-known ones), replaced by an empty folder or file.

It has no network (only its own loopback) unless ``[permissions] shell_network = true``; it runs
in its own pid namespace, so every process the command started dies when the command ends (no
background survivors) and when agent-tui dies (the shell tool runs bwrap under the supervisor of
``runtime.supervisor``: bwrap's own ``--die-with-parent`` holds only once its setup is done); all
capabilities are dropped (root inside cannot remount anything).

Where bwrap is missing or cannot start (not Linux, no user namespaces, a container that forbids
them) ``sandbox_status()`` says why, once per process; the shell then runs as before, unconfined,
and the approval policy asks before every ``shell`` call (``runtime.approvals``).
``AGENT_TUI_BWRAP`` names the bwrap program to use; set it to an empty string to turn the sandbox
off.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ENV_BWRAP",
    "HIDDEN_HOME_PATHS",
    "SandboxStatus",
    "bwrap_arguments",
    "describe_sandbox",
    "sandbox_status",
]

logger = logging.getLogger(__name__)

ENV_BWRAP = "AGENT_TUI_BWRAP"

HIDDEN_HOME_PATHS = (
    ".ssh",
    ".aws",
    ".config/agent-tui",
    ".gnupg",
    ".netrc",
    ".git-credentials",
    ".docker",
    ".kube",
    ".config/gh",
    ".pypirc",
)
"""Paths under ``$HOME`` a sandboxed command cannot read (each replaced by an empty one)."""

PROBE_TIMEOUT = 10.0


@dataclass(frozen=True)
class SandboxStatus:
    """Whether ``shell`` commands run confined, and in plain words why or why not."""

    available: bool
    program: str | None
    detail: str

    @property
    def notice(self) -> str | None:
        """The one line the UI shows when the shell is not confined (None when it is)."""
        if self.available:
            return None
        return f"shell is not sandboxed ({self.detail}): every shell call asks first"


_cached: dict[str, SandboxStatus] = {}


def describe_sandbox() -> str:
    """One line for ``doctor``: what confines ``shell`` commands here, or why nothing does."""
    status = sandbox_status()
    if status.available:
        return (
            f"on ({status.detail}): commands write only the workspace, see no credentials in "
            "HOME, have no network unless [permissions] shell_network = true, and die with "
            "the call"
        )
    return f"off: {status.detail}; shell commands run unconfined and every shell call asks first"


def _find_bwrap(environ: dict[str, str] | os._Environ[str]) -> str | None:
    configured = environ.get(ENV_BWRAP)
    if configured is not None:
        if not configured:
            return None
        return shutil.which(configured)
    return shutil.which("bwrap")


def sandbox_status(*, refresh: bool = False) -> SandboxStatus:
    """Probe bwrap once per process (per ``AGENT_TUI_BWRAP`` value): present, and able to
    start a sandbox with the options the shell uses?"""
    key = os.environ.get(ENV_BWRAP, "\0default")
    if not refresh and key in _cached:
        return _cached[key]
    status = _probe()
    _cached[key] = status
    if not status.available:
        logger.warning("shell sandbox unavailable: %s", status.detail)
    return status


def _probe() -> SandboxStatus:
    if not sys.platform.startswith("linux"):
        return SandboxStatus(False, None, f"bubblewrap needs Linux, this is {sys.platform}")
    if os.environ.get(ENV_BWRAP) == "":
        return SandboxStatus(False, None, f"turned off by {ENV_BWRAP}=''")
    program = _find_bwrap(os.environ)
    if program is None:
        wanted = os.environ.get(ENV_BWRAP) or "bwrap"
        return SandboxStatus(
            False, None, f"{wanted} not found; install bubblewrap (apt-get install bubblewrap)"
        )
    workspace = Path(os.path.realpath(os.getcwd()))
    arguments = bwrap_arguments(
        program, "true", workspace=workspace, home=None, network=False, probe=True
    )
    try:
        done = subprocess.run(
            arguments,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=PROBE_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return SandboxStatus(False, program, f"{program} cannot start: {exc}")
    if done.returncode != 0:
        reason = done.stderr.decode("utf-8", "replace").strip().splitlines()
        why = reason[-1] if reason else f"exit code {done.returncode}"
        return SandboxStatus(False, program, f"{program} cannot start a sandbox: {why}")
    version = _version(program)
    return SandboxStatus(True, program, version or program)


def _version(program: str) -> str | None:
    try:
        done = subprocess.run(
            [program, "--version"],
            capture_output=True,
            timeout=PROBE_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    text = done.stdout.decode("utf-8", "replace").strip()
    return text or None


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def bwrap_arguments(
    program: str,
    command: str,
    *,
    workspace: Path,
    home: Path | None,
    network: bool,
    probe: bool = False,
    info_fd: int | None = None,
) -> list[str]:
    """The bwrap command line that runs ``/bin/sh -c command`` confined to ``workspace``;
    with ``info_fd``, bwrap writes there, as JSON, the ids of the namespaces it made."""
    folder = os.path.realpath(workspace)
    arguments = [
        program,
        *(["--info-fd", str(info_fd)] if info_fd is not None else []),
        "--die-with-parent",
        "--unshare-all",
        *(["--share-net"] if network else []),
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
    ]
    if _inside(folder, "/tmp") and folder != "/tmp":
        parent = os.path.dirname(folder)
        if parent != "/tmp":
            arguments += ["--ro-bind", parent, parent]
    arguments += ["--bind", folder, folder]
    if home is not None and not probe:
        for relative in HIDDEN_HOME_PATHS:
            secret = os.path.realpath(os.path.join(home, relative))
            if not os.path.lexists(secret) or _inside(folder, secret):
                continue  # nothing to hide, or the person chose to work inside it
            if os.path.isdir(secret):
                arguments += ["--tmpfs", secret]
            else:
                arguments += ["--ro-bind", "/dev/null", secret]
    arguments += ["--chdir", folder, "/bin/sh", "-c", command]
    return arguments
