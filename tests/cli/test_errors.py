"""The command line's error boundary: one line on stderr, the traceback in a log; bad input to the
real command (an unwritable database folder or log, arguments that are not UTF-8) is one line,
exit 2, and nothing is written."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.cli.harness import (
    Cli,
    assert_one_line_error,
    folder_state,
    json_lines,
    read_only,
    run_cli,
)
from tui import cli
from tui._cli import commands


def test_an_unexpected_error_is_one_line_and_its_traceback_goes_to_the_log(
    tmp_path: Path,
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    async def broken(ctx: Any, runtime: Any, args: Any) -> int:
        raise RuntimeError("the disk fell off")

    monkeypatch.setitem(commands.COMMANDS, "run", broken)
    db = tmp_path / "data" / "agent-tui.db"
    code = cli.main(["--db", str(db), "--workspace", str(workspace), "run", "hello"])

    assert code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "the disk fell off" in err and "agent-tui.log" in err
    assert "Traceback" not in err
    log = (db.parent / "agent-tui.log").read_text()
    assert "Traceback" in log and "RuntimeError: the disk fell off" in log


# --- bad input to the real command: one line on stderr, exit 2, nothing modified -------------


@pytest.mark.parametrize(
    "command", [["runs"], ["run", "hello", "--model", "demo:instant"], ["show", "abc"]]
)
def test_an_unwritable_database_folder_is_one_line_exit_2_and_nothing_is_written(
    cli: Cli, command: list[str]
) -> None:
    cli.db.parent.mkdir(parents=True)
    cli.db.touch()  # an empty database file (where there is none, `runs` and `show` stop first)
    prefix = read_only(cli, cli.db.parent)
    result = run_cli(cli, prefix, *command)
    assert_one_line_error(result, str(cli.db.parent), "not writable")
    assert folder_state(cli.db.parent) == {"agent-tui.db": b""}


@pytest.mark.parametrize(
    "command", [["runs"], ["runs", "--json"], ["show", "abc"], ["export", "abc"], ["events"]]
)
def test_a_database_file_this_user_cannot_read_is_one_line_exit_2_and_nothing_is_written(
    cli: Cli, command: list[str]
) -> None:
    """A database of another user (mode 000 here) read as "unexpected error: [Errno 13]
    Permission denied", exit 1, with a traceback written to a new log beside it (a trial)."""
    made = cli.run("run", "hello", "--model", "demo:instant")
    assert made.returncode == 3, made.stderr
    cli.db.chmod(0o000)
    before = _sizes(cli.db.parent)
    prefix: list[str] = []
    if os.geteuid() == 0:  # root reads any file: run as a user of its own namespace
        prefix = read_only(cli, by="permissions")
    result = run_cli(cli, prefix, *command)
    assert_one_line_error(result, f"{cli.db}: cannot be read (permission denied)")
    assert result.stdout == ""
    assert _sizes(cli.db.parent) == before


def _sizes(folder: Path) -> dict[str, int]:
    """The files in ``folder`` and their sizes (an unreadable file's bytes cannot be read)."""
    return {path.name: path.stat().st_size for path in sorted(folder.iterdir())}


def test_an_existing_database_in_a_folder_that_became_read_only_is_left_untouched(
    cli: Cli,
) -> None:
    made = cli.run("run", "hello", "--model", "demo:instant")
    assert made.returncode in (0, 3), made.stderr
    before = folder_state(cli.db.parent)
    prefix = read_only(cli, cli.db.parent)
    again = run_cli(cli, prefix, "run", "again", "--model", "demo:instant")
    assert_one_line_error(again, "not writable")
    assert folder_state(cli.db.parent) == before


def test_a_log_file_that_cannot_be_written_is_one_line_exit_2(cli: Cli) -> None:
    cli.db.parent.mkdir(parents=True)
    cli.db.touch()
    (cli.db.parent / "agent-tui.log").mkdir()
    ran = cli.run("run", "hello", "--model", "demo:instant")
    assert_one_line_error(ran, "agent-tui.log", "it is a folder")
    assert folder_state(cli.db.parent) == {"agent-tui.db": b"", "agent-tui.log": None}


