"""Project instructions: which files, in which order, recorded with their hashes."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from runtime.instructions import (
    changed_since,
    find_instruction_files,
    instructions_prompt,
    load_instructions,
)


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    home = tmp_path / "home"
    (home / ".config" / "agent-tui").mkdir(parents=True)
    (home / ".config" / "agent-tui" / "AGENTS.md").write_text("USER-MARKER")
    repo = tmp_path / "outside" / "repo"
    (repo / ".git").mkdir(parents=True)
    (tmp_path / "outside" / "AGENTS.md").write_text("ABOVE-THE-REPO-MARKER")
    (repo / "AGENTS.md").write_text("ROOT-AGENTS-MARKER")
    (repo / "CLAUDE.md").write_text("ROOT-CLAUDE-MARKER")
    workspace = repo / "pkg" / "app"
    workspace.mkdir(parents=True)
    (repo / "pkg" / "CLAUDE.md").write_text("MIDDLE-MARKER")
    (workspace / "AGENTS.md").write_text("WORKSPACE-MARKER")
    return workspace, {"HOME": str(home)}


def test_files_come_from_the_user_then_the_repository_root_down_to_the_workspace(
    layout: tuple[Path, dict[str, str]],
) -> None:
    workspace, env = layout
    texts = [f.text for f in load_instructions(workspace, env=env)]
    assert texts == [
        "USER-MARKER",
        "ROOT-AGENTS-MARKER",
        "ROOT-CLAUDE-MARKER",
        "MIDDLE-MARKER",
        "WORKSPACE-MARKER",
    ]


def test_files_above_the_repository_root_are_not_read(layout: tuple[Path, dict[str, str]]) -> None:
    workspace, env = layout
    prompt = instructions_prompt(load_instructions(workspace, env=env))
    assert "ABOVE-THE-REPO-MARKER" not in prompt
    assert prompt.index("ROOT-AGENTS-MARKER") < prompt.index("WORKSPACE-MARKER")
    assert str(workspace / "AGENTS.md") in prompt


def test_without_a_repository_only_the_workspace_folder_counts(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("PARENT")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "CLAUDE.md").write_text("HERE")
    env = {"HOME": str(tmp_path / "nohome")}
    assert [p.name for p in find_instruction_files(workspace, env=env)] == ["CLAUDE.md"]


def test_each_file_is_recorded_with_the_sha256_of_its_bytes(
    layout: tuple[Path, dict[str, str]],
) -> None:
    workspace, env = layout
    used = load_instructions(workspace, env=env)
    mine = next(f for f in used if f.path == str(workspace / "AGENTS.md"))
    assert mine.sha256 == hashlib.sha256(b"WORKSPACE-MARKER").hexdigest()


def test_a_changed_added_or_removed_file_is_reported_since_a_run_used_them(
    layout: tuple[Path, dict[str, str]],
) -> None:
    workspace, env = layout
    used = load_instructions(workspace, env=env)
    assert changed_since(used, workspace, env=env) == []
    (workspace / "AGENTS.md").write_text("EDITED")
    (workspace / "CLAUDE.md").write_text("NEW")
    (workspace.parent / "CLAUDE.md").unlink()
    assert changed_since(used, workspace, env=env) == sorted(
        [
            str(workspace / "AGENTS.md"),
            str(workspace / "CLAUDE.md"),
            str(workspace.parent / "CLAUDE.md"),
        ]
    )


def test_no_files_means_no_prompt_section(tmp_path: Path) -> None:
    assert instructions_prompt(load_instructions(tmp_path, env={"HOME": str(tmp_path)})) == ""
