"""Rewinding files to a checkpoint (issue 11 point 3): content-addressed snapshots taken before
every approved ``write_file`` / ``edit_file``, and a restore that shows its diff first and
leaves files changed outside agent-tui alone unless told otherwise.

Recording: when the engine starts an approved file-writing call, the transaction that marks it
running also stores the file's previous bytes (or "no file") once by SHA-256 in ``blobs`` and a
``file_snapshots`` row naming them (``file_content`` reads them for the engine); the
transaction that records the call's result also records what it left there. A call is never
recorded as having started to write without the content it may have to put back.

Rewinding to checkpoint C: every file the job's calls wrote after C goes back to its content
before the first of those writes (a file that did not exist is removed). No checkpoint marks
the job's start (a checkpoint ends a step): rewinding to it (``plan_rewind_to_start``) puts
back every file the job's calls wrote, to its content before the job's first write. A file
whose current content is not what agent-tui last left there (edited by hand, by another
program, or a write that never reported back) is *changed outside*: it is listed and skipped
unless the caller includes it explicitly. Works after a crash and across restarts: everything
is in the database.
"""

from __future__ import annotations

import asyncio
import difflib
import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime.errors import PathOutsideWorkspace, ToolError
from runtime.fileio import write_bytes_atomically
from runtime.store.base import FileContent, FileSnapshot, Store
from runtime.tools.workspace import display_path, resolve_in_workspace

__all__ = [
    "FILE_WRITING_TOOLS",
    "FileChange",
    "RewindPlan",
    "applied_diff",
    "apply_rewind",
    "bytes_diff",
    "file_content",
    "plan_rewind",
    "plan_rewind_to_start",
]

FILE_WRITING_TOOLS = frozenset({"write_file", "edit_file"})
MAX_DIFF_LINES = 400


def _target(call_name: str, arguments: Mapping[str, Any], workspace: Path) -> Path | None:
    if call_name not in FILE_WRITING_TOOLS:
        return None
    given = arguments.get("path")
    if not isinstance(given, str) or not given:
        return None
    try:
        return resolve_in_workspace(workspace, given)
    except (PathOutsideWorkspace, ToolError):
        return None  # the tool refuses it too; nothing will be written


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None


def file_content(
    call_name: str, arguments: Mapping[str, Any], workspace: Path
) -> FileContent | None:
    """The current content of the file a write_file / edit_file call names (None for other
    tools, or a path the tool refuses: nothing will be written there). Blocking: run it in a
    thread."""
    path = _target(call_name, arguments, workspace)
    if path is None:
        return None
    return FileContent(path=display_path(workspace, path), data=_read(path))


# --- planning and applying a rewind -----------------------------------------------------------


@dataclass(frozen=True)
class FileChange:
    path: str
    """Relative to the workspace."""
    absolute: Path
    target: bytes | None
    """The content to restore (None: the file did not exist, so it is removed)."""
    current: bytes | None
    changed_outside: bool
    """The file is not what agent-tui last left there."""
    writes: int
    """How many recorded writes since the checkpoint this undoes."""
    at: str = "at the checkpoint"
    """Where the rewind goes, for the diff's label."""

    @property
    def action(self) -> str:
        if self.target is None:
            return "remove"
        return "create" if self.current is None else "restore"

    def diff(self, limit: int = MAX_DIFF_LINES) -> str:
        """A unified diff from the file now to what the rewind puts back."""
        return bytes_diff(
            self.current,
            self.target,
            self.path,
            before_label=f"{self.path} (now)",
            after_label=f"{self.path} ({self.at})",
            limit=limit,
        )


def bytes_diff(
    before: bytes | None,
    after: bytes | None,
    path: str,
    *,
    before_label: str,
    after_label: str,
    limit: int = MAX_DIFF_LINES,
) -> str:
    """A unified diff between two contents of a file (None: no file), cut at ``limit`` lines."""
    old, new = before or b"", after or b""
    if b"\0" in old or b"\0" in new:
        return f"Binary file {path}: {len(old)} bytes before, {len(new)} after\n"
    lines = list(
        difflib.unified_diff(
            old.decode("utf-8", errors="replace").splitlines(keepends=True),
            new.decode("utf-8", errors="replace").splitlines(keepends=True),
            fromfile=before_label if before is not None else "/dev/null",
            tofile=after_label if after is not None else "/dev/null",
        )
    )
    lines = [
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    ]
    if len(lines) > limit:
        lines = [*lines[:limit], f"… ({len(lines) - limit} more diff lines)\n"]
    return "".join(lines)


