"""Workspace confinement: every tool path stays inside the workspace, symlinks included."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runtime.errors import PathOutsideWorkspace
from runtime.tools.workspace import display_path, resolve_in_workspace


def test_a_relative_path_is_relative_to_the_workspace(workspace: Path) -> None:
    resolved = resolve_in_workspace(workspace, "src/main.py")
    assert resolved == (workspace / "src" / "main.py").resolve()


def test_dot_and_empty_path_are_the_workspace_itself(workspace: Path) -> None:
    assert resolve_in_workspace(workspace, ".") == workspace.resolve()
    assert resolve_in_workspace(workspace, "") == workspace.resolve()


def test_a_file_that_does_not_exist_yet_resolves_inside(workspace: Path) -> None:
    resolved = resolve_in_workspace(workspace, "new/deep/file.txt")
    assert resolved == workspace.resolve() / "new" / "deep" / "file.txt"


def test_dot_dot_inside_the_workspace_is_fine(workspace: Path) -> None:
    assert resolve_in_workspace(workspace, "src/../notes.txt") == (
        workspace.resolve() / "notes.txt"
    )


@pytest.mark.parametrize("path", ["..", "../outside.txt", "src/../../x", "../project-other/x"])
def test_dot_dot_escapes_are_refused_naming_the_path(workspace: Path, path: str) -> None:
    with pytest.raises(PathOutsideWorkspace) as caught:
        resolve_in_workspace(workspace, path)
    assert repr(path) in str(caught.value)
    assert "outside the workspace" in str(caught.value)


def test_an_absolute_path_outside_is_refused(workspace: Path) -> None:
    with pytest.raises(PathOutsideWorkspace, match=r"'/etc/passwd' is outside the workspace"):
        resolve_in_workspace(workspace, "/etc/passwd")


def test_an_absolute_path_inside_is_accepted(workspace: Path) -> None:
    inside = str(workspace / "notes.txt")
    assert resolve_in_workspace(workspace, inside) == (workspace / "notes.txt").resolve()


def test_a_symlink_leading_outside_is_refused(workspace: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret\n")
    (workspace / "innocent.txt").symlink_to(secret)
    with pytest.raises(PathOutsideWorkspace, match=r"symlink") as caught:
        resolve_in_workspace(workspace, "innocent.txt")
    assert "'innocent.txt'" in str(caught.value)


def test_a_symlinked_folder_leading_outside_is_refused_for_new_files(
    workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (workspace / "link").symlink_to(outside, target_is_directory=True)
    with pytest.raises(PathOutsideWorkspace):
        resolve_in_workspace(workspace, "link/new-file.txt")


def test_a_symlink_inside_the_workspace_is_followed(workspace: Path) -> None:
    (workspace / "alias.py").symlink_to(workspace / "src" / "main.py")
    assert resolve_in_workspace(workspace, "alias.py") == (workspace / "src" / "main.py").resolve()


def test_a_workspace_reached_through_a_symlink_still_confines(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "a.txt").write_text("a")
    alias = tmp_path / "alias"
    alias.symlink_to(real, target_is_directory=True)
    assert resolve_in_workspace(alias, "a.txt") == real.resolve() / "a.txt"
    assert resolve_in_workspace(alias, str(alias / "a.txt")) == real.resolve() / "a.txt"
    with pytest.raises(PathOutsideWorkspace):
        resolve_in_workspace(alias, "../real-sibling")


def test_paths_are_shown_relative_to_the_workspace(workspace: Path) -> None:
    resolved = resolve_in_workspace(workspace, "src/main.py")
    assert display_path(workspace, resolved) == "src/main.py"
    assert display_path(workspace, Path(os.path.realpath(workspace))) == "."


def test_paths_resolve_as_realpath_resolves_them_inside_the_workspace(workspace: Path) -> None:
    (workspace / "src" / "pkg").mkdir()
    (workspace / "src" / "pkg" / "mod.py").write_text("x = 1\n")
    (workspace / "lib").symlink_to(workspace / "src", target_is_directory=True)
    (workspace / "plain.txt").write_text("a file, not a folder\n")
    for path in [
        "lib/pkg/mod.py",  # through a symlinked folder that stays inside
        "lib/pkg/new.py",  # a new file below it
        "src/pkg/mod.py",
        "plain.txt/below",  # below a file: taken as given
        "missing/deeper/file.txt",
        "src/pkg/../../lib/pkg",
    ]:
        expected = Path(os.path.realpath(os.path.join(workspace, path)))
        assert resolve_in_workspace(workspace, path) == expected, path


def test_a_symlink_below_a_symlinked_folder_leading_outside_is_refused(
    workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret\n")
    (workspace / "src" / "deep").mkdir()
    (workspace / "src" / "deep" / "leak").symlink_to(outside, target_is_directory=True)
    (workspace / "lib").symlink_to(workspace / "src", target_is_directory=True)
    with pytest.raises(PathOutsideWorkspace, match="symlink"):
        resolve_in_workspace(workspace, "lib/deep/leak/secret.txt")
