"""`agent-tui doctor` fails on what would stop agent-tui later (new-user trials: it said "All
fine." where `run` then refused): a model `run` refuses, the default one or an agent's (the same
check, ``check_reference``); a theme the TUI does not have; a hook whose program is a path that
cannot run. Each problem is one `error:` line, and doctor exits 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.harness import Cli, json_lines

pytestmark = pytest.mark.slow


def _config(cli: Cli, text: str) -> None:
    (cli.workspace / "agent-tui.toml").write_text(text)


def _errors(stdout: str) -> list[str]:
    return [line.strip() for line in stdout.splitlines() if line.strip().startswith("error:")]


def test_doctor_fails_on_a_default_model_that_run_refuses_with_the_same_words(cli: Cli) -> None:
    """Both name the file, line and key (a CLI trial: `run` said only "unknown model provider
    'nosuch'", which could have come from --model, AGENT_TUI_MODEL or any config file)."""
    _config(cli, '[defaults]\nagent = "default"\nmodel = "nosuch:x"\n')
    refused = cli.run("run", "hi")
    assert refused.returncode == 2
    [message] = refused.stderr.splitlines()
    where = f"{cli.workspace / 'agent-tui.toml'}:3: defaults.model"
    assert message.startswith(f"agent-tui: error: {where}: unknown model provider 'nosuch'")

    doctor = cli.run("doctor")
    assert doctor.returncode == 1, doctor.stdout
    assert "Default model: nosuch:x\n" in doctor.stdout
    assert _errors(doctor.stdout) == [message.removeprefix("agent-tui: ")]
    assert doctor.stdout.rstrip().endswith("Some checks failed (see above).")


def test_a_default_model_from_agent_tui_model_is_not_blamed_on_the_config_file(cli: Cli) -> None:
    _config(cli, '[defaults]\nmodel = "demo"\n')
    cli.env = {**cli.env, "AGENT_TUI_MODEL": "nosuch:x"}
    refused = cli.run("run", "hi")
    assert refused.returncode == 2
    assert refused.stderr == (
        "agent-tui: error: unknown model provider 'nosuch' in 'nosuch:x': use anthropic:MODEL,"
        " openai:MODEL or demo\n"
    )
    doctor = cli.run("doctor")
    assert _errors(doctor.stdout) == [refused.stderr.strip().removeprefix("agent-tui: ")]


def test_doctor_names_each_agent_whose_model_run_would_refuse(cli: Cli) -> None:
    """Both name the file, line and key (a new-user trial: `run --agent x` said only "unknown
    demo model", and doctor "[agents.x] model:", neither which file)."""
    _config(
        cli,
        '[agents.fine]\nmodel = "demo:instant"\n\n'
        '[agents.x]\ninstructions = "Checks."\nmodel = "demo:bad"\n\n'
        '[agents.inherits]\ninstructions = "Uses the default model."\n',
    )
    where = f"{cli.workspace / 'agent-tui.toml'}:6: agents.x.model"
    problem = "unknown demo model 'demo:bad': use `demo` or `demo:instant`"
    doctor = cli.run("doctor")
    assert doctor.returncode == 1, doctor.stdout
    assert _errors(doctor.stdout) == [f"error: {where}: {problem}"]
    # `run` with that agent refuses up front, in one line, before anything is stored.
    refused = cli.run("run", "hi", "--agent", "x", "--json")
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr == f"agent-tui: error: {where}: {problem}\n"
    assert json_lines(cli.run("runs", "--json").stdout) == []
    assert cli.run("run", "hi", "--agent", "fine", "--json").returncode == 3  # the demo asks


def test_doctor_fails_on_a_theme_agent_tui_does_not_have(cli: Cli) -> None:
    _config(cli, '[defaults]\ntheme = "no-theme"\n')
    doctor = cli.run("doctor")
    assert doctor.returncode == 1, doctor.stdout
    [error] = _errors(doctor.stdout)
    assert error.startswith("error: [defaults] theme: no theme named 'no-theme' (themes: ")
    assert "agent-dusk" in error and "textual-dark" in error  # ours and Textual's

    _config(cli, '[defaults]\ntheme = "agent-moss"\n')
    fine = cli.run("doctor")
    assert (fine.returncode, _errors(fine.stdout)) == (0, []), fine.stdout
    assert "All fine." in fine.stdout


def _hook(event: str, command: str) -> str:
    return f'[[hooks.{event}]]\nmatcher = "*"\ncommand = {json.dumps(command)}\n\n'


def test_doctor_fails_on_a_hook_whose_program_is_a_path_that_cannot_run(cli: Cli) -> None:
    hooks = cli.workspace / "hooks"
    hooks.mkdir()
    (hooks / "ok.sh").write_text("#!/bin/sh\nexit 0\n")
    (hooks / "ok.sh").chmod(0o755)
    (hooks / "plain.sh").write_text("#!/bin/sh\nexit 0\n")
    (hooks / "plain.sh").chmod(0o644)
    _config(
        cli,
        _hook("before_tool", "./hooks/nonexistent.sh")
        + _hook("after_tool", "./hooks/plain.sh --quiet")
        + _hook("on_input_required", "./hooks")
        + _hook("on_run_finished", "FOO=1 ./hooks/ok.sh")  # runs: fine
        + _hook("before_tool", "true")  # found on PATH by the shell: fine
        + _hook("after_tool", '"$HOME"/bin/hook.sh'),  # the shell's to expand: not checked
    )
    doctor = cli.run("doctor")
    assert doctor.returncode == 1, doctor.stdout
    workspace = Path(cli.workspace)
    assert _errors(doctor.stdout) == [
        "error: hook before_tool *: ./hooks/nonexistent.sh does not exist "
        f"({workspace / 'hooks' / 'nonexistent.sh'})",
        "error: hook after_tool *: ./hooks/plain.sh is not executable "
        f"(chmod +x {workspace / 'hooks' / 'plain.sh'})",
        f"error: hook on_input_required *: ./hooks is a folder, not a program ({hooks})",
    ]


def test_doctor_checks_the_claude_code_hooks_agent_tui_runs_too(cli: Cli) -> None:
    settings = {
        "hooks": {
            "PreToolUse": [
                {"matcher": "Bash", "hooks": [{"type": "command", "command": "./gone.sh"}]}
            ]
        }
    }
    (cli.workspace / ".claude").mkdir()
    (cli.workspace / ".claude" / "settings.json").write_text(json.dumps(settings))
    doctor = cli.run("doctor")
    assert doctor.returncode == 1, doctor.stdout
    [error] = _errors(doctor.stdout)
    assert error.startswith("error: hook before_tool Bash (")
    assert error.endswith(f": ./gone.sh does not exist ({cli.workspace / 'gone.sh'})")


def test_a_tool_name_no_tool_has_is_a_warning_of_doctor_and_of_the_agents_first_run(
    cli: Cli,
) -> None:
    """A new-user trial: `tools = ["read_flie"]` left the agent silently without the tool.
    Patterns are not flagged, nor the tool part of `server__tool` (MCP tools are known only
    once the servers start); a server part that names no server is."""
    _config(
        cli,
        '[agents.x]\ninstructions = "Reads."\n'
        'tools = ["list_dir", "read_flie", "git*", "github__create_issue",\n'
        '  "delegate_to_default", "use_skill"]\n',
    )
    warning = (
        f"{cli.workspace / 'agent-tui.toml'}:3: agents.x.tools[1]: no tool named 'read_flie' "
        "(did you mean 'read_file'?); the agent runs without it"
    )
    no_server = (
        f"{cli.workspace / 'agent-tui.toml'}:3: agents.x.tools[3]: no MCP server named 'github'"
        " for 'github__create_issue' (none is configured); the agent runs without it"
    )
    doctor = cli.run("doctor")
    assert doctor.returncode == 0, doctor.stdout  # the agent still runs
    warnings = [line.strip() for line in doctor.stdout.splitlines() if "warning:" in line]
    assert warnings == [f"warning: {warning}", f"warning: {no_server}"]
    configuration = doctor.stdout.split("Configuration:\n")[1].split("\n\n")[0]
    assert f"warning: {warning}" in configuration

    run = cli.run("run", "hi", "--agent", "x")
    assert run.returncode == 3, run.stderr  # the demo asks
    assert run.stderr.count("read_flie") == 1, run.stderr
    assert f"agent-tui: warning: {warning}\n" in run.stderr
    assert f"agent-tui: warning: {no_server}\n" in run.stderr
    assert "read_flie" not in cli.run("run", "hi").stderr  # the default agent's run


def _section(stdout: str, title: str) -> list[str]:
    """The lines of one of doctor's extension sections (``Skills:`` up to the next title)."""
    lines = stdout.splitlines()
    start = lines.index(title) + 1
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("  "))
    return [line.strip() for line in lines[start:end]]


