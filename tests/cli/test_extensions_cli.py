"""The extension points from the command line: `doctor` lists what is in effect (and which
Claude Code hook entries were used or skipped), `run "/name args"` expands a custom command or a
skill, and the plain output shows what the run noted."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.cli.harness import Cli, boundary_of, json_lines


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_doctor_lists_instructions_skills_commands_hooks_and_phases(cli: Cli) -> None:
    ws = cli.workspace
    write(ws / "AGENTS.md", "Be brief.")
    write(ws / ".claude" / "skills" / "review" / "SKILL.md", "---\ndescription: Review\n---\nR")
    write(ws / ".agent-tui" / "commands" / "git" / "commit.md", "Write a commit message.")
    write(ws / ".agent-tui" / "skills" / "broken" / "SKILL.md", "---\nname: broken\n---\nno desc")
    write(ws / ".agent-tui" / "phases" / "default" / "plan" / "PHASE.md", "Plan first.")
    write(ws / "agent-tui.toml", '[[hooks.before_tool]]\nmatcher = "shell"\ncommand = "true"\n')
    settings = {
        "hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "x"}]}],
            "SessionStart": [{"hooks": [{"type": "command", "command": "y"}]}],
        }
    }
    write(ws / ".claude" / "settings.json", json.dumps(settings))
    result = cli.run("doctor")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert f"{ws / 'AGENTS.md'} (sha256 " in out
    assert "  review: Review — " in out
    assert "  /git:commit: Write a commit message." in out
    assert "  before_tool shell: true" in out
    assert "used from Claude Code: " in out and "Bash → x" in out
    assert "skipped from Claude Code: " in out and "hooks.SessionStart" in out
    assert "  plan (initial): Plan first." in out
    assert "description is missing" in out  # the broken skill is reported, not fatal


def test_run_expands_a_custom_command_and_prints_the_notes(cli: Cli) -> None:
    write(
        cli.workspace / ".agent-tui" / "commands" / "review.md",
        "---\ndescription: Review one file\n---\nReview $ARGUMENTS: what could break?",
    )
    write(cli.workspace / "AGENTS.md", "Be brief.")
    result = cli.run("run", "/review src/main.py", "--model", "demo:instant", "--json")
    assert result.returncode == 3, result.stderr  # the demo asks a question: nobody answers
    lines = json_lines(result.stdout)
    boundary = boundary_of(lines)
    shown = cli.run("show", boundary["run_id"], "--json")
    assert json.loads(shown.stdout)["run"]["input"] == "Review src/main.py: what could break?"
    notes = [line for line in lines if line.get("kind") == "run_noted"]
    assert [n["note"] for n in notes] == ["instructions"]

    plain = cli.run("run", "/review README.md", "--model", "demo:instant")
    assert "instructions: AGENTS.md" in plain.stderr + plain.stdout


def test_the_instructions_note_tells_the_users_and_the_repositorys_files_apart(
    cli: Cli,
) -> None:
    """Found by a new-user trial: with the user's AGENTS.md, the repository root's and the
    workspace's, the note read "instructions: AGENTS.md, AGENTS.md, AGENTS.md"."""
    repository = cli.workspace.parent
    (repository / ".git").mkdir()
    write(repository / "AGENTS.md", "Repository rules.")
    write(cli.workspace / "AGENTS.md", "Be brief.")
    write(cli.workspace / "CLAUDE.md", "Use tabs.")
    write(Path(cli.env["XDG_CONFIG_HOME"]) / "agent-tui" / "AGENTS.md", "My own rules.")

    result = cli.run("run", "summarise this folder", "--model", "demo:instant", "--json")

    notes = [line for line in json_lines(result.stdout) if line.get("kind") == "run_noted"]
    assert [n["text"] for n in notes] == [
        "instructions: ~/.config/agent-tui/AGENTS.md, ../AGENTS.md, AGENTS.md, CLAUDE.md"
    ]


def test_an_unknown_slash_prompt_is_sent_as_typed(cli: Cli) -> None:
    result = cli.run("run", "/nothing here", "--model", "demo:instant", "--json")
    run_id = boundary_of(json_lines(result.stdout))["run_id"]
    shown = cli.run("show", run_id, "--json")
    assert json.loads(shown.stdout)["run"]["input"] == "/nothing here"


def test_a_command_named_like_a_built_in_is_reported_shadowed_and_run_sends_it_as_typed(
    cli: Cli,
) -> None:
    """Found by a trial: ``help.md`` was listed as ``/help`` by doctor and expanded by ``run``,
    while the TUI ran its built-in ``/help``. Built-ins win everywhere, and the reports say so."""
    help_file = cli.workspace / ".agent-tui" / "commands" / "help.md"
    write(help_file, "---\ndescription: Our help\n---\nExplain $ARGUMENTS.")
    write(
        cli.workspace / ".claude" / "skills" / "review" / "SKILL.md", "---\ndescription: R\n---\nR"
    )
    write(cli.workspace / ".claude" / "commands" / "review.md", "Review as a command.")

    doctor = cli.run("doctor").stdout
    assert f"  /help: Our help — {help_file} (shadowed by the built-in /help: never runs" in doctor
    assert "review.md (shadowed by the skill /review: never runs" in doctor

    result = cli.run("run", "/help me", "--model", "demo:instant", "--json")
    run_id = boundary_of(json_lines(result.stdout))["run_id"]
    shown = cli.run("show", run_id, "--json")
    assert json.loads(shown.stdout)["run"]["input"] == "/help me"
    assert f"/help: {help_file} is shadowed by the built-in /help; sent as typed" in result.stderr


