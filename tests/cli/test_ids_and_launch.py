"""Issue 10: ids by unique prefix (like git), "not found" naming the database, ``--db`` in the
hints, and the launch flags of the TUI."""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess

import pytest

from tests.cli.harness import Cli, agent_tui_command, json_lines
from tests.cli.test_terminal import terminal
from tui._cli.parser import COMMAND_NAMES, build_parser, parse_arguments


def _start(cli: Cli) -> dict[str, object]:
    result = cli.run("run", "summarise", "--json", "--model", "demo:instant")
    assert result.returncode == 3, result.stderr
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))


def test_a_unique_prefix_of_a_run_id_is_enough(cli: Cli) -> None:
    boundary = _start(cli)
    run_id = str(boundary["run_id"])
    shown = cli.run("show", run_id[:6])
    assert shown.returncode == 0, shown.stderr
    assert run_id in shown.stdout


def test_ids_and_prefixes_typed_in_capitals_find_what_they_name(cli: Cli) -> None:
    """Found by a new-user trial: `show 1FA2` said "no run id starts with '1FA2'"; ids are
    lower-case hex, and a run, job, checkpoint or request id is found in any case."""
    boundary = _start(cli)
    run_id = str(boundary["run_id"])
    request = boundary["request"]
    assert isinstance(request, dict)
    shown = json.loads(cli.run("show", run_id, "--json").stdout)
    job_id = str(shown["run"]["job_id"])
    checkpoint_id = str(shown["checkpoints"][-1]["id"])

    by_prefix = cli.run("show", run_id[:6].upper(), "--json")
    assert by_prefix.returncode == 0, by_prefix.stderr
    assert json.loads(by_prefix.stdout)["run"]["id"] == run_id
    exported = cli.run("export", job_id.upper())
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout == cli.run("export", job_id).stdout
    forked = cli.run("fork", checkpoint_id[:8].upper(), "and the budget?", "--json")
    assert forked.returncode == 0, forked.stderr
    assert json_lines(forked.stdout)[-1]["state"] == "completed"
    answered = cli.run(
        "respond", run_id.upper(), "1", "--request", str(request["id"]).upper(), "--json"
    )
    assert answered.returncode == 3, answered.stderr  # answered; it asks its next question
    assert "Traceback" not in answered.stderr
    assert _count_answered(cli, str(request["id"])) == 1


def _count_answered(cli: Cli, request_id: str) -> int:
    with sqlite3.connect(cli.db) as conn:
        row = conn.execute(
            "SELECT count(*) FROM input_requests WHERE id = ? AND state = 'answered'",
            (request_id,),
        ).fetchone()
    return int(row[0])


def test_an_ambiguous_prefix_is_a_clear_error_listing_the_candidates(cli: Cli) -> None:
    first = str(_start(cli)["run_id"])
    second = str(_start(cli)["run_id"])
    result = cli.run("show", "")
    assert result.returncode == 2
    # The empty prefix is refused outright; a shared prefix lists what it matches.
    common = 0
    while first[common] == second[common]:
        common += 1
    if common:
        result = cli.run("show", first[:common])
        assert result.returncode == 2
        assert "ambiguous" in result.stderr and first in result.stderr
    assert "Traceback" not in result.stderr


def test_a_prefix_that_matches_nothing_names_the_database_it_looked_in(cli: Cli) -> None:
    cli.make_database()
    result = cli.run("export", "ffffffffffffz")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "no job id starts with 'ffffffffffffz'" in result.stderr
    assert str(cli.db) in result.stderr


def test_a_run_id_where_a_checkpoint_id_is_asked_says_which_id_was_meant(cli: Cli) -> None:
    """Found by a new-user trial: `runs` lists run ids, and `fork <run id>` said only "no
    checkpoint id starts with …"."""
    boundary = _start(cli)
    run_id = str(boundary["run_id"])
    checkpoints = json.loads(cli.run("show", run_id, "--json").stdout)["checkpoints"]
    fork = cli.run("fork", run_id[:8])
    assert fork.returncode == 2 and fork.stdout == ""
    last = checkpoints[-1]
    assert f"its last checkpoint is {last['id']} (step {last['step']})" in fork.stderr
    assert len(fork.stderr.strip().splitlines()) == 1


