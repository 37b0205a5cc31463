"""The README's worked examples, pasted as a new user pastes them: each section's code block is
read from the README itself, so an example that stops working fails here."""

from __future__ import annotations

import re
from pathlib import Path

from tests.cli.harness import Cli, boundary_of, json_lines

README = Path(__file__).resolve().parents[2] / "README.md"


def code_blocks(section: str, language: str) -> list[str]:
    """The fenced ``language`` blocks under the README heading ``section`` (up to the next
    heading of the same or a higher level)."""
    text = README.read_text(encoding="utf-8")
    heading = re.search(rf"^(#+) {re.escape(section)}\n", text, flags=re.MULTILINE)
    assert heading is not None, f"no section {section!r} in the README"
    level = len(heading.group(1))
    rest = text[heading.end() :]
    end = re.search(rf"^#{{1,{level}}} ", rest, flags=re.MULTILINE)
    body = rest[: end.start()] if end else rest
    return re.findall(rf"^```{language}\n(.*?)^```", body, flags=re.MULTILINE | re.DOTALL)


def test_the_readmes_delegation_example_runs_the_coordinator_with_its_two_delegates(
    cli: Cli,
) -> None:
    (config,) = code_blocks("Agents and delegation", "toml")
    (cli.workspace / "agent-tui.toml").write_text(config)

    first = cli.run(
        "run", "--agent", "coordinator", "survey this project", "--json", "--model", "demo:instant"
    )

    assert first.returncode == 3, first.stderr  # a delegate asks; no configuration error
    lines = json_lines(first.stdout)
    delegated = {
        block["name"]
        for line in lines
        if line["kind"] == "message_committed"
        for block in line["message"]["content"]
        if block["type"] == "tool_use"
    }
    assert {"delegate_to_researcher", "delegate_to_reviewer"} <= delegated
    answered = cli.run("respond", boundary_of(lines)["run_id"], "1", "--json")
    assert answered.returncode == 0, answered.stderr
    assert boundary_of(json_lines(answered.stdout))["state"] == "completed"