def test_a_read_only_log_file_is_one_line_exit_2(cli: Cli) -> None:
    cli.db.parent.mkdir(parents=True)
    cli.db.touch()
    log = cli.db.parent / "agent-tui.log"
    log.write_text("earlier lines\n")
    prefix = read_only(cli, log)
    result = run_cli(cli, prefix, "run", "hello", "--model", "demo:instant")
    assert_one_line_error(result, "cannot write the log file", str(log))
    assert folder_state(cli.db.parent) == {"agent-tui.db": b"", "agent-tui.log": b"earlier lines\n"}


@pytest.mark.parametrize(
    "arguments",
    [
        [b"run", b"caf\xe9 au lait"],  # Latin-1, not UTF-8
        [b"run", b"fine", b"--agent", b"\xff\xfe"],
        [b"show", b"\xc3"],  # a truncated sequence
    ],
)
def test_arguments_that_are_not_utf8_are_a_usage_error_and_create_nothing(
    cli: Cli, arguments: list[bytes]
) -> None:
    result = run_cli(cli, [], *(os.fsdecode(a) for a in arguments))
    assert_one_line_error(result, "is not valid UTF-8")
    assert "\\x" in result.stderr  # the bad bytes are shown escaped
    assert not cli.db.parent.exists()


ID_COMMANDS = [
    ("export", "{id}"),
    ("export", "{id}", "--format", "json"),
    ("follow-up", "{id}", "more"),
    ("archive", "{id}"),
    ("unarchive", "{id}"),
    ("delete", "{id}", "--yes"),
    ("show", "{id}"),
    ("show", "{id}", "--json"),
    ("respond", "{id}", "1"),
    ("respond", "{id}", "1", "--detach"),
    ("retry", "{id}"),
    ("cancel", "{id}"),
    ("fork", "{id}"),
    ("rewind", "{id}"),
]


def test_every_command_given_an_id_that_names_nothing_fails_with_exit_2_and_one_line(
    cli: Cli,
) -> None:
    """A new-user trial reported `export <id>` printing nothing and exiting 0 (the error on
    stderr); an error never exits 0, whatever the command and however it prints."""
    cli.make_database()
    for argv in ID_COMMANDS:
        args = [part.format(id="0a0b0c0d") for part in argv]
        result = cli.run(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert result.stdout == "", args
        [line] = result.stderr.splitlines()
        assert line.startswith("agent-tui: error: no ") and "'0a0b0c0d'" in line, args


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
@pytest.mark.parametrize("form", ["md", "json"])
def test_an_export_stdout_cannot_take_is_one_line_naming_it_with_exit_1(
    cli: Cli, form: str
) -> None:
    """Found by a new-user trial: `agent-tui export JOB > /dev/full` said "unexpected error:
    [Errno 28] No space left on device (see …agent-tui.log)"."""
    started = cli.run("run", "summarise", "--json", "--model", "demo:instant")
    assert started.returncode == 3, started.stderr
    job_id = json_lines(started.stdout)[-1]["request"]["job_id"]
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            cli.argv("export", job_id, "--format", form),
            stdin=subprocess.DEVNULL,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            env=cli.env,
            cwd=cli.workspace,
            timeout=60,
            check=False,
        )
    assert result.returncode == 1
    # One line: nothing more from the interpreter's own last flush of what stdout kept.
    assert result.stderr == (
        "agent-tui: error: cannot write the export to stdout: No space left on device\n"
    )


# --- database URLs: a typo is refused before anything is created ----------------------------

MISTYPED_URLS = [
    "postgresq://me:hunter2@127.0.0.1:5432/agents",  # the scheme misspelt
    "postgresql:/me:hunter2@127.0.0.1:5432/agents",  # one slash
    "postgresql//me:hunter2@127.0.0.1:5432/agents",  # no colon
    "mysql://me:hunter2@127.0.0.1/agents",  # another database
    "postgresq://me@127.0.0.1/agents?password=hunter2",  # its password as a parameter
    "postgresql:me:hunter2@127.0.0.1:5432/agents",  # no slashes: it made a file named so
    "sqlite:agents.db",  # SQLite is given by its path, not a URL: it made "sqlite:agents.db"
    "postgresql:me:hunter2@hunter2@127.0.0.1/agents",  # an "@" in the password (a review)
    "postgresq:///me:hunter2@127.0.0.1/agents",  # three slashes (a review: shown whole)
]


