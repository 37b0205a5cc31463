"""The built-in file tools: what they return, what they refuse, and their schemas."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from runtime.errors import PathOutsideWorkspace, ToolError
from runtime.tools import ASK_USER_SPEC, builtin_tools, validate_arguments
from runtime.tools.builtin import (
    MAX_LINE_CHARS,
    MAX_OUTPUT_CHARS,
    MAX_TEXT_FILE_BYTES,
    READ_ON_LOOP_BYTES,
)
from tests.tools.helpers import ProgressLog, context

TOOLS = builtin_tools()


async def call(workspace: Path, name: str, progress: ProgressLog | None = None, **args: Any) -> str:
    tool = TOOLS[name]
    validate_arguments(tool, args)
    output = await tool.run(args, context(workspace, progress))
    return output.content


# --- the set of tools and their schemas -----------------------------------------------------


def test_every_builtin_tool_is_there_with_a_valid_strict_schema() -> None:
    assert set(TOOLS) == {
        "list_dir",
        "read_file",
        "search",
        "write_file",
        "edit_file",
        "shell",
        "ask_user",
    }
    for name, tool in TOOLS.items():
        assert tool.name == name
        assert tool.description
        jsonschema.Draft202012Validator.check_schema(tool.input_schema)
        assert tool.input_schema["additionalProperties"] is False
        for prop in tool.input_schema["properties"].values():
            assert prop.get("description"), f"{name}: every argument is described"


# Calls a model might make, valid and not: for each, the argument model's verdict and the verdict
# of its advertised JSON Schema (checked by jsonschema) must be the same.
CALLS: dict[str, list[Any]] = {
    "list_dir": [
        {},
        {"path": "src", "recursive": True},
        {"max_entries": 0},
        {"max_entries": 5001},
        {"recursive": "yes"},
        {"path": None},
        {"depth": 2},
    ],
    "read_file": [
        {"path": "a"},
        {"path": "a", "offset": 3, "limit": 20000},
        {},
        {"path": ""},
        {"path": "a", "limit": "ten"},
        {"path": "a", "offset": 0},
        {"path": "a", "limit": True},
        {"path": "a", "lines": 3},
    ],
    "search": [
        {"pattern": "x"},
        {"pattern": "x", "glob": "*.py", "ignore_case": True},
        {"pattern": ""},
        {"pattern": "x", "glob": ""},
        {"pattern": "x", "max_results": 0},
        {"pattern": "x", "regex": 1},
        {"glob": "*.py"},
    ],
    "write_file": [{"path": "a", "content": ""}, {"path": "a"}, {"path": "a", "content": 3}],
    "edit_file": [
        {"path": "a", "old_string": "x", "new_string": ""},
        {"path": "a", "old_string": "", "new_string": "y"},
        {"path": "a", "old_string": "x", "new_string": "y", "replace_all": "no"},
    ],
    "shell": [
        {"command": "ls"},
        {"command": "ls", "timeout": 2},
        {"command": "ls", "timeout": 0.5},
        {"command": "ls", "timeout": 0},
        {"command": "ls", "timeout": 601},
        {"command": ""},
        {"command": "ls", "timeout": "5"},
        {"cmd": "ls"},
    ],
    "ask_user": [
        {"question": "Which?"},
        {"question": "Which?", "options": ["a", "b"]},
        {"question": "Which?", "options": [""]},
        {"question": "Which?", "options": "a"},
        {"question": "Which?", "options": [str(i) for i in range(21)]},
        {"question": "", "allow_free_text": False},
        {"options": ["a"]},
    ],
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_tools_schema_and_its_check_come_from_one_argument_model(name: str) -> None:
    from runtime.tools.arguments import argument_problems, schema_of

    tool = TOOLS[name]
    model = tool.arguments_model  # type: ignore[attr-defined]
    assert tool.input_schema == schema_of(model)
    validator = jsonschema.Draft202012Validator(tool.input_schema)
    verdicts = [bool(argument_problems(model, args)) for args in CALLS[name]]
    assert verdicts == [not validator.is_valid(args) for args in CALLS[name]]
    assert False in verdicts and True in verdicts  # each list has both kinds


def test_an_optional_argument_without_a_default_is_shown_as_its_plain_type() -> None:
    glob = TOOLS["search"].input_schema["properties"]["glob"]
    assert glob["type"] == "string" and "anyOf" not in glob and "default" not in glob
    assert "glob" not in TOOLS["search"].input_schema["required"]


def test_read_only_tools_are_allowed_and_writers_ask() -> None:
    for name in ("list_dir", "read_file", "search"):
        assert TOOLS[name].read_only
        assert TOOLS[name].approval_default == "allow"
    for name in ("write_file", "edit_file", "shell"):
        assert not TOOLS[name].read_only
        assert TOOLS[name].approval_default == "ask"


def test_each_call_to_builtin_tools_gets_its_own_schemas() -> None:
    first, second = builtin_tools(), builtin_tools()
    first["read_file"].input_schema["properties"]["path"]["description"] = "changed"
    assert second["read_file"].input_schema["properties"]["path"]["description"] != "changed"


# --- argument validation --------------------------------------------------------------------


def test_a_missing_required_argument_is_a_readable_error() -> None:
    with pytest.raises(ToolError) as caught:
        validate_arguments(TOOLS["read_file"], {})
    assert str(caught.value) == "invalid arguments for read_file: 'path' is a required property"


def test_an_unknown_argument_is_named_with_the_allowed_ones() -> None:
    with pytest.raises(ToolError) as caught:
        validate_arguments(TOOLS["read_file"], {"path": "a", "lines": 3})
    message = str(caught.value)
    assert "unknown argument(s) 'lines'" in message
    assert "allowed: path, offset, limit" in message


def test_a_wrong_type_names_the_argument() -> None:
    with pytest.raises(ToolError, match=r"limit: 'ten' is not of type 'integer'"):
        validate_arguments(TOOLS["read_file"], {"path": "a", "limit": "ten"})


def test_arguments_that_are_not_an_object_are_refused() -> None:
    with pytest.raises(ToolError, match=r"expected a JSON object, got list"):
        validate_arguments(TOOLS["shell"], ["ls"])


def test_valid_arguments_pass() -> None:
    validate_arguments(TOOLS["edit_file"], {"path": "a", "old_string": "x", "new_string": ""})


# --- list_dir -------------------------------------------------------------------------------


async def test_list_dir_lists_folders_with_a_slash_and_files_with_sizes(workspace: Path) -> None:
    content = await call(workspace, "list_dir")
    assert "src/" in content.splitlines()
    assert "notes.txt  (27 bytes)" in content.splitlines()
    assert "src/main.py" not in content


async def test_list_dir_counts_one_entry_in_the_singular(workspace: Path) -> None:
    (workspace / "lonely").mkdir()
    (workspace / "lonely" / "one.txt").write_text("x")
    content = await call(workspace, "list_dir", path="lonely")
    assert content.splitlines()[0] == "lonely/ (1 entry)"


async def test_list_dir_recursive_walks_the_tree_but_not_vcs_folders(workspace: Path) -> None:
    (workspace / ".git").mkdir()
    (workspace / ".git" / "HEAD").write_text("ref\n")
    content = await call(workspace, "list_dir", recursive=True)
    lines = content.splitlines()
    assert any(line.startswith("src/main.py") for line in lines)
    assert ".git/" in lines
    assert not any(line.startswith(".git/HEAD") for line in lines)


async def test_walks_skip_the_exports_folder_but_not_another_folder_of_that_name(
    workspace: Path,
) -> None:
    # The TUI's exports are the conversation itself: a search that found them read it back.
    for folder in (workspace / ".agent-tui" / "exports", workspace / "src" / "exports"):
        folder.mkdir(parents=True)
        (folder / "job.md").write_text("the pelican transcript\n")
    listing = (await call(workspace, "list_dir", recursive=True)).splitlines()
    assert ".agent-tui/exports/" in listing and "src/exports/job.md" in " ".join(listing)
    assert not any(line.startswith(".agent-tui/exports/job.md") for line in listing)
    found = (await call(workspace, "search", pattern="pelican")).splitlines()
    assert found[0] == "src/exports/job.md:1: the pelican transcript"
    assert found[-1].startswith("1 matching line in 1 file")


async def test_list_dir_stops_at_max_entries_and_says_so(workspace: Path) -> None:
    for index in range(10):
        (workspace / f"file{index}.txt").write_text("x")
    content = await call(workspace, "list_dir", max_entries=3)
    assert "truncated" in content
    assert "raise max_entries" in content


async def test_list_dir_of_a_file_or_a_missing_folder_is_an_error(workspace: Path) -> None:
    with pytest.raises(ToolError, match=r"is a file, not a folder"):
        await call(workspace, "list_dir", path="notes.txt")
    with pytest.raises(ToolError, match=r"no such folder"):
        await call(workspace, "list_dir", path="missing")


async def test_list_dir_outside_the_workspace_is_refused(workspace: Path) -> None:
    with pytest.raises(PathOutsideWorkspace):
        await call(workspace, "list_dir", path="..")


# --- read_file ------------------------------------------------------------------------------


async def test_read_file_returns_numbered_lines(workspace: Path) -> None:
    content = await call(workspace, "read_file", path="src/main.py")
    assert content == '     1\tdef main() -> None:\n     2\t    print("hello")'


async def test_read_file_reads_a_window_and_says_how_to_go_on(workspace: Path) -> None:
    (workspace / "long.txt").write_text("".join(f"line {n}\n" for n in range(1, 101)))
    content = await call(workspace, "read_file", path="long.txt", offset=10, limit=5)
    lines = content.splitlines()
    assert lines[0] == "    10\tline 10"
    assert lines[4] == "    14\tline 14"
    assert lines[5] == "[lines 10-14 of 100; read on with offset=15]"


async def test_read_file_past_the_end_is_an_error(workspace: Path) -> None:
    with pytest.raises(ToolError, match=r"has 2 lines; offset 9 is past its end"):
        await call(workspace, "read_file", path="src/main.py", offset=9)


async def test_read_file_refuses_binary_files(workspace: Path) -> None:
    (workspace / "program.bin").write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00\x00")
    with pytest.raises(ToolError, match=r"program.bin is a binary file"):
        await call(workspace, "read_file", path="program.bin")


async def test_read_file_on_an_image_returns_the_image_described(workspace: Path) -> None:
    from tests.fakes.mcp_servers import PNG_BYTES

    (workspace / "pixel.png").write_bytes(PNG_BYTES)
    tools = dict(builtin_tools())
    output = await tools["read_file"].run({"path": "pixel.png"}, context(workspace))
    assert output.content == f"pixel.png: [image: png 1×1, {len(PNG_BYTES)} B]"
    assert [(image.data, image.media_type) for image in output.images] == [(PNG_BYTES, "image/png")]


async def test_read_file_refuses_huge_files_with_advice(workspace: Path) -> None:
    with (workspace / "huge.log").open("wb") as handle:
        handle.truncate(MAX_TEXT_FILE_BYTES + 1)
    with pytest.raises(ToolError, match=r"too large to read.*use search"):
        await call(workspace, "read_file", path="huge.log")


async def test_read_file_of_a_folder_or_missing_file_is_an_error(workspace: Path) -> None:
    with pytest.raises(ToolError, match=r"src is a folder, not a file: use list_dir"):
        await call(workspace, "read_file", path="src")
    with pytest.raises(ToolError, match=r"nope.txt: no such file"):
        await call(workspace, "read_file", path="nope.txt")


async def test_read_file_refuses_a_fifo_without_waiting_for_a_writer(workspace: Path) -> None:
    os.mkfifo(workspace / "pipe")
    async with asyncio.timeout(10):  # opening a FIFO for reading would wait for a writer
        with pytest.raises(ToolError, match=r"pipe is not a regular file"):
            await call(workspace, "read_file", path="pipe")


async def test_read_file_reads_large_files_and_small_ones_alike(workspace: Path) -> None:
    line = "x" * 99 + "\n"
    (workspace / "big.txt").write_text(line * (READ_ON_LOOP_BYTES // 100 + 10))
    (workspace / "small.txt").write_text(line * 3)
    big = await call(workspace, "read_file", path="big.txt", limit=2)
    small = await call(workspace, "read_file", path="small.txt", limit=2)
    assert big.splitlines()[:2] == small.splitlines()[:2] == [f"{n:>6}\t{'x' * 99}" for n in (1, 2)]
    assert "[lines 1-2 of 2631; read on with offset=3]" in big


def _numbered_as_documented(text: str, offset: int, limit: int) -> str:
    """What read_file answers, computed line by line: each line numbered and clipped, lines
    added while the answer stays within MAX_OUTPUT_CHARS (at least one), then where to go on."""
    lines = text.splitlines()
    out: list[str] = []
    last = offset - 1
    for number in range(offset, min(len(lines), offset + limit - 1) + 1):
        line = lines[number - 1]
        if len(line) > MAX_LINE_CHARS:
            line = f"{line[:MAX_LINE_CHARS]}… [{len(line) - MAX_LINE_CHARS:,} more characters]"
        numbered = f"{number:>6}\t{line}"
        if out and len("\n".join([*out, numbered])) > MAX_OUTPUT_CHARS:
            break
        out.append(numbered)
        last = number
    content = "\n".join(out)
    if last < len(lines):
        content += f"\n[lines {offset}-{last} of {len(lines)}; read on with offset={last + 1}]"
    return content


@pytest.mark.parametrize(
    "text",
    [
        # 49 lines just over the clip length (each grows when clipped), then one that takes
        # the answer past the output limit although the file itself is within it.
        ("x" * (MAX_LINE_CHARS + 1) + "\n") * 49 + "y" * 1501 + "\n",
        ("z" * 90 + "\n") * 1020,  # short lines, cut near the limit
        ("z" * 90 + "\n") * 1010,  # short lines, all within the limit
        "a\n" * 40 + "b" * 99_000,  # one long line clipped, all kept
        "c" * 5 + "\n" + "d" * (MAX_LINE_CHARS * 60),  # a huge line after a short one
    ],
    ids=["clipped-lines-past-the-limit", "cut", "all-kept", "clipped-kept", "huge-line"],
)
@pytest.mark.parametrize(("offset", "limit"), [(1, 2000), (2, 30), (1, 1)])
async def test_read_file_numbers_clips_and_cuts_lines_as_documented(
    workspace: Path, text: str, offset: int, limit: int
) -> None:
    (workspace / "lines.txt").write_text(text)
    content = await call(workspace, "read_file", path="lines.txt", offset=offset, limit=limit)
    assert content == _numbered_as_documented(text, offset, limit)


async def test_read_file_through_an_escaping_symlink_is_refused(
    workspace: Path, tmp_path: Path
) -> None:
    (tmp_path / "secret").write_text("s3cr3t")
    (workspace / "link").symlink_to(tmp_path / "secret")
    with pytest.raises(PathOutsideWorkspace):
        await call(workspace, "read_file", path="link")


# --- search ---------------------------------------------------------------------------------


async def test_search_finds_lines_with_path_and_line_number(workspace: Path) -> None:
    content = await call(workspace, "search", pattern="hello")
    assert 'src/main.py:2: print("hello")' in content.splitlines()
    assert content.splitlines()[-1] == "1 matching line in 1 file (searched 3 files)"


async def test_search_finds_lines_in_a_log_too_large_to_read_whole(workspace: Path) -> None:
    """Found by a new-user trial: read_file refused a big log and sent the model to search,
    which skipped files over 2 MB without a word and reported no matches."""
    filler = "2026-12-05 12:00:00 INFO nothing to see here, the service is healthy\n"
    lines = [filler] * 60_000  # about 4 MB
    lines[41_234] = "2026-12-05 12:00:01 WARN TODO: rotate this log\n"
    (workspace / "big.log").write_text("".join(lines))
    content = await call(workspace, "search", pattern="TODO", path="big.log")
    assert content.splitlines() == [
        "big.log:41235: 2026-12-05 12:00:01 WARN TODO: rotate this log",
        "1 matching line in 1 file (searched 1 file)",
    ]


async def test_search_reports_progress_for_every_file_scanned(workspace: Path) -> None:
    progress = ProgressLog()
    await call(workspace, "search", progress, pattern="the")
    totals = {total for _, total, _ in progress.calls}
    assert totals == {3}
    done = [done for done, _, _ in progress.calls]
    assert done == [0, 1, 2, 3]
    assert {"README.md", "notes.txt", "src/main.py"} <= set(progress.messages)


async def test_search_with_a_regex_ignoring_case_and_a_glob(workspace: Path) -> None:
    (workspace / "src" / "other.txt").write_text("HELLO there\n")
    content = await call(
        workspace, "search", pattern=r"hel+o", regex=True, ignore_case=True, glob="*.txt"
    )
    assert "src/other.txt:1: HELLO there" in content
    assert "main.py" not in content


async def test_search_globs_with_folders_match_at_any_depth(workspace: Path) -> None:
    (workspace / "src" / "pkg").mkdir()
    (workspace / "src" / "pkg" / "deep.py").write_text("hello deep\n")
    content = await call(workspace, "search", pattern="hello", glob="src/**/*.py")
    assert "src/main.py:2:" in content
    assert "src/pkg/deep.py:1: hello deep" in content
    assert "README" not in content


async def test_search_skips_binary_files_and_vcs_folders(workspace: Path) -> None:
    (workspace / "blob.bin").write_bytes(b"needle\x00\x01")
    (workspace / ".git").mkdir()
    (workspace / ".git" / "config").write_text("needle\n")
    (workspace / "real.txt").write_text("a needle here\n")
    content = await call(workspace, "search", pattern="needle")
    assert content.splitlines() == [
        "real.txt:1: a needle here",
        "1 matching line in 1 file (searched 4 files)",
    ]


async def test_search_stops_at_max_results(workspace: Path) -> None:
    (workspace / "many.txt").write_text("match\n" * 50)
    content = await call(workspace, "search", pattern="match", max_results=5)
    assert content.count("many.txt:") == 5
    assert "stopped at max_results=5" in content


async def test_search_with_a_bad_regex_explains_it(workspace: Path) -> None:
    with pytest.raises(ToolError, match=r"invalid regular expression '\(unclosed'"):
        await call(workspace, "search", pattern="(unclosed", regex=True)


async def test_search_says_when_nothing_matches(workspace: Path) -> None:
    assert await call(workspace, "search", pattern="zebra") == "no matches for 'zebra' in 3 files"


# --- write_file -----------------------------------------------------------------------------


async def test_write_file_creates_a_file_and_its_folders(workspace: Path) -> None:
    content = await call(workspace, "write_file", path="docs/new.md", content="# New\n\nText\n")
    assert content == "created docs/new.md (3 lines, 12 bytes)"
    assert (workspace / "docs" / "new.md").read_text() == "# New\n\nText\n"


async def test_write_file_replaces_a_file_keeping_its_permissions(workspace: Path) -> None:
    script = workspace / "run.sh"
    script.write_text("echo old\n")
    script.chmod(0o755)
    content = await call(workspace, "write_file", path="run.sh", content="echo new\n")
    assert content.startswith("updated run.sh")
    assert script.read_text() == "echo new\n"
    assert script.stat().st_mode & 0o777 == 0o755
    assert [p.name for p in workspace.iterdir() if p.name.endswith(".tmp")] == []


async def test_write_file_outside_the_workspace_is_refused(workspace: Path, tmp_path: Path) -> None:
    with pytest.raises(PathOutsideWorkspace):
        await call(workspace, "write_file", path="../escape.txt", content="x")
    assert not (tmp_path / "escape.txt").exists()


def test_write_file_approval_shows_a_diff_against_the_current_file(workspace: Path) -> None:
    detail = TOOLS["write_file"].approval_detail(
        {"path": "notes.txt", "content": "remember: the answer is 43\n"}, context(workspace)
    )
    assert detail["path"] == "notes.txt"
    assert detail["new_file"] is False
    assert detail["diff"].splitlines() == [
        "--- a/notes.txt",
        "+++ b/notes.txt",
        "@@ -1 +1 @@",
        "-remember: the answer is 42",
        "+remember: the answer is 43",
    ]


def test_write_file_approval_shows_the_content_of_a_new_file(workspace: Path) -> None:
    detail = TOOLS["write_file"].approval_detail(
        {"path": "fresh.txt", "content": "hello\n"}, context(workspace)
    )
    assert detail["new_file"] is True
    assert detail["content"] == "hello\n"
    assert "+hello" in detail["diff"]


def test_write_file_approval_for_an_escaping_path_carries_the_error(workspace: Path) -> None:
    detail = TOOLS["write_file"].approval_detail(
        {"path": "/etc/hosts", "content": ""}, context(workspace)
    )
    assert "outside the workspace" in detail["error"]


# --- edit_file ------------------------------------------------------------------------------


async def test_edit_file_replaces_exactly_one_occurrence(workspace: Path) -> None:
    content = await call(
        workspace, "edit_file", path="notes.txt", old_string="42", new_string="forty-two"
    )
    assert content == "edited notes.txt (1 replacement)"
    assert (workspace / "notes.txt").read_text() == "remember: the answer is forty-two\n"


async def test_edit_file_refuses_an_ambiguous_old_string(workspace: Path) -> None:
    (workspace / "twice.txt").write_text("a = 1\na = 1\n")
    with pytest.raises(ToolError, match=r"occurs 2 times in twice.txt.*replace_all"):
        await call(workspace, "edit_file", path="twice.txt", old_string="a = 1", new_string="b")
    assert (workspace / "twice.txt").read_text() == "a = 1\na = 1\n"


async def test_edit_file_replace_all_replaces_every_occurrence(workspace: Path) -> None:
    (workspace / "twice.txt").write_text("a = 1\na = 1\n")
    content = await call(
        workspace, "edit_file", path="twice.txt", old_string="a", new_string="b", replace_all=True
    )
    assert content == "edited twice.txt (2 replacements)"
    assert (workspace / "twice.txt").read_text() == "b = 1\nb = 1\n"


async def test_edit_file_with_an_absent_old_string_is_an_error(workspace: Path) -> None:
    with pytest.raises(ToolError, match=r"old_string was not found in notes.txt"):
        await call(workspace, "edit_file", path="notes.txt", old_string="43", new_string="44")


async def test_edit_file_of_a_missing_file_suggests_write_file(workspace: Path) -> None:
    with pytest.raises(ToolError, match=r"no such file \(use write_file"):
        await call(workspace, "edit_file", path="gone.txt", old_string="a", new_string="b")


async def test_edit_file_matches_plain_newlines_in_a_crlf_file(workspace: Path) -> None:
    (workspace / "win.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    await call(workspace, "edit_file", path="win.txt", old_string="one\ntwo", new_string="1\n2")
    assert (workspace / "win.txt").read_bytes() == b"1\r\n2\r\nthree\r\n"


def test_edit_file_approval_shows_the_diff(workspace: Path) -> None:
    detail = TOOLS["edit_file"].approval_detail(
        {"path": "src/main.py", "old_string": '"hello"', "new_string": '"bye"'},
        context(workspace),
    )
    assert '-    print("hello")' in detail["diff"]
    assert '+    print("bye")' in detail["diff"]
    assert (workspace / "src" / "main.py").read_text().count("hello") == 1


def test_edit_file_approval_of_an_impossible_edit_carries_the_error(workspace: Path) -> None:
    detail = TOOLS["edit_file"].approval_detail(
        {"path": "notes.txt", "old_string": "absent", "new_string": "x"}, context(workspace)
    )
    assert "not found" in detail["error"]


# --- ask_user -------------------------------------------------------------------------------


def test_the_ask_user_spec_describes_question_options_and_free_text() -> None:
    schema = ASK_USER_SPEC.input_schema
    assert ASK_USER_SPEC.name == "ask_user"
    assert schema["required"] == ["question"]
    assert schema["properties"]["options"]["type"] == "array"
    assert schema["properties"]["allow_free_text"]["default"] is True
    validate_arguments(TOOLS["ask_user"], {"question": "Which?", "options": ["a", "b"]})


async def test_ask_user_is_not_run_as_a_tool(workspace: Path) -> None:
    with pytest.raises(ToolError, match=r"ask_user is handled by the engine"):
        await TOOLS["ask_user"].run({"question": "?"}, context(workspace))
