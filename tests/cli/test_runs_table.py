"""What plain ``agent-tui runs`` shows in its table (the JSON carries every field)."""

from __future__ import annotations

from tests.cli.harness import Cli, boundary_of, json_lines

TEAM = """
[agents.coordinator]
instructions = "Split the work."
delegates = ["researcher", "reviewer"]

[agents.researcher]
description = "Looks things up."

[agents.reviewer]
description = "Reviews."
"""


def test_a_child_run_names_its_parent_by_the_short_id_not_the_whole_one(cli: Cli) -> None:
    """Found by a new-user trial: `↳ child of <32 characters>: …` made every child's line wrap
    at 80 columns; the parent's own row, in the same table, shows the whole id."""
    (cli.workspace / "agent-tui.toml").write_text(TEAM)
    started = cli.run(
        "run", "survey the project", "--agent", "coordinator", "--json", "--model", "demo:instant"
    )
    assert started.returncode == 3, started.stderr
    lines = json_lines(started.stdout)
    root_id, child_id = lines[0]["run_id"], boundary_of(lines)["run_id"]
    assert child_id != root_id

    listed = cli.run("runs")
    assert listed.returncode == 0, listed.stderr
    child_lines = [line for line in listed.stdout.splitlines() if line.startswith(child_id)]
    assert len(child_lines) == 1
    assert f"↳ child of {root_id[:8]}: survey the project" in child_lines[0]
    assert root_id not in child_lines[0]
    root_lines = [line for line in listed.stdout.splitlines() if line.startswith(root_id)]
    assert len(root_lines) == 1 and "child of" not in root_lines[0]