@pytest.mark.parametrize("url", MISTYPED_URLS)
@pytest.mark.parametrize("source", ["--db", "AGENT_TUI_DB"])
@pytest.mark.parametrize(
    "command", [["run", "--detach", "hello"], ["worker"], ["runs"]], ids=" ".join
)
def test_a_mistyped_database_url_is_one_line_exit_2_and_creates_nothing(
    cli: Cli, url: str, source: str, command: list[str]
) -> None:
    """Found by a new-user trial: `--db postgresq://…` was taken as an SQLite path, so `run
    --detach` and `worker` made the folders `postgresq:/me@127.0.0.1:5432/` and a database in
    the current folder (the worker then waited there for ever), and `runs` said "No database
    yet at …"."""
    before = folder_state(cli.root)
    options = ["--workspace", str(cli.workspace)]
    if source == "--db":
        options = ["--db", url, *options]
    else:
        cli.env["AGENT_TUI_DB"] = url
    result = cli.run(*options, *command, global_options=False, timeout=30)
    assert_one_line_error(result, source, "postgresql://", "is not a database agent-tui can open")
    assert "hunter2" not in result.stderr
    assert folder_state(cli.root) == before


@pytest.mark.parametrize("port", ["notaport", "99999"])
@pytest.mark.parametrize("command", [["runs"], ["worker"]], ids=" ".join)
def test_a_database_url_whose_port_is_not_a_number_is_one_line_exit_2_and_logs_nothing(
    cli: Cli, port: str, command: list[str]
) -> None:
    """Found by a new-user trial: it was "agent-tui: unexpected error: Port could not be cast
    to integer value as 'notaport'", exit 1, with a traceback in the log."""
    before = folder_state(cli.root)
    url = f"postgresql://me:hunter2@127.0.0.1:{port}/agents"
    result = cli.run("--db", url, *command, global_options=False, timeout=30)
    assert_one_line_error(result, f"postgresql://me:***@127.0.0.1:{port}/agents", repr(port))
    assert "hunter2" not in result.stderr
    assert folder_state(cli.root) == before  # no log file either


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://me:Xy7#secret9@127.0.0.1/agents",
        "postgresql://me:Xy7?secret9@127.0.0.1/agents",
        "postgresql://me:Xy7/secret9@127.0.0.1/agents",
    ],
)
def test_a_database_url_whose_password_is_not_percent_encoded_is_refused_without_showing_it(
    cli: Cli, url: str
) -> None:
    """A password with a ``#``, ``?`` or ``/`` written as it is ends the host part early: its
    first characters read as the port. The refusal printed the whole URL, password and all
    ("postgresql://me:Xy7#secret9@…: the port 'Xy7' is not a port number")."""
    before = folder_state(cli.root)
    result = cli.run("--db", url, "runs", global_options=False, timeout=30)
    assert_one_line_error(result, "postgresql://me:***@127.0.0.1/agents", "percent-encoded")
    assert "Xy7" not in result.stderr and "secret9" not in result.stderr
    assert folder_state(cli.root) == before


def test_a_database_url_with_an_unclosed_ipv6_bracket_is_one_line_exit_2(cli: Cli) -> None:
    """It was "agent-tui: unexpected error: Invalid IPv6 URL" (exit 1), a traceback in the
    log."""
    before = folder_state(cli.root)
    url = "postgresql://me:hunter2@[::1/agents"
    result = cli.run("--db", url, "runs", global_options=False, timeout=30)
    assert_one_line_error(result, "postgresql://me:***@[::1/agents", "Invalid IPv6 URL")
    assert "hunter2" not in result.stderr
    assert folder_state(cli.root) == before
