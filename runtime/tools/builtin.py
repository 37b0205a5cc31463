"""The built-in tools (DESIGN §9): files of the workspace, text search, edits, and ``ask_user``.

Every path goes through ``resolve_in_workspace``; a failure the model should see is a
``ToolError`` with a message that says what to do instead. Each tool's arguments are a pydantic
model (``ARGUMENTS``, see ``runtime.tools.arguments``): the schema the model is shown comes from
it, and the engine checks every call against it (``validate_arguments``) before ``run``, which
trusts their types.
"""

from __future__ import annotations

import asyncio
import difflib
import fnmatch
import json
import os
import re
import stat
import threading
from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import Field

from runtime.errors import ToolError
from runtime.fileio import write_text_atomically
from runtime.images import (
    MAX_IMAGE_BYTES,
    ToolImage,
    describe_image,
    image_size,
    sniff_media_type,
)
from runtime.locations import exports_dir
from runtime.providers.base import ToolSpec
from runtime.tools.arguments import ToolArguments, argument_problems, schema_of
from runtime.tools.base import ApprovalDefault, Tool, ToolContext, ToolOutput
from runtime.tools.workspace import display_path, resolve_in_workspace

__all__ = [
    "ASK_USER_DESCRIPTION",
    "ASK_USER_NAME",
    "ASK_USER_SCHEMA",
    "ASK_USER_SPEC",
    "AskUserTool",
    "EditFileTool",
    "ListDirTool",
    "ReadFileTool",
    "SearchTool",
    "WriteFileTool",
    "builtin_tools",
    "validate_arguments",
]

MAX_TEXT_FILE_BYTES = 10 * 1024 * 1024
"""Larger files are refused by read_file / edit_file (use search or shell to look inside)."""
MAX_SEARCH_FILE_BYTES = 2 * 1024 * 1024
"""Larger files are searched line by line on a thread (a log read_file refuses), not read
whole on the event loop."""
MAX_SEARCH_LARGE_BYTES = 1024 * 1024 * 1024
"""Search skips larger files, and names them."""
MAX_SEARCH_FILES = 20_000
MAX_OUTPUT_CHARS = 100_000
"""What one tool result may carry back to the model."""
MAX_LINE_CHARS = 2_000
MAX_DETAIL_CHARS = 200_000
"""How much of a diff an approval prompt carries."""
BINARY_SNIFF_BYTES = 8192

SKIPPED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "node_modules",
        "__pycache__",
        ".venv",
        "venv",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
        ".nox",
        ".idea",
        ".DS_Store",
    }
)
"""Folders a recursive listing or a search does not descend into (version control, caches,
virtual environments and installed packages)."""


# --- helpers --------------------------------------------------------------------------------


def _string(arguments: dict[str, Any], key: str, default: str = "") -> str:
    value = arguments.get(key, default)
    return value if isinstance(value, str) else default


def _int(arguments: dict[str, Any], key: str, default: int) -> int:
    value = arguments.get(key, default)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _bool(arguments: dict[str, Any], key: str, default: bool) -> bool:
    value = arguments.get(key, default)
    return value if isinstance(value, bool) else default


def _looks_binary(head: bytes) -> bool:
    return b"\x00" in head[:BINARY_SNIFF_BYTES]


def _read_text(path: Path, shown: str) -> str:
    """The text of a UTF-8 file, or a ToolError saying why it cannot be read as text."""
    _file_info(path, shown, limit=MAX_TEXT_FILE_BYTES)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ToolError(f"{shown}: cannot read ({exc.strerror})") from None
    if _looks_binary(data):
        raise ToolError(f"{shown} is a binary file, not text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{shown} is not UTF-8 text (it may be binary)") from None


READ_ON_LOOP_BYTES = 256 * 1024
"""``read_file`` reads a regular file up to this size on the event loop (as cheap as the
``lstat`` calls that resolved its path); a larger one on a thread."""


