"""Files other than the database (settings, notes the agent writes, exports) are written
atomically: a temporary file in the same folder, flushed to disk, then renamed over the target.
A crash leaves the old file or the new one, never half of one."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


def write_text_atomically(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8, newlines as given) to ``path`` atomically, keeping the permission
    bits of an existing file."""
    write_bytes_atomically(path, text.encode("utf-8"))


def write_bytes_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically, keeping the permission bits of an existing file."""
    mode: int | None = None
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is None:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(temp_name, mode)
        os.replace(temp_name, path)
    except BaseException:
        try:
            os.unlink(temp_name)
        except OSError:
            pass
        raise


FileStamp = tuple[int, int, int] | None
"""A file's modification time, size and inode (None: not there): what changes when it is
written, whichever way."""


def file_stamp(path: Path) -> FileStamp:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_mtime_ns, info.st_size, info.st_ino)
