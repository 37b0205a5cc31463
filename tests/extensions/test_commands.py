"""Custom commands: Markdown files become slash commands with $ARGUMENTS substituted."""

from __future__ import annotations

from pathlib import Path

from runtime.commands import (
    discover_commands,
    discover_invocables,
    expand_command,
)


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


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_a_built_in_name_shadows_a_skill_and_a_command_and_a_skill_shadows_a_command(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    _write(ws / ".agent-tui" / "commands" / "help.md", "Explain the help system.")
    _write(ws / ".agent-tui" / "skills" / "context" / "SKILL.md", "---\ndescription: C\n---\nC")
    _write(ws / ".agent-tui" / "skills" / "review" / "SKILL.md", "---\ndescription: R\n---\nRS")
    _write(ws / ".claude" / "commands" / "Review.md", "Review as a command.")
    _write(ws / ".claude" / "commands" / "plain.md", "Plain $ARGUMENTS.")

    found = discover_invocables(ws, env={"HOME": str(tmp_path / "nohome")})

    assert sorted(found.skills) == ["review"] and sorted(found.commands) == ["plain"]
    shadowed = {(s.name, Path(s.path).name, s.by) for s in found.shadowed}
    assert shadowed == {
        ("help", "help.md", "the built-in /help"),
        ("context", "SKILL.md", "the built-in /context"),
        ("review", "Review.md", "the skill /review"),
    }
    assert found.expand("help", "me") is None  # the built-in runs
    assert found.expand("HELP", "") is None
    assert found.expand("Review", "a.py") == "# Skill: review\n\nRS\n\nArguments: a.py"
    assert found.expand("plain", "text") == "Plain text."