def _file_info(
    path: Path, shown: str, *, limit: int = max(MAX_IMAGE_BYTES, MAX_TEXT_FILE_BYTES)
) -> os.stat_result:
    """The ``stat`` of a regular file of at most ``limit`` bytes that may be read (by default
    what ``read_file`` reads: an image or a text), or a ToolError saying why not. Nothing but a
    regular file is ever opened (a FIFO would block, a device may act)."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise ToolError(f"{shown}: no such file") from None
    except OSError as exc:
        raise ToolError(f"{shown}: cannot read ({exc.strerror})") from None
    if stat.S_ISDIR(info.st_mode):
        raise ToolError(f"{shown} is a folder, not a file: use list_dir")
    if not stat.S_ISREG(info.st_mode):
        raise ToolError(f"{shown} is not a regular file")
    if info.st_size > limit:
        raise ToolError(
            f"{shown} is too large to read ({info.st_size:,} bytes; the limit is "
            f"{limit:,}): use search to find the lines you need"
        )
    return info


def _read_image_or_text(
    path: Path, shown: str, *, checked: bool = False
) -> tuple[ToolImage | None, str]:
    """For ``read_file``: the file as an image for the model (PNG, JPEG, GIF, WebP within the
    size limit), or else its UTF-8 text; a ToolError saying why it can be neither. One open and
    one read: the file is opened without waiting (``O_NONBLOCK``) and read only if what was
    opened is still a regular file. ``checked``: ``_file_info`` was asked just before."""
    if not checked:
        _file_info(path, shown)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise ToolError(f"{shown} is not a regular file")
            data = _read_to_end(fd, info.st_size)
        finally:
            os.close(fd)
    except FileNotFoundError:
        raise ToolError(f"{shown}: no such file") from None
    except OSError as exc:
        raise ToolError(f"{shown}: cannot read ({exc.strerror})") from None
    if len(data) <= MAX_IMAGE_BYTES:
        kind = sniff_media_type(data[:16])
        if kind is not None:
            return ToolImage(data=data, media_type=kind), ""
    if len(data) > MAX_TEXT_FILE_BYTES:
        raise ToolError(
            f"{shown} is too large to read ({len(data):,} bytes; the limit is "
            f"{MAX_TEXT_FILE_BYTES:,}): use search to find the lines you need"
        )
    if _looks_binary(data):
        raise ToolError(f"{shown} is a binary file, not text")
    try:
        return None, data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{shown} is not UTF-8 text (it may be binary)") from None


def _read_to_end(fd: int, size: int) -> bytes:
    """What is left to read of the open file ``fd`` (``size`` bytes when it stays as it was
    looked at): read directly, without a buffered file object around it (which took half of
    a small file's read)."""
    chunks: list[bytes] = []
    wanted = size + 1  # one more: the end is seen at once unless the file grew
    while chunk := os.read(fd, wanted):
        chunks.append(chunk)
        wanted = 64 * 1024
    return b"".join(chunks)


def _clip_line(line: str, limit: int = MAX_LINE_CHARS) -> str:
    if len(line) <= limit:
        return line
    return f"{line[:limit]}… [{len(line) - limit:,} more characters]"


def _numbered_lines(
    lines: list[str], offset: int, limit: int, *, text_chars: int
) -> tuple[list[str], int]:
    """``read_file``'s lines from ``offset`` (1-based), at most ``limit``, numbered and each
    clipped, as many as fit in ``MAX_OUTPUT_CHARS`` (at least one); and the last one's number.
    ``text_chars``: the length of the text ``lines`` were split from."""
    end = min(len(lines), offset + limit - 1)
    # A numbered line takes at most 27 characters more than the line (its number, 6 wide
    # below a million lines, and a tab; at most 20 more for a clipped line's note), and a
    # newline joins it to the next: when the whole text fits with all of that, no line can
    # be cut, and the lines are made at once.
    if text_chars + 28 * len(lines) <= MAX_OUTPUT_CHARS:
        window = lines[offset - 1 : end]
        if text_chars > MAX_LINE_CHARS:
            window = [_clip_line(line) for line in window]
        # str.rjust: what the f-string's ``>6`` does, at half its cost.
        numbered = [str(n).rjust(6) + "\t" + line for n, line in enumerate(window, offset)]
        return numbered, end
    out: list[str] = []
    size = 0
    last = offset - 1
    for number in range(offset, end + 1):
        line = f"{number:>6}\t{_clip_line(lines[number - 1])}"
        if size + len(line) > MAX_OUTPUT_CHARS and out:
            break
        out.append(line)
        size += len(line) + 1
        last = number
    return out, last


def _unified_diff(old: str, new: str, shown: str, *, new_file: bool) -> str:
    lines = difflib.unified_diff(
        old.splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile="/dev/null" if new_file else f"a/{shown}",
        tofile=f"b/{shown}",
    )
    parts: list[str] = []
    for line in lines:
        parts.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    diff = "".join(parts)
    if len(diff) > MAX_DETAIL_CHARS:
        omitted = len(diff) - MAX_DETAIL_CHARS
        diff = diff[:MAX_DETAIL_CHARS] + f"\n… [{omitted:,} more characters of diff]\n"
    return diff


def _line_count(text: str) -> int:
    return text.count("\n") + (0 if text.endswith("\n") or not text else 1)


class _BuiltinTool:
    """Shared plumbing: the attributes of the ``Tool`` protocol and an empty approval detail."""

    name: str
    description: str
    ARGUMENTS: ClassVar[type[ToolArguments]]
    """The arguments' model: the schema shown to the model and the check of its calls."""
    read_only: bool = False
    approval_default: ApprovalDefault = "ask"

    def __init__(self) -> None:
        # Each instance owns its schema, so a caller that edits one cannot change another's.
        self.input_schema: dict[str, Any] = schema_of(self.ARGUMENTS)
        self.arguments_model: type[ToolArguments] = self.ARGUMENTS

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        raise NotImplementedError

    def approval_detail(self, arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        return {}

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name, description=self.description, input_schema=self.input_schema
        )


# --- list_dir -------------------------------------------------------------------------------


class ListDirArguments(ToolArguments):
    path: str = Field(
        ".", description="Folder to list, relative to the workspace root. Default: '.'"
    )
    recursive: bool = Field(
        False, description="List every entry below the folder, not only its children."
    )
    max_entries: int = Field(
        500, ge=1, le=5000, description="Stop after this many entries. Default: 500."
    )


class ListDirTool(_BuiltinTool):
    name = "list_dir"
    description = (
        "List the entries of a folder of the workspace. Folders end with '/', files show their "
        "size, symlinks show their target. With recursive=true the whole tree below is listed "
        "(version-control, cache and virtual-environment folders are not descended into)."
    )
    ARGUMENTS = ListDirArguments
    read_only = True
    approval_default: ApprovalDefault = "allow"

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        given = _string(arguments, "path", ".") or "."
        recursive = _bool(arguments, "recursive", False)
        max_entries = _int(arguments, "max_entries", 500)
        folder = resolve_in_workspace(ctx.workspace, given)
        shown = display_path(ctx.workspace, folder)
        if not folder.exists():
            raise ToolError(f"{shown}: no such folder")
        if not folder.is_dir():
            raise ToolError(f"{shown} is a file, not a folder: use read_file")
        entries: list[str] = []
        truncated = False
        exports = str(exports_dir(Path(os.path.realpath(ctx.workspace))))

        def visit(directory: Path, prefix: str) -> None:
            nonlocal truncated
            try:
                children = sorted(os.scandir(directory), key=lambda e: e.name)
            except OSError as exc:
                entries.append(f"{prefix}  [cannot list: {exc.strerror}]")
                return
            for child in children:
                if len(entries) >= max_entries:
                    truncated = True
                    return
                relative = f"{prefix}{child.name}"
                if child.is_symlink():
                    try:
                        target = os.readlink(child.path)
                    except OSError:
                        target = "?"
                    entries.append(f"{relative} -> {target}")
                elif child.is_dir(follow_symlinks=False):
                    entries.append(f"{relative}/")
                    if recursive and child.name not in SKIPPED_DIRS and child.path != exports:
                        visit(Path(child.path), f"{relative}/")
                        if truncated:
                            return
                else:
                    try:
                        size = child.stat(follow_symlinks=False).st_size
                    except OSError:
                        size = 0
                    entries.append(f"{relative}  ({size:,} bytes)")

        await asyncio.to_thread(visit, folder, "")
        count = "1 entry" if len(entries) == 1 else f"{len(entries)} entries"
        header = f"{shown}/ ({count}{', truncated' if truncated else ''})"
        if not entries:
            header = f"{shown}/ is empty"
        body = "\n".join([header, *entries])
        if truncated:
            body += f"\n… more entries not shown (raise max_entries above {max_entries})"
        return ToolOutput(
            content=body,
            structured={"path": shown, "entries": entries, "truncated": truncated},
        )


# --- read_file ------------------------------------------------------------------------------


class ReadFileArguments(ToolArguments):
    path: str = Field(min_length=1, description="File to read, relative to the workspace root.")
    offset: int = Field(1, ge=1, description="First line to read (1-based). Default: 1.")
    limit: int = Field(2000, ge=1, le=20000, description="How many lines to read. Default: 2000.")


class ReadFileTool(_BuiltinTool):
    name = "read_file"
    description = (
        "Read a UTF-8 text file of the workspace. Lines come back numbered ('   12\\t...'); "
        "the numbers are not part of the file. Use offset and limit to read part of a long "
        "file. A PNG, JPEG, GIF or WebP image (up to 5 MB) comes back as an image you see. "
        "Other binary files and files over 10 MB are refused."
    )
    ARGUMENTS = ReadFileArguments
    read_only = True
    approval_default: ApprovalDefault = "allow"

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        path = resolve_in_workspace(ctx.workspace, _string(arguments, "path"))
        shown = display_path(ctx.workspace, path)
        offset = _int(arguments, "offset", 1)
        limit = _int(arguments, "limit", 2000)
        if _file_info(path, shown).st_size <= READ_ON_LOOP_BYTES:
            image, text = _read_image_or_text(path, shown, checked=True)
        else:
            image, text = await asyncio.to_thread(_read_image_or_text, path, shown)
        if image is not None:
            label = describe_image(image.media_type, len(image.data), image_size(image.data))
            return ToolOutput(
                content=f"{shown}: {label}",
                structured={"path": shown, "media_type": image.media_type, "size": len(image.data)},
                images=(image,),
            )
        lines = text.splitlines()
        total = len(lines)
        if total == 0:
            return ToolOutput(
                content=f"{shown} is empty",
                structured={"path": shown, "total_lines": 0},
            )
        if offset > total:
            raise ToolError(f"{shown} has {total} lines; offset {offset} is past its end")
        out, last = _numbered_lines(lines, offset, limit, text_chars=len(text))
        content = "\n".join(out)
        if last < total:
            content += f"\n[lines {offset}-{last} of {total}; read on with offset={last + 1}]"
        return ToolOutput(
            content=content,
            structured={
                "path": shown,
                "first_line": offset,
                "last_line": last,
                "total_lines": total,
            },
        )


# --- search ---------------------------------------------------------------------------------


def _glob_matches(glob: str, relative: str) -> bool:
    if "/" not in glob:
        return fnmatch.fnmatchcase(relative.rsplit("/", 1)[-1], glob)
    # fnmatch's '*' already crosses '/', so '**/' may also match nothing at all.
    variants = {glob, glob.replace("/**/", "/"), glob.removeprefix("**/")}
    return any(fnmatch.fnmatchcase(relative, variant) for variant in variants)


def _candidate_files(root: Path, workspace: Path, glob: str | None) -> tuple[list[Path], bool]:
    """Files under ``root`` a search looks at, in a stable order, and whether the list was cut."""
    workspace_real = Path(os.path.realpath(workspace))
    if root.is_file():
        return [root], False
    found: list[Path] = []
    exports = exports_dir(workspace_real)
    for directory, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(
            d for d in dirnames if d not in SKIPPED_DIRS and Path(directory, d) != exports
        )
        for filename in sorted(filenames):
            path = Path(directory, filename)
            if path.is_symlink():
                real = Path(os.path.realpath(path))
                if not (real == workspace_real or workspace_real in real.parents):
                    continue
            if glob is not None:
                relative = path.relative_to(root).as_posix()
                if not _glob_matches(glob, relative):
                    continue
            found.append(path)
            if len(found) >= MAX_SEARCH_FILES:
                return found, True
    return found, False


class SearchArguments(ToolArguments):
    pattern: str = Field(
        min_length=1,
        description="Text to look for (or a regular expression when regex is true).",
    )
    regex: bool = Field(
        False, description="Treat pattern as a Python regular expression. Default: false."
    )
    path: str = Field(
        ".",
        description="Folder (or single file) to search, relative to the workspace. Default: '.'",
    )
    glob: str | None = Field(
        None,
        min_length=1,
        description="Only files whose name (or path below `path`, when the glob has '/') "
        "matches this glob, e.g. '*.py' or 'src/**/*.ts'.",
    )
    ignore_case: bool = Field(False, description="Match without regard to case. Default: false.")
    max_results: int = Field(
        200, ge=1, le=2000, description="Stop after this many matching lines. Default: 200."
    )


class SearchTool(_BuiltinTool):
    name = "search"
    description = (
        "Search the text files of the workspace for a string (or a Python regular expression "
        "with regex=true). Returns 'path:line: text' for each matching line. Large text files "
        "(logs) are searched too, up to 1 GB; binary files and version-control, cache and "
        "virtual-environment folders are skipped."
    )
    ARGUMENTS = SearchArguments
    read_only = True
    approval_default: ApprovalDefault = "allow"

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        pattern_text = _string(arguments, "pattern")
        flags = re.IGNORECASE if _bool(arguments, "ignore_case", False) else 0
        if _bool(arguments, "regex", False):
            try:
                pattern = re.compile(pattern_text, flags)
            except re.error as exc:
                raise ToolError(f"invalid regular expression {pattern_text!r}: {exc}") from None
        else:
            pattern = re.compile(re.escape(pattern_text), flags)
        glob = arguments.get("glob") if isinstance(arguments.get("glob"), str) else None
        max_results = _int(arguments, "max_results", 200)
        root = resolve_in_workspace(ctx.workspace, _string(arguments, "path", ".") or ".")
        shown_root = display_path(ctx.workspace, root)
        if not root.exists():
            raise ToolError(f"{shown_root}: no such file or folder")
        files, files_cut = await asyncio.to_thread(_candidate_files, root, ctx.workspace, glob)
        total = len(files)
        ctx.progress(0, total, f"searching {total} files")
        results: list[str] = []
        matched_files = 0
        scanned = 0
        too_large: list[str] = []
        truncated = False
        for index, path in enumerate(files, start=1):
            shown = display_path(ctx.workspace, path)
            budget = max_results - len(results)
            try:
                size = path.stat().st_size
            except OSError:
                continue
            if size > MAX_SEARCH_LARGE_BYTES:
                too_large.append(shown)
                continue
            if size > MAX_SEARCH_FILE_BYTES:
                ctx.progress(index - 1, total, f"{shown} ({size / 1024 / 1024:,.0f} MB)")
                hits = await _scan_large(path, shown, pattern, budget)
            else:
                hits = self._scan(path, shown, pattern, budget)
            if hits is not None:
                scanned += 1
                if hits:
                    matched_files += 1
                    results.extend(hits)
            ctx.progress(index, total, shown)
            if len(results) >= max_results:
                truncated = True
                break
            # One file at a time on the loop: give way so a cancel lands promptly.
            await asyncio.sleep(0)
        what = repr(pattern_text) + (" (regex)" if _bool(arguments, "regex", False) else "")
        if not results:
            summary = f"no matches for {what} in {_files(scanned)}"
        else:
            lines = f"{len(results)} matching line{'s' if len(results) != 1 else ''}"
            summary = f"{lines} in {_files(matched_files)} (searched {_files(scanned)})"
        if too_large:
            summary += f"; skipped (over 1 GB): {', '.join(too_large[:5])}"
            summary += f" and {len(too_large) - 5} more" if len(too_large) > 5 else ""
        if truncated:
            summary += f"; stopped at max_results={max_results}"
        if files_cut:
            summary += f"; only the first {MAX_SEARCH_FILES:,} files were searched"
        body = "\n".join([*results, summary]) if results else summary
        if len(body) > MAX_OUTPUT_CHARS:
            body = body[:MAX_OUTPUT_CHARS] + "\n… [output cut; narrow the search]\n" + summary
        return ToolOutput(
            content=body,
            structured={
                "matches": len(results),
                "files_matched": matched_files,
                "files_searched": scanned,
                "truncated": truncated or files_cut,
            },
        )

    @staticmethod
    def _scan(path: Path, shown: str, pattern: re.Pattern[str], budget: int) -> list[str] | None:
        """Matching lines of one file, or None when it is skipped (binary, unreadable)."""
        try:
            data = path.read_bytes()
        except OSError:
            return None
        if _looks_binary(data):
            return None
        text = data.decode("utf-8", errors="replace")
        hits: list[str] = []
        for number, line in enumerate(text.splitlines(), start=1):
            if pattern.search(line):
                hits.append(f"{shown}:{number}: {_clip_line(line.strip(), 300)}")
                if len(hits) >= budget:
                    break
        return hits


def _files(count: int) -> str:
    return f"{count} file" if count == 1 else f"{count} files"


async def _scan_large(
    path: Path, shown: str, pattern: re.Pattern[str], budget: int
) -> list[str] | None:
    """``SearchTool._scan`` for a file too large to read whole: line by line on a thread, which
    stops soon after the call is cancelled."""
    stop = threading.Event()

    def scan() -> list[str] | None:
        hits: list[str] = []
        try:
            with open(path, "rb") as handle:
                if _looks_binary(handle.read(BINARY_SNIFF_BYTES)):
                    return None
                handle.seek(0)
                for number, raw in enumerate(handle, start=1):
                    if number % 10_000 == 0 and stop.is_set():
                        break
                    line = raw.decode("utf-8", errors="replace")
                    if pattern.search(line):
                        hits.append(f"{shown}:{number}: {_clip_line(line.strip(), 300)}")
                        if len(hits) >= budget:
                            break
        except OSError:
            return None
        return hits

    try:
        return await asyncio.to_thread(scan)
    finally:
        stop.set()


# --- write_file / edit_file -----------------------------------------------------------------


def _current_text(path: Path, shown: str) -> str | None:
    """The file's text, or None when it does not exist yet."""
    if not path.exists():
        return None
    return _read_text(path, shown)


class WriteFileArguments(ToolArguments):
    path: str = Field(min_length=1, description="File to write, relative to the workspace root.")
    content: str = Field(description="The complete new content of the file.")


class WriteFileTool(_BuiltinTool):
    name = "write_file"
    description = (
        "Create a file of the workspace or replace its whole content. Missing parent folders "
        "are created. Prefer edit_file to change part of an existing file."
    )
    ARGUMENTS = WriteFileArguments
    read_only = False
    approval_default: ApprovalDefault = "ask"

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        path = resolve_in_workspace(ctx.workspace, _string(arguments, "path"))
        shown = display_path(ctx.workspace, path)
        content = _string(arguments, "content")
        if path.is_dir():
            raise ToolError(f"{shown} is a folder; give a file path")
        created = not path.exists()
        try:
            await asyncio.to_thread(write_text_atomically, path, content)
        except OSError as exc:
            raise ToolError(f"cannot write {shown}: {exc.strerror or exc}") from None
        size = len(content.encode("utf-8"))
        verb = "created" if created else "updated"
        return ToolOutput(
            content=f"{verb} {shown} ({_line_count(content)} lines, {size:,} bytes)",
            structured={"path": shown, "created": created, "bytes": size},
        )

    def approval_detail(self, arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        given = _string(arguments, "path")
        content = _string(arguments, "content")
        try:
            path = resolve_in_workspace(ctx.workspace, given)
            shown = display_path(ctx.workspace, path)
            old = _current_text(path, shown)
        except ToolError as exc:
            return {"path": given, "error": exc.message}
        if old is None:
            return {
                "path": shown,
                "new_file": True,
                "content": content,
                "diff": _unified_diff("", content, shown, new_file=True),
            }
        return {
            "path": shown,
            "new_file": False,
            "diff": _unified_diff(old, content, shown, new_file=False),
        }


def _apply_edit(text: str, old: str, new: str, *, replace_all: bool, shown: str) -> tuple[str, int]:
    """The edited text and how many replacements were made."""
    if not old:
        raise ToolError("old_string is empty: give the exact text to replace")
    if old == new:
        raise ToolError("old_string and new_string are the same: nothing would change")
    count = text.count(old)
    if count == 0 and "\r\n" in text and "\n" in old and "\r\n" not in old:
        # The file has Windows line endings; the model writes plain newlines.
        old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
        count = text.count(old)
    if count == 0:
        raise ToolError(
            f"old_string was not found in {shown}: read the file and copy the exact text, "
            "including whitespace and indentation"
        )
    if count > 1 and not replace_all:
        raise ToolError(
            f"old_string occurs {count} times in {shown}: include more surrounding text to make "
            "it unique, or set replace_all=true"
        )
    if replace_all:
        return text.replace(old, new), count
    return text.replace(old, new, 1), 1


class EditFileArguments(ToolArguments):
    path: str = Field(min_length=1, description="File to edit, relative to the workspace root.")
    old_string: str = Field(min_length=1, description="The exact text to replace.")
    new_string: str = Field(description="The text to put in its place (may be empty to delete).")
    replace_all: bool = Field(
        False, description="Replace every occurrence instead of exactly one. Default: false."
    )


class EditFileTool(_BuiltinTool):
    name = "edit_file"
    description = (
        "Replace an exact piece of text in a file of the workspace. old_string must match the "
        "file exactly (whitespace included) and occur once, unless replace_all is true. Read "
        "the file first; do not include read_file's line numbers."
    )
    ARGUMENTS = EditFileArguments
    read_only = False
    approval_default: ApprovalDefault = "ask"

    def _edited(
        self, arguments: dict[str, Any], ctx: ToolContext
    ) -> tuple[Path, str, str, str, int]:
        path = resolve_in_workspace(ctx.workspace, _string(arguments, "path"))
        shown = display_path(ctx.workspace, path)
        if not path.exists():
            raise ToolError(f"{shown}: no such file (use write_file to create it)")
        old_text = _read_text(path, shown)
        new_text, replacements = _apply_edit(
            old_text,
            _string(arguments, "old_string"),
            _string(arguments, "new_string"),
            replace_all=_bool(arguments, "replace_all", False),
            shown=shown,
        )
        return path, shown, old_text, new_text, replacements

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        path, shown, _, new_text, replacements = await asyncio.to_thread(
            self._edited, arguments, ctx
        )
        try:
            await asyncio.to_thread(write_text_atomically, path, new_text)
        except OSError as exc:
            raise ToolError(f"cannot write {shown}: {exc.strerror or exc}") from None
        plural = "s" if replacements > 1 else ""
        return ToolOutput(
            content=f"edited {shown} ({replacements} replacement{plural})",
            structured={"path": shown, "replacements": replacements},
        )

    def approval_detail(self, arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        try:
            _, shown, old_text, new_text, _ = self._edited(arguments, ctx)
        except ToolError as exc:
            return {"path": _string(arguments, "path"), "error": exc.message}
        return {
            "path": shown,
            "new_file": False,
            "diff": _unified_diff(old_text, new_text, shown, new_file=False),
        }


# --- ask_user -------------------------------------------------------------------------------

ASK_USER_NAME = "ask_user"
ASK_USER_DESCRIPTION = (
    "Ask the person a question and wait for the answer. Give options when there are clear "
    "choices; the person may also answer in their own words unless allow_free_text is false. "
    "Use it when you need a decision or information only they have, not for confirmation of "
    "routine steps."
)


class AskUserArguments(ToolArguments):
    question: str = Field(min_length=1, description="The question, in plain words.")
    options: list[Annotated[str, Field(min_length=1)]] | None = Field(
        None, max_length=20, description="Choices the person can pick from (optional)."
    )
    allow_free_text: bool = Field(
        True, description="Whether an answer outside the options is accepted. Default: true."
    )


ASK_USER_SCHEMA: dict[str, Any] = schema_of(AskUserArguments)
ASK_USER_SPEC = ToolSpec(
    name=ASK_USER_NAME, description=ASK_USER_DESCRIPTION, input_schema=ASK_USER_SCHEMA
)


class AskUserTool(_BuiltinTool):
    """Advertised to the model like any tool; the engine answers it by asking the person."""

    name = ASK_USER_NAME
    description = ASK_USER_DESCRIPTION
    ARGUMENTS = AskUserArguments
    read_only = True
    approval_default: ApprovalDefault = "allow"

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        raise ToolError("ask_user is handled by the engine")


# --- registry and validation ----------------------------------------------------------------


def builtin_tools() -> dict[str, Tool]:
    """Every built-in tool by name, fresh instances."""
    from runtime.tools.shell import ShellTool

    tools: list[Tool] = [
        ListDirTool(),
        ReadFileTool(),
        SearchTool(),
        WriteFileTool(),
        EditFileTool(),
        ShellTool(),
        AskUserTool(),
    ]
    return {tool.name: tool for tool in tools}


_VALIDATORS: dict[str, Any] = {}
"""The schema as canonical JSON → its validator: building a validator costs far more than
using it, and an MCP server's tools may come with fresh schema dicts."""


_BY_IDENTITY: dict[int, tuple[dict[str, Any], Any]] = {}
"""id(schema) → (that schema, its validator): a tool's schema dict is canonicalised once (the
entry keeps the dict alive, so its id is not reused while it is here)."""


def _validator(schema: dict[str, Any]) -> Any:
    known = _BY_IDENTITY.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    key = json.dumps(schema, sort_keys=True, separators=(",", ":"), default=str)
    validator = _VALIDATORS.get(key)
    if validator is None:
        import jsonschema  # when a call is checked, not on import: CLI queries never load it

        validator = jsonschema.Draft202012Validator(schema)
        if len(_VALIDATORS) > 1000:  # schemas of MCP servers come and go
            _VALIDATORS.clear()
        _VALIDATORS[key] = validator
    if len(_BY_IDENTITY) > 1000:
        _BY_IDENTITY.clear()
    _BY_IDENTITY[id(schema)] = (schema, validator)
    return validator


def validate_arguments(tool: Tool, arguments: Any) -> None:
    """Raise ToolError with a readable message when ``arguments`` do not fit the tool: its
    argument model (built-in tools), else its JSON Schema (MCP servers' tools, skills)."""
    if not isinstance(arguments, dict):
        raise ToolError(
            f"invalid arguments for {tool.name}: expected a JSON object, got "
            f"{type(arguments).__name__}"
        )
    model = getattr(tool, "arguments_model", None)
    if isinstance(model, type) and issubclass(model, ToolArguments):
        problems = argument_problems(model, arguments)
    else:
        problems = _schema_problems(tool.input_schema, arguments)
    if problems:
        raise ToolError(f"invalid arguments for {tool.name}: " + "; ".join(problems))


def _schema_problems(schema: dict[str, Any], arguments: dict[str, Any]) -> list[str]:
    validator = _validator(schema)
    problems: list[str] = []
    for error in sorted(validator.iter_errors(arguments), key=lambda e: [str(p) for p in e.path]):
        where = ".".join(str(part) for part in error.absolute_path)
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            allowed = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
            unexpected = sorted(k for k in error.instance if k not in allowed)
            message = f"unknown argument(s) {', '.join(map(repr, unexpected))}"
            if allowed:
                message += f" (allowed: {', '.join(allowed)})"
        else:
            message = error.message
        problems.append(f"{where}: {message}" if where else message)
    return problems
