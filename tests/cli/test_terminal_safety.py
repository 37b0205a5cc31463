"""Terminal escape sequences in a prompt, in model text and in file contents and names never
reach the terminal raw: `run`, `respond`, `show`, `runs` and `export --format md` show them
visibly (``␛]0;…␇``); JSON output stays exact."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from runtime.textsafe import terminal_safe, terminal_safe_line
from tests.cli.harness import Cli, boundary_of, json_lines
from tests.fakes.anthropic_server import spawn_fake_server, text_response

TITLE = "\x1b]0;pwned\x07"
CLEAR = "\x1b[2J"
CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"
RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def strings_in(value: Any) -> str:
    """Every string inside a decoded JSON value, joined (JSON keeps the raw characters)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return "\n".join(strings_in(v) for v in value.values())
    if isinstance(value, list):
        return "\n".join(strings_in(v) for v in value)
    return ""


def assert_terminal_safe(text: str) -> None:
    found = RAW_CONTROL.search(text)
    assert found is None, f"raw control character {found.group()!r} in: {text!r}"


def test_the_sanitiser_shows_escape_sequences_visibly_and_keeps_newlines_and_tabs() -> None:
    assert terminal_safe(f"a{TITLE}b\n\tc") == "a␛]0;pwned␇b\n\tc"
    assert terminal_safe(CLEAR) == "␛[2J"
    assert terminal_safe(CLIPBOARD) == "␛]52;c;cm0gLXJmIH4=␇"
    assert terminal_safe("one\r\ntwo\rover\bX\x9b31m") == "one\ntwo␍over␈X␛[31m"
    assert terminal_safe("evil\u202egnp.exe") == "evil⟨U+202E⟩gnp.exe"
    assert terminal_safe("plain text, ünïcode ✓") == "plain text, ünïcode ✓"
    assert terminal_safe_line("a\nb\tc\x1b") == "a␊b c␛"
    # Piece by piece, as text streams, gives the same result as the whole.
    pieces = ["x\x1b", "]0;t", "\x07y"]
    assert "".join(terminal_safe(p) for p in pieces) == terminal_safe("".join(pieces))


def run_demo_to_the_end(cli: Cli, prompt: str) -> list[str]:
    """`run` with the demo model, then `respond` (plain output) until the run completes;
    returns every stdout and stderr text seen."""
    outputs: list[str] = []
    result = cli.run("run", prompt, "--model", "demo:instant")
    outputs += [result.stdout, result.stderr]
    for _ in range(5):
        if result.returncode != 3:
            break
        shown = cli.run("runs", "--json", "--limit", "1")
        run = json.loads(shown.stdout.splitlines()[0])
        answer = "1" if "Question" in result.stderr + result.stdout else "allow"
        result = cli.run("respond", run["id"], answer)
        outputs += [result.stdout, result.stderr]
    assert result.returncode == 0, result.stderr
    return outputs


def test_escapes_in_a_prompt_and_in_files_the_demo_reads_are_shown_visibly(cli: Cli) -> None:
    (cli.workspace / "README.md").write_text(f"{CLIPBOARD}Sample {TITLE}project\n")
    (cli.workspace / f"{TITLE}.txt").write_text(f"{CLEAR}cleared\n")
    prompt = f"summarise {TITLE}this{CLEAR} project"
    for text in run_demo_to_the_end(cli, prompt):
        assert_terminal_safe(text)

    runs = cli.run("runs")
    assert runs.returncode == 0, runs.stderr
    assert_terminal_safe(runs.stdout)
    assert "␛]0;pwned␇" in runs.stdout  # the job title, from the prompt

    [listed] = json_lines(cli.run("runs", "--json", "--limit", "1").stdout)
    shown = cli.run("show", listed["id"])
    assert shown.returncode == 0, shown.stderr
    assert_terminal_safe(shown.stdout)
    assert "␛]52;c;cm0gLXJmIH4=␇Sample" in shown.stdout  # file content, in a tool result
    assert "␛]0;pwned␇.txt" in shown.stdout  # a file name

    exported = cli.run("export", listed["job_id"], "--format", "md")
    assert exported.returncode == 0, exported.stderr
    assert_terminal_safe(exported.stdout)
    assert "␛[2Jcleared" in exported.stdout or "␛]0;pwned␇" in exported.stdout

    # JSON stays exact: the raw characters come back after decoding.
    as_json = json.loads(cli.run("show", listed["id"], "--json").stdout)
    assert TITLE in strings_in(as_json)
    exported_json = cli.run("export", listed["job_id"], "--format", "json").stdout
    assert f"{CLIPBOARD}Sample" in strings_in(json.loads(exported_json))


def test_escapes_in_model_text_streamed_by_run_are_shown_visibly(cli: Cli, tmp_path: Path) -> None:
    script = [text_response([f"Hello {CLEAR}", "\x1b]52;c;", "cm0gLXJmIH4=\x07 bye", TITLE])]
    with spawn_fake_server(script, directory=tmp_path) as server:
        cli.env.update(ANTHROPIC_API_KEY="sk-ant-test-escapes", ANTHROPIC_BASE_URL=server.base_url)
        plain = cli.run("run", "say hello", "--model", "anthropic:claude-sonnet-5")
    assert plain.returncode == 0, plain.stderr
    assert_terminal_safe(plain.stdout + plain.stderr)
    assert "Hello ␛[2J␛]52;c;cm0gLXJmIH4=␇ bye␛]0;pwned␇" in plain.stdout

    [listed] = json_lines(cli.run("runs", "--json", "--limit", "1").stdout)
    as_json = json.loads(cli.run("show", listed["id"], "--json").stdout)
    texts = strings_in(as_json)
    assert f"Hello {CLEAR}\x1b]52;c;cm0gLXJmIH4=\x07 bye{TITLE}" in texts


def test_run_json_keeps_control_characters_exact(cli: Cli, tmp_path: Path) -> None:
    script = [text_response([f"a{TITLE}b"])]
    with spawn_fake_server(script, directory=tmp_path) as server:
        cli.env.update(ANTHROPIC_API_KEY="sk-ant-test-escapes", ANTHROPIC_BASE_URL=server.base_url)
        result = cli.run("run", "x", "--json", "--model", "anthropic:claude-sonnet-5")
    lines = json_lines(result.stdout)
    assert boundary_of(lines)["state"] == "completed"
    assert "\x1b" not in result.stdout  # escaped by JSON itself
    deltas = "".join(e["text"] for e in lines if e["kind"] == "message_delta")
    assert deltas == f"a{TITLE}b"
