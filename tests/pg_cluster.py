"""A throwaway PostgreSQL cluster for tests: ``initdb`` + ``pg_ctl`` in a temporary folder.

PostgreSQL refuses to run as root, so when the tests run as root (CI does) the cluster is
created and started as an unprivileged user (``postgres`` when it exists, else ``nobody``). The
server listens on loopback only, on a free port, with fsync off (a test cluster is disposable).
``find_pg_bin`` says why it cannot be had, so tests skip with that reason and nothing else.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PgCluster", "find_pg_bin", "running_cluster", "shared_cluster"]

USER = "agent_tui"


def find_pg_bin() -> tuple[Path | None, str]:
    """The folder holding ``initdb`` and ``pg_ctl``, or None and why not."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(os.path.realpath(found)).parent, ""
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (candidate / "initdb").exists() and (candidate / "pg_ctl").exists():
            return candidate, ""
    return None, "PostgreSQL server binaries (initdb, pg_ctl) are not installed"


def _unprivileged() -> pwd.struct_passwd | None:
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise RuntimeError("running as root with neither a 'postgres' nor a 'nobody' user")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class PgCluster:
    bin_dir: Path
    data_dir: Path
    port: int
    options: str = ""
    """The server options it was started with (``start`` after ``stop`` uses them again)."""

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def stop(self) -> None:
        """Stop the server (fast: clients are disconnected), as a restart or an outage does."""
        _run(
            [str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir), "-m", "fast", "-w", "stop"],
            _unprivileged(),
            timeout=60,
        )

    def start(self) -> None:
        """Start the server again on the same port, with the same options."""
        _pg_ctl_start(self.bin_dir, self.data_dir, self.options, _unprivileged())


def _run(args: list[str], user: pwd.struct_passwd | None, *, timeout: float) -> None:
    def demote() -> None:
        if user is not None:
            os.setgid(user.pw_gid)
            os.setuid(user.pw_uid)

    completed = subprocess.run(
        args,
        preexec_fn=demote if user is not None else None,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"},
        cwd="/",
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(
            f"{Path(args[0]).name} failed ({completed.returncode}): "
            f"{(completed.stderr or completed.stdout).strip()[-2000:]}"
        )


def _pg_ctl_start(
    bin_dir: Path, data_dir: Path, options: str, user: pwd.struct_passwd | None
) -> None:
    _run(
        [
            str(bin_dir / "pg_ctl"),
            "-D",
            str(data_dir),
            "-o",
            options,
            "-l",
            str(data_dir.parent / "server.log"),
            "-w",
            "-t",
            "120",
            "start",
        ],
        user,
        timeout=150,
    )


@contextlib.contextmanager
def running_cluster() -> Iterator[PgCluster]:
    bin_dir, why = find_pg_bin()
    if bin_dir is None:
        raise RuntimeError(why)
    user = _unprivileged()
    root = Path(tempfile.mkdtemp(prefix="agent-tui-pg-"))
    data_dir = root / "data"
    try:
        if user is not None:
            os.chown(root, user.pw_uid, user.pw_gid)
        _run(
            [
                str(bin_dir / "initdb"),
                "-D",
                str(data_dir),
                "-U",
                USER,
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
            user,
            timeout=120,
        )
        port = _free_port()
        options = (
            f"-p {port} -c listen_addresses=127.0.0.1 -k {root} -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        _pg_ctl_start(bin_dir, data_dir, options, user)
        try:
            yield PgCluster(bin_dir=bin_dir, data_dir=data_dir, port=port, options=options)
        finally:
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                _run(
                    [str(bin_dir / "pg_ctl"), "-D", str(data_dir), "-m", "immediate", "-w", "stop"],
                    user,
                    timeout=60,
                )
    finally:
        shutil.rmtree(root, ignore_errors=True)


_shared: PgCluster | None = None
_shared_stack = contextlib.ExitStack()


def shared_cluster() -> PgCluster:
    """One cluster for the whole test process, started on first use and stopped at exit (the
    session fixture and the store backends, which hypothesis runs outside fixtures, share it)."""
    global _shared
    if _shared is None:
        import atexit

        _shared = _shared_stack.enter_context(running_cluster())
        atexit.register(_shared_stack.close)
    return _shared