async def applied_diff(
    store: Store, tool_call_id: str, *, limit: int = MAX_DIFF_LINES
) -> str | None:
    """The diff an approved ``write_file``/``edit_file`` call applied, from the snapshots taken
    in the call's own transactions (before it ran, and what it left); None when the call has no
    complete snapshot (it never ran, or agent-tui stopped during the write)."""
    call = await store.get_tool_call(tool_call_id)
    snapshots = [
        s
        for s in await store.list_file_snapshots(call.job_id)
        if s.tool_call_id == tool_call_id and s.after_recorded
    ]
    parts: list[str] = []
    for snapshot in snapshots:
        before = (
            None if snapshot.before_sha256 is None else await _blob(store, snapshot.before_sha256)
        )
        after = None if snapshot.after_sha256 is None else await _blob(store, snapshot.after_sha256)
        shown = snapshot.path
        parts.append(
            bytes_diff(
                before,
                after,
                shown,
                before_label=f"a/{shown}",
                after_label=f"b/{shown}",
                limit=limit,
            )
        )
    return "".join(parts) if parts else None


async def _blob(store: Store, sha256: str) -> bytes:
    _, data = await store.get_blob(sha256)
    return data


@dataclass(frozen=True)
class RewindPlan:
    checkpoint_id: str | None
    """None: the job's start, before its first step."""
    job_id: str
    workspace: Path
    changes: list[FileChange] = field(default_factory=list)

    @property
    def safe(self) -> list[FileChange]:
        return [change for change in self.changes if not change.changed_outside]

    @property
    def changed_outside(self) -> list[FileChange]:
        return [change for change in self.changes if change.changed_outside]


def _sha(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


async def plan_rewind(store: Store, checkpoint_id: str) -> RewindPlan:
    """What rewinding the files of the checkpoint's job to it would change, file by file.
    Reads the workspace; changes nothing."""
    checkpoint = await store.get_checkpoint(checkpoint_id)
    order = await store.checkpoint_order(checkpoint_id)
    return await _plan(store, checkpoint.job_id, checkpoint_id, order)


async def plan_rewind_to_start(store: Store, job_id: str) -> RewindPlan:
    """What rewinding the files of job ``job_id`` to its start, before its first step, would
    change: every file its calls wrote, back to its content before the first of those writes
    (a file they created is removed). Reads the workspace; changes nothing."""
    return await _plan(store, job_id, None, None)


async def _plan(
    store: Store, job_id: str, checkpoint_id: str | None, order: int | None
) -> RewindPlan:
    """The writes of the job after checkpoint ``order`` (None: all of them), undone."""
    job = await store.get_job(job_id)
    workspace = Path(job.workspace)
    snapshots = await store.list_file_snapshots(job.id)
    latest: dict[str, FileSnapshot] = {}
    for snapshot in snapshots:
        latest[snapshot.path] = snapshot
    first_after: dict[str, FileSnapshot] = {}
    writes: dict[str, int] = {}
    for snapshot in snapshots:
        if order is None or snapshot.checkpoint_n >= order:
            first_after.setdefault(snapshot.path, snapshot)
            writes[snapshot.path] = writes.get(snapshot.path, 0) + 1
    changes: list[FileChange] = []
    for relative, first in first_after.items():
        try:
            absolute = resolve_in_workspace(workspace, relative)
        except (PathOutsideWorkspace, ToolError):
            continue  # the workspace changed shape (e.g. a symlink now leads out): leave it
        target = (
            None if first.before_sha256 is None else (await store.get_blob(first.before_sha256))[1]
        )
        current = await asyncio.to_thread(_read, absolute)
        if current == target:
            continue
        last = latest[relative]
        outside = not last.after_recorded or _sha(current) != last.after_sha256
        changes.append(
            FileChange(
                path=relative,
                absolute=absolute,
                target=target,
                current=current,
                changed_outside=outside,
                writes=writes[relative],
                at="at the job's start" if order is None else "at the checkpoint",
            )
        )
    return RewindPlan(
        checkpoint_id=checkpoint_id, job_id=job.id, workspace=workspace, changes=changes
    )


def _restore(change: FileChange) -> None:
    if change.target is None:
        try:
            os.remove(change.absolute)
        except FileNotFoundError:
            pass
        return
    write_bytes_atomically(change.absolute, change.target)


def apply_rewind(plan: RewindPlan, *, include_changed_outside: bool = False) -> list[FileChange]:
    """Restore the plan's files (those changed outside agent-tui only when asked); returns the
    changes made. A file that changed again since the plan was made is skipped."""
    done: list[FileChange] = []
    for change in plan.changes:
        if change.changed_outside and not include_changed_outside:
            continue
        if _read(change.absolute) != change.current:
            continue  # changed between planning and applying: plan again
        _restore(change)
        done.append(change)
    return done