SECRET = "sk-ant-test123"
NO_NOTES = """#!/bin/sh
cat > /dev/null
if [ "$ANTHROPIC_API_KEY" = "sk-ant-test123" ]; then
  echo "no notes here (the hook had its key)" >&2
else
  echo "no notes here (the hook had no key)" >&2
fi
exit 2
"""


def test_a_secret_in_a_hooks_command_line_reaches_no_record_export_or_report(cli: Cli) -> None:
    """Found by a new-user trial: a deny named the hook by its whole command line, key and
    all, and that went to the model, the database, exports, doctor and /context."""
    ws = cli.workspace
    hook = ws / "hooks" / "no-notes.sh"
    write(hook, NO_NOTES)
    hook.chmod(0o755)
    write(
        ws / "agent-tui.toml",
        f'[[hooks.before_tool]]\nmatcher = "*"\ncommand = "ANTHROPIC_API_KEY={SECRET} '
        './hooks/no-notes.sh"\n',
    )
    ran = cli.run("run", "look at the notes", "--model", "demo:instant", "--json")
    assert ran.returncode in (0, 3), ran.stderr
    job_id = json_lines(ran.stdout)[0]["job_id"]
    markdown = cli.run("export", job_id, "--format", "md")
    as_json = cli.run("export", job_id, "--format", "json")
    doctor = cli.run("doctor")
    assert markdown.returncode == as_json.returncode == 0
    files = [p for p in cli.db.parent.iterdir() if p.name.startswith(cli.db.name)]
    assert cli.db in files
    for path in files:
        assert SECRET.encode() not in path.read_bytes(), path
    for output in (ran, markdown, as_json, doctor):
        assert SECRET not in output.stdout + output.stderr
    # The hook ran with its environment, and denied; the denial names it by its program.
    assert "no notes here (the hook had its key)" in markdown.stdout
    assert "hook `./hooks/no-notes.sh`" in markdown.stdout
    assert "denied this tool call" in markdown.stdout
    assert "  before_tool *: ./hooks/no-notes.sh" in doctor.stdout


FAILS = """#!/bin/sh
cat > /dev/null
echo "oops not json --token=xyz789"
echo "second line"
exit 1
"""


def test_a_secret_passed_as_a_hooks_argument_reaches_no_record_export_or_report(cli: Cli) -> None:
    """Found by a new-user trial: ``--token=xyz789`` on a hook's command line was shown by
    doctor and in the failed call's error (to the model and the database), and a hook that
    printed something and failed read "no message"."""
    ws = cli.workspace
    hook = ws / "hooks" / "fail.sh"
    write(hook, FAILS)
    hook.chmod(0o755)
    write(
        ws / "agent-tui.toml",
        '[[hooks.before_tool]]\nmatcher = "*"\n'
        'command = "API_KEY=sekrit99 ./hooks/fail.sh --token=xyz789"\n',
    )
    ran = cli.run("run", "look at the notes", "--model", "demo:instant", "--json")
    assert ran.returncode in (0, 1, 3), ran.stderr
    job_id = json_lines(ran.stdout)[0]["job_id"]
    markdown = cli.run("export", job_id, "--format", "md")
    as_json = cli.run("export", job_id, "--format", "json")
    doctor = cli.run("doctor")
    files = [p for p in cli.db.parent.iterdir() if p.name.startswith(cli.db.name)]
    for path in files:
        data = path.read_bytes()
        assert b"xyz789" not in data and b"sekrit99" not in data, path
    for output in (ran, markdown, as_json, doctor):
        assert "xyz789" not in output.stdout + output.stderr
        assert "sekrit99" not in output.stdout + output.stderr
    assert "  before_tool *: ./hooks/fail.sh --token=…" in doctor.stdout
    assert (
        "hook `./hooks/fail.sh --token=…` exited with status 1: printed oops not json --token=…"
        in markdown.stdout
    ), markdown.stdout


def test_run_says_which_hook_a_call_waits_for_before_it_runs(cli: Cli) -> None:
    write(
        cli.workspace / "agent-tui.toml", '[[hooks.before_tool]]\nmatcher = "*"\ncommand = "true"\n'
    )
    ran = cli.run("run", "look around", "--model", "demo:instant")
    assert ran.returncode in (0, 3), ran.stderr
    waits = [line for line in ran.stderr.splitlines() if "checking with hook" in line]
    assert waits, ran.stderr
    # A line of its own, with no count before it (it read "… list_dir 0 checking …").
    assert all(re.fullmatch(r"\s*… \w+ checking with hook `true`…", line) for line in waits)