def _answered_to_the_end(cli: Cli) -> tuple[str, str]:
    """A demo run taken to completion: its run id and its job's."""
    run_id = str(_start(cli)["run_id"])
    assert cli.run("respond", run_id, "1").returncode == 3
    assert cli.run("respond", run_id, "allow").returncode == 0
    job_id = json.loads(cli.run("show", run_id, "--json").stdout)["run"]["job_id"]
    return run_id, str(job_id)


def test_a_run_id_where_a_job_id_is_asked_names_its_job_and_says_so_in_one_line(
    cli: Cli,
) -> None:
    """Found by a new-user trial: `runs` lists run ids, and `export`, `follow-up` and the
    TUI's `--resume` refused one ("no job id starts with …; … is run …, of job …")."""
    run_id, job_id = _answered_to_the_end(cli)
    note = f"agent-tui: run {run_id[:8]} is in job {job_id[:8]}: using that job\n"

    by_job = cli.run("export", job_id)
    by_run = cli.run("export", run_id[:8])
    assert (by_run.returncode, by_run.stdout) == (0, by_job.stdout)
    assert by_run.stderr == note and by_job.stderr == ""
    assert by_run.stdout.startswith("# summarise")

    followed = cli.run("follow-up", run_id, "and the budget?", "--json", "--model", "demo:instant")
    assert followed.returncode == 0, followed.stderr
    assert followed.stderr.startswith(note)
    new_run = str(json_lines(followed.stdout)[-1]["run_id"])
    assert json.loads(cli.run("show", new_run, "--json").stdout)["run"]["job_id"] == job_id

    for command in ("archive", "unarchive"):
        done = cli.run(command, run_id[:8])
        assert done.returncode == 0, done.stderr
        assert done.stderr == note
        assert f"{command.capitalize()}d job {job_id}" in done.stdout


def test_delete_takes_only_a_job_s_own_id_never_one_inferred_from_a_run_s(cli: Cli) -> None:
    """What `delete` removes cannot come back: a run's id (which names its job for `export`,
    `archive` and the rest) is refused, and nothing is deleted."""
    run_id, job_id = _answered_to_the_end(cli)
    assert cli.run("archive", job_id).returncode == 0
    refused = cli.run("delete", run_id[:8], "--yes")
    assert refused.returncode == 2
    assert refused.stdout == ""
    assert refused.stderr.startswith("agent-tui: error: no job id starts with")
    assert refused.stderr.count("\n") == 1
    assert json.loads(cli.run("show", run_id, "--json").stdout)["run"]["job_id"] == job_id


def _rename_run(cli: Cli, old: str, new: str) -> None:
    """Give a run another id, everywhere the database names it (ids are random: this makes
    two that share a prefix)."""
    with sqlite3.connect(cli.db) as conn:
        conn.execute("PRAGMA foreign_keys = OFF")
        tables = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        for (table,) in tables:
            for column in [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]:
                if column.endswith("run_id") or (table == "runs" and column == "id"):
                    conn.execute(f"UPDATE {table} SET {column} = ? WHERE {column} = ?", (new, old))


def test_a_prefix_of_several_runs_where_a_job_id_is_asked_stays_an_error_listing_them(
    cli: Cli,
) -> None:
    first, second = "abcdef01" + "0" * 24, "abcdef02" + "0" * 24
    _rename_run(cli, str(_start(cli)["run_id"]), first)
    _rename_run(cli, str(_start(cli)["run_id"]), second)

    def jobs_and_runs() -> list[tuple[object, ...]]:
        with sqlite3.connect(cli.db) as conn:
            return conn.execute(
                "SELECT r.id, r.state, j.id, j.archived FROM runs AS r"
                " JOIN jobs AS j ON j.id = r.job_id ORDER BY r.id"
            ).fetchall()

    before = jobs_and_runs()
    assert len(before) == 2
    for argv in (("export", "abcdef0"), ("follow-up", "abcdef0", "more"), ("archive", "abcd")):
        refused = cli.run(*argv)
        assert refused.returncode == 2, argv
        assert refused.stdout == ""
        assert len(refused.stderr.strip().splitlines()) == 1
        assert "it starts several run ids" in refused.stderr
        assert first in refused.stderr and second in refused.stderr
    assert jobs_and_runs() == before  # no run started, no job archived


