"""Custom commands: Markdown files become slash commands with $ARGUMENTS substituted."""

from __future__ import annotations

from pathlib import Path

from runtime.commands import discover_commands, expand_command


def test_commands_are_named_by_their_path_and_the_nearest_wins(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / ".agent-tui" / "commands").mkdir(parents=True)
    (ws / ".claude" / "commands" / "git").mkdir(parents=True)
    (ws / ".agent-tui" / "commands" / "review.md").write_text(
        "---\ndescription: Review a file\nargument-hint: FILE\n---\nReview $ARGUMENTS carefully.\n"
    )
    (ws / ".claude" / "commands" / "review.md").write_text("FARTHER $ARGUMENTS")
    (ws / ".claude" / "commands" / "git" / "commit.md").write_text("# Commit\nCommit as $1.")
    catalog = discover_commands(ws, env={"HOME": str(tmp_path / "nohome")})
    assert sorted(catalog.commands) == ["git:commit", "review"]
    review = catalog.commands["review"]
    assert (review.description, review.argument_hint) == ("Review a file", "FILE")
    assert expand_command(review, "main.py") == "Review main.py carefully."
    commit = catalog.commands["git:commit"]
    assert commit.description == "Commit"
    assert expand_command(commit, "'Ada Lovelace' extra") == "# Commit\nCommit as Ada Lovelace."


def test_arguments_are_appended_when_the_body_does_not_use_them(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / ".claude" / "commands").mkdir(parents=True)
    (ws / ".claude" / "commands" / "plain.md").write_text("Do the thing.")
    command = discover_commands(ws, env={"HOME": str(tmp_path)}).commands["plain"]
    assert expand_command(command, "") == "Do the thing."
    assert expand_command(command, "now") == "Do the thing.\n\nnow"


def test_a_broken_command_file_is_reported_not_fatal(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / ".claude" / "commands").mkdir(parents=True)
    (ws / ".claude" / "commands" / "bad.md").write_text("---\ndescription: x\n")
    (ws / ".claude" / "commands" / "good.md").write_text("ok")
    catalog = discover_commands(ws, env={"HOME": str(tmp_path)})
    assert list(catalog.commands) == ["good"]
    assert "never closed" in catalog.problems[0].reason