def test_a_broken_skill_command_or_phase_is_one_warning_under_its_own_section(cli: Cli) -> None:
    """A trial: a broken SKILL.md was printed after `Phases:`, its path twice
    (`warning: …/SKILL.md: …/SKILL.md:3: front matter: …`)."""
    base = cli.workspace / ".agent-tui"
    broken = "---\nname: x\ndescription: [never closed\n---\nBody.\n"
    skill = base / "skills" / "broken" / "SKILL.md"
    command = base / "commands" / "broken.md"
    phase = base / "phases" / "default" / "plan" / "PHASE.md"
    unnamed = base / "skills" / "unnamed" / "SKILL.md"  # fine YAML, no description
    for path, text in ((skill, broken), (command, broken), (phase, broken)):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    unnamed.parent.mkdir(parents=True)
    unnamed.write_text("---\nname: unnamed\n---\nBody.\n")
    doctor = cli.run("doctor")
    front_matter = "front matter: expected ',' or ']', but got '<stream end>'"
    assert _section(doctor.stdout, "Skills:") == [
        "none",
        f"warning: {skill}:4: {front_matter}",
        f"warning: {unnamed}: description is missing: the model chooses a skill by it",
    ]
    assert _section(doctor.stdout, "Commands:") == ["none", f"warning: {command}:4: {front_matter}"]
    assert _section(doctor.stdout, "Phases:") == ["none", f"warning: {phase}:4: {front_matter}"]
    assert doctor.stdout.count(str(skill)) == 1