def test_the_answer_hint_carries_db_when_the_database_is_not_the_default(cli: Cli) -> None:
    result = cli.run("run", "summarise", "--model", "demo:instant")
    assert result.returncode == 3
    assert f"agent-tui --db {cli.db} respond " in result.stdout + result.stderr


def test_a_relative_db_is_absolute_in_the_hint_so_it_works_from_any_folder(cli: Cli) -> None:
    result = cli.run("--db", "../relative.db", "run", "summarise", "--model", "demo:instant")
    assert result.returncode == 3, result.stderr
    absolute = (cli.workspace.parent / "relative.db").resolve()
    hint_prefix = f"agent-tui --db {absolute} respond "
    assert hint_prefix in result.stdout + result.stderr
    assert "../relative.db" not in result.stdout + result.stderr
    run_id = (result.stdout + result.stderr).split(hint_prefix, 1)[1].split()[0]
    # The hint, as printed, answers the run from another folder.
    answered = subprocess.run(
        [*agent_tui_command(), "--db", str(absolute), "respond", run_id, "1"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=cli.env,
        cwd=cli.root,
        timeout=60,
        check=False,
    )
    assert answered.returncode in (0, 3), answered.stderr


def test_the_answer_hint_has_no_db_for_the_default_database(cli: Cli) -> None:
    result = cli.run("run", "summarise", "--model", "demo:instant", global_options=False)
    assert result.returncode == 3, result.stderr
    assert "agent-tui respond " in result.stdout + result.stderr
    assert "--db" not in result.stdout + result.stderr


def test_the_tui_flags_parse_and_run_still_takes_model_and_agent() -> None:
    parser = build_parser()
    args = parser.parse_args(["--model", "demo", "--agent", "reviewer", "--resume", "3fa2"])
    assert (args.model, args.agent, args.resume, args.continue_last) == (
        "demo",
        "reviewer",
        "3fa2",
        False,
    )
    assert parser.parse_args(["--continue"]).continue_last is True
    run = parser.parse_args(["run", "task", "--model", "demo:instant", "--agent", "a"])
    assert (run.model, run.agent) == ("demo:instant", "a")
    before = parser.parse_args(["--model", "demo", "run", "task"])
    assert before.model == "demo"


@pytest.mark.slow
def test_resume_with_an_unknown_job_is_one_line_naming_the_database_and_opens_nothing(
    cli: Cli,
) -> None:
    with terminal(cli, "--resume", "nope") as term:
        term.expect(b"no job id starts with 'nope'", timeout=60)
        assert term.finish() == 2
    assert str(cli.db) in term.text()
    assert "Traceback" not in term.text()


@pytest.mark.slow
def test_resume_with_a_run_id_opens_that_runs_job(cli: Cli) -> None:
    """Found by a new-user trial: `runs` lists run ids, and `--resume <run id>` ended with "no
    job id starts with …"; it opens the run's job now (its open question is on screen)."""
    run_id = str(_start(cli)["run_id"])
    with terminal(cli, "--resume", run_id[:8]) as term:
        term.expect(b"What should the notes focus on?", timeout=60)
        term.type("\x11")  # ctrl+q
        assert term.finish() == 0, term.text()
    assert "no job id" not in term.text()


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--model", "nosuch"], "unknown model provider 'nosuch' in 'nosuch'"),
        (["--model", "demo:nosuch"], "unknown demo model 'demo:nosuch'"),
        (["--agent", "nosuch"], "unknown agent 'nosuch'; configured agents: default"),
        (["--resume", "nope"], "no job id starts with 'nope': there is no database at"),
    ],
    ids=["model", "demo-model", "agent", "resume"],
)
def test_a_mistyped_tui_flag_ends_before_anything_is_drawn_or_created(
    cli: Cli, flags: list[str], says: str
) -> None:
    """Found by a new-user trial: each drew the whole screen, then ended; with a ``--db`` in a
    new folder, the folder (and, for --resume, an empty database) was left behind."""
    with terminal(cli, *flags) as term:
        assert term.finish() == 2, term.text()
    lines = [line for line in term.text().splitlines() if line.strip()]
    assert len(lines) == 1 and says in lines[0], term.text()
    assert "\x1b[?1049h" not in term.text()  # the alternate screen was never entered
    assert not cli.db.parent.exists()


