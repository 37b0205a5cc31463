"""The command line without running an agent: version, usage errors, refused databases."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.harness import Cli, agent_tui_command

pytestmark = pytest.mark.slow


def test_version_prints_the_package_version(cli: Cli) -> None:
    result = cli.run("--version", global_options=False)
    assert result.returncode == 0
    assert result.stdout.strip().startswith("agent-tui 0.")


def test_an_unknown_command_is_a_usage_error(cli: Cli) -> None:
    result = cli.run("frobnicate")
    assert result.returncode == 2
    assert "invalid choice" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_task_given_as_the_first_argument_says_how_to_give_a_task_in_one_line(
    cli: Cli,
) -> None:
    """Found by a new-user trial: ``agent-tui "explain this repo"``, as one starts Claude Code
    or Codex with a task, printed the top-level usage and "invalid choice: 'explain this
    repo' (choose from 'run', 'runs', …)". One line says what to do instead, exit 2, and
    nothing is created."""
    result = cli.run("explain this repo")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "agent-tui: error: 'explain this repo' is not a command: to give the agent a task,"
        " type it in agent-tui (opened without arguments), or run it headless with agent-tui"
        " run PROMPT"
    ]
    assert not cli.db.exists()


def test_an_invalid_state_filter_is_a_usage_error(cli: Cli) -> None:
    result = cli.run("runs", "--state", "sleeping")
    assert result.returncode == 2
    assert "sleeping" in result.stderr


def test_an_unknown_option_of_a_command_is_told_with_that_commands_usage(cli: Cli) -> None:
    result = cli.run("runs", "--bogus")
    assert result.returncode == 2
    assert result.stderr.splitlines()[0].startswith("usage: agent-tui runs ")
    assert result.stderr.splitlines()[-1] == (
        "agent-tui runs: error: unrecognized arguments: --bogus"
    )
    assert not cli.db.exists()


def test_global_options_are_accepted_after_the_subcommand(cli: Cli) -> None:
    result = cli.run(
        "runs", "--db", str(cli.db), "--workspace", str(cli.workspace), global_options=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == f"No database yet at {cli.db.resolve()}.\n"  # that --db, taken


def test_headless_commands_do_not_import_textual() -> None:
    code = (
        "import sys, tui.cli, tui._cli.commands, tui._cli.doctor;"
        "print('textual' in sys.modules or 'rich' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "False"


def test_a_file_that_is_not_a_database_is_refused_untouched(cli: Cli) -> None:
    cli.db.parent.mkdir(parents=True)
    content = b"these are my notes, not a database\n" * 20
    cli.db.write_bytes(content)
    result = cli.run("runs")
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert str(cli.db) in lines[0]
    assert lines[0].startswith("agent-tui: error:")
    assert cli.db.read_bytes() == content


def test_a_database_from_a_newer_version_is_refused_untouched(cli: Cli) -> None:
    cli.db.parent.mkdir(parents=True)
    connection = sqlite3.connect(cli.db)
    connection.execute("CREATE TABLE future (x)")
    connection.execute("PRAGMA user_version = 999")
    connection.commit()
    connection.close()
    before = cli.db.read_bytes()
    result = cli.run("run", "hello", "--model", "demo:instant")
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert str(cli.db) in lines[0]
    assert cli.db.read_bytes() == before


def test_a_database_with_a_dropped_table_is_refused_untouched_by_runs_and_respond(
    cli: Cli,
) -> None:
    started = cli.run("run", "summarise this folder", "--json", "--model", "demo:instant")
    assert started.returncode == 3, started.stderr
    run_id = json.loads(started.stdout.splitlines()[-1])["run_id"]
    connection = sqlite3.connect(cli.db, isolation_level=None)
    connection.execute("PRAGMA foreign_keys = OFF")
    connection.execute("DROP TABLE messages")
    connection.close()
    before = cli.db.read_bytes()

    for args in (("runs",), ("respond", run_id, "1")):
        result = cli.run(*args)
        assert result.returncode == 2, (args, result.stderr)
        lines = result.stderr.splitlines()
        assert len(lines) == 1, result.stderr
        assert str(cli.db) in lines[0] and "table messages is missing" in lines[0]
        assert cli.db.read_bytes() == before


def test_an_unknown_run_is_a_clear_error(cli: Cli) -> None:
    cli.make_database()
    result = cli.run("show", "no-such-run")
    assert result.returncode == 2
    assert result.stderr.startswith("agent-tui: error:")
    assert "no-such-run" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_missing_workspace_is_a_clear_error(cli: Cli) -> None:
    result = subprocess.run(
        [*agent_tui_command(), "--db", str(cli.db), "--workspace", str(cli.root / "nope"), "runs"],
        capture_output=True,
        text=True,
        env=cli.env,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "does not exist" in result.stderr


def test_the_database_defaults_to_the_xdg_data_folder(cli: Cli) -> None:
    result = subprocess.run(
        [*agent_tui_command(), "--workspace", str(cli.workspace), "run", "hi", "--model", "demo"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=cli.env,
        timeout=60,
        check=False,
    )
    assert result.returncode in (0, 3), result.stderr  # completed, or asks a question
    assert (cli.root / "home/.local/share/agent-tui/agent-tui.db").exists()


def test_doctor_reports_keys_as_set_without_their_values(cli: Cli) -> None:
    secret = "sk-ant-test-0123456789-never-print-me"
    env = {**cli.env, "OPENAI_API_KEY": secret}
    result = subprocess.run(
        cli.argv("doctor"), capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert secret not in result.stdout + result.stderr
    assert "OPENAI_API_KEY: (secret) set" in result.stdout
    assert "ANTHROPIC_API_KEY: (secret) not set" in result.stdout
    assert str(cli.db) in result.stdout
    assert "demo" in result.stdout
    assert result.returncode == 0, result.stdout + result.stderr


def test_doctor_says_when_the_log_file_is_not_written_yet(cli: Cli) -> None:
    # A trial looked for the log file doctor named, and it was not there.
    log = cli.db.parent / "agent-tui.log"
    log.unlink(missing_ok=True)
    result = cli.run("doctor")
    assert f"Log file: {log} (none yet" in result.stdout
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("a line\n")
    assert f"Log file: {log}\n" in cli.run("doctor").stdout


def test_doctor_names_a_broken_config_file(cli: Cli) -> None:
    (cli.workspace / "agent-tui.toml").write_text("[defaults]\nmodel = = 'x'\n")
    result = cli.run("doctor")
    assert result.returncode == 1
    assert "agent-tui.toml" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr


def test_doctor_starts_each_mcp_server_and_lists_its_tools(cli: Cli) -> None:
    server = Path(sys.executable).parent / "mcp-server-time"
    if not server.exists():
        pytest.skip("mcp-server-time is not installed")
    servers = {"time": {"command": str(server)}, "broken": {"command": "/nonexistent/server"}}
    (cli.workspace / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    result = cli.run("doctor")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "time (stdio): starts" in result.stdout
    assert "time__get_current_time" in result.stdout
    assert "broken (stdio): error" in result.stdout


def test_doctor_gives_a_server_that_never_speaks_mcp_its_startup_timeout(
    cli: Cli, tmp_path: Path
) -> None:
    # Found by a new-user trial: doctor waited a fixed 30 s for a server that printed
    # "hello world" and then nothing.
    script = tmp_path / "hello.py"
    script.write_text("import time\nprint('hello world', flush=True)\ntime.sleep(600)\n")
    (cli.workspace / "agent-tui.toml").write_text(
        f"[mcp_servers.hello]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(script))}]\nstartup_timeout = 2\n"
    )
    result = cli.run("doctor", timeout=25)
    assert result.returncode == 1, result.stdout + result.stderr
    assert (
        "hello (stdio): error: did not finish starting within 2 s"
        " (more: startup_timeout or MCP_TIMEOUT); it wrote this on stdout,"
        " which is not MCP (JSON-RPC): 'hello world'"
    ) in result.stdout


def test_doctor_gives_a_server_without_a_startup_timeout_the_mcp_timeout_milliseconds(
    cli: Cli, tmp_path: Path
) -> None:
    """``MCP_TIMEOUT`` (milliseconds, as Claude Code reads it) was not read: a server that
    never speaks MCP held doctor for the default 10 s."""
    script = tmp_path / "hello.py"
    script.write_text("import time\nprint('hello world', flush=True)\ntime.sleep(600)\n")
    (cli.workspace / "agent-tui.toml").write_text(
        f"[mcp_servers.hello]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(script))}]\n"
    )
    cli.env["MCP_TIMEOUT"] = "1500"
    result = cli.run("doctor", timeout=25)
    assert result.returncode == 1, result.stdout + result.stderr
    assert (
        "  MCP_TIMEOUT: 1500 ms: MCP servers without a startup_timeout get 1.5 s to start"
    ) in result.stdout.splitlines()
    assert "hello (stdio): error: did not finish starting within 1.5 s" in result.stdout


def test_doctor_warns_of_an_mcp_timeout_that_is_not_a_number_and_keeps_ten_seconds(
    cli: Cli,
) -> None:
    cli.env["MCP_TIMEOUT"] = "10s"
    result = cli.run("doctor")
    lines = result.stdout.splitlines()
    assert (
        "  warning: MCP_TIMEOUT='10s' is not a positive number of milliseconds; MCP servers get"
        " the default 10 s to start"
    ) in lines, result.stdout
    assert (
        "  MCP_TIMEOUT: '10s', not a positive number of milliseconds: MCP servers without a"
        " startup_timeout get 10 s to start"
    ) in lines


def test_doctor_reports_the_integrity_and_schema_checks_without_touching_the_file(
    cli: Cli,
) -> None:
    assert cli.run("run", "hello", "--model", "demo:instant").returncode == 3
    healthy = cli.run("doctor")
    assert "integrity check: ok" in healthy.stdout
    assert "schema check: ok" in healthy.stdout

    connection = sqlite3.connect(cli.db, isolation_level=None)
    connection.execute("PRAGMA foreign_keys = OFF")
    connection.execute("DROP INDEX runs_by_job")
    connection.close()
    before = cli.db.read_bytes()
    damaged = cli.run("doctor")
    assert damaged.returncode == 1
    assert "integrity check: ok" in damaged.stdout
    assert "schema check: error: index runs_by_job is missing" in damaged.stdout
    assert cli.db.read_bytes() == before


def test_doctor_says_a_database_of_another_program_is_not_agent_tuis_in_its_schema_check(
    cli: Cli,
) -> None:
    """Version 0 with tables read "schema check: ok" (a trial): only the runtime's line further
    down said the file was not agent-tui's."""
    cli.db.parent.mkdir(parents=True)
    with sqlite3.connect(cli.db) as connection:
        connection.execute("CREATE TABLE contacts (name TEXT)")
    before = cli.db.read_bytes()
    result = cli.run("doctor")
    assert result.returncode == 1
    assert (
        "  integrity check: ok\n"
        "  schema check: error: an SQLite database of another program, not an agent-tui database\n"
    ) in result.stdout
    assert cli.db.read_bytes() == before