def test_a_hook_entrys_bad_value_is_reported_at_its_own_line(cli: Cli) -> None:
    """A trial: `timeout = "ten"` on line 7 was reported at line 1, the first
    `[[hooks.before_tool]]` header; now the key's own line, in the entry it belongs to."""
    _config(
        cli,
        '[[hooks.before_tool]]\ncommand = "true"\n\n'
        '[[hooks.before_tool]]\nmatcher = "write_file"\ncommand = "true"\ntimeout = "ten"\n\n'
        '[[hooks.after_tool]]\nmatcher = "*"\ncommand = "true"\n',
    )
    where = f"{cli.workspace / 'agent-tui.toml'}:7: hooks.before_tool[1].timeout: "
    doctor = cli.run("doctor")
    assert doctor.returncode == 1, doctor.stdout
    [error] = _errors(doctor.stdout)
    assert error.startswith(f"error: {where}Input should be a valid number"), error
    refused = cli.run("run", "hi")
    assert refused.returncode == 2
    assert refused.stderr.startswith(f"agent-tui: error: {where}"), refused.stderr

    _config(cli, '[hooks]\n\n[[hooks.after_tool]]\nmatcher = "*"\n')  # no command: the entry
    [error] = _errors(cli.run("doctor").stdout)
    assert error.startswith(f"error: {cli.workspace / 'agent-tui.toml'}:3: hooks.after_tool[0]")