@pytest.mark.parametrize(
    ("model", "says"),
    [
        ("demo:bad", "unknown demo model 'demo:bad'"),
        ("anthropic:claude-sonnet-5", "ANTHROPIC_API_KEY"),
    ],
    ids=["no-such-model", "no-key"],
)
def test_an_agent_whose_model_cannot_be_used_ends_the_tui_before_anything_is_drawn(
    cli: Cli, model: str, says: str
) -> None:
    """Found by a trial: `agent-tui --agent b` opened the TUI and refused only the first task.
    It ends at once as a mistyped `--agent` does, naming the file, line and key; `--model`
    does not help, as new jobs of the agent use its own model."""
    (cli.workspace / "agent-tui.toml").write_text(
        f'[agents.b]\ninstructions = "Checks."\nmodel = "{model}"\n'
    )
    with terminal(cli, "--agent", "b", "--model", "demo") as term:
        assert term.finish() == 2, term.text()
    lines = [line for line in term.text().splitlines() if line.strip()]
    where = f"agent-tui: error: {cli.workspace / 'agent-tui.toml'}:3: agents.b.model: "
    assert len(lines) == 1 and lines[0].startswith(where) and says in lines[0], term.text()
    assert "\x1b[?1049h" not in term.text()  # the alternate screen was never entered
    assert not cli.db.parent.exists()


@pytest.mark.parametrize(
    ("stdin", "stdout"), [("pipe", "pipe"), ("terminal", "pipe"), ("pipe", "terminal")]
)
def test_the_tui_without_a_terminal_refuses_at_once_and_creates_nothing(
    cli: Cli, stdin: str, stdout: str
) -> None:
    master, slave = os.openpty()
    try:
        result = subprocess.run(
            cli.argv(),
            stdin=slave if stdin == "terminal" else subprocess.DEVNULL,
            stdout=slave if stdout == "terminal" else subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=cli.env,
            cwd=cli.workspace,
            timeout=30,
            check=False,
        )
    finally:
        os.close(slave)
        os.close(master)
    assert result.returncode == 2
    assert result.stderr.decode() == (
        "agent-tui: error: the TUI needs a terminal (stdin and stdout); "
        "for headless use: agent-tui run PROMPT\n"
    )
    assert not result.stdout
    assert not cli.db.parent.exists()


def test_continue_and_resume_cannot_be_combined(cli: Cli) -> None:
    result = cli.run("--continue", "--resume", "abc")
    assert result.returncode == 2
    assert "not allowed with" in result.stderr


def test_the_command_names_are_the_parsers_commands() -> None:
    subparsers = next(
        action
        for action in build_parser()._actions
        if isinstance(action, argparse._SubParsersAction)
    )
    assert set(subparsers.choices) == COMMAND_NAMES


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--db", "x.db"],
        ["--db=x.db", "--workspace", "ws", "--model", "demo", "--agent", "a"],
        ["--continue", "--attach"],
        ["--resume", "3fa2", "--wor", "ws"],  # an abbreviation, as argparse allows
        ["--model", "run"],  # a value that is a command's name
        ["--db", "x.db", "runs", "--limit", "3"],
        ["run", "task", "--model", "demo:instant", "--db", "y.db"],
    ],
)
def test_arguments_are_parsed_as_the_whole_parser_parses_them(argv: list[str]) -> None:
    assert parse_arguments(argv) == build_parser().parse_args(argv)


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["-h"],
        ["--hel"],
        ["--version"],
        ["--vers"],
        ["rnus"],
        ["--db"],
        ["--continue", "--resume", "3fa2"],
        ["--db", "x.db", "stray"],
        ["--unknown"],
    ],
)
def test_help_and_mistakes_are_answered_by_the_whole_parser(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as whole:
        build_parser().parse_args(argv)
    expected = capsys.readouterr()
    with pytest.raises(SystemExit) as fast:
        parse_arguments(argv)
    assert fast.value.code == whole.value.code
    assert capsys.readouterr() == expected


def test_every_option_of_every_command_says_what_it_does_in_its_help() -> None:
    """Found by a trial: `runs --help` listed `--limit N` and `export --help` `--format` with
    no word on what they do or their default."""
    import argparse

    unexplained: list[str] = []

    def walk(parser: argparse.ArgumentParser, name: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for command, sub in action.choices.items():
                    walk(sub, command)
            elif action.option_strings and not action.help:
                unexplained.append(f"{name} {action.option_strings[0]}")

    walk(build_parser(), "agent-tui")
    assert unexplained == []
