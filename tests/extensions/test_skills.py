"""Skills: found in their folders, offered by description, loaded through use_skill."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runtime.errors import ToolError
from runtime.skills import (
    Skill,
    UseSkillTool,
    discover_skills,
    skill_invocation,
    skill_text,
    skills_prompt,
    workspace_skills,
)
from runtime.tools.base import ToolContext


def _skill(folder: Path, text: str, *extra: str) -> None:
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(text)
    for name in extra:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("x")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    _skill(
        ws / ".agent-tui" / "skills" / "release",
        "---\nname: release\ndescription: Cut a release.\nallowed-tools: read_file, shell\n---\n"
        "Steps to release.\n",
        "scripts/bump.sh",
    )
    _skill(
        ws / ".claude" / "skills" / "release",
        "---\ndescription: the farther copy\n---\nFARTHER\n",
    )
    _skill(
        ws / ".claude" / "skills" / "secret-deploy",
        "---\ndescription: Deploy.\ndisable-model-invocation: true\n---\nDeploy it.\n",
    )
    _skill(ws / ".claude" / "skills" / "broken", "---\nname: [unclosed\n---\nbody\n")
    _skill(ws / ".claude" / "skills" / "nodesc", "---\nname: nodesc\n---\nbody\n")
    return ws


def test_the_nearest_skill_of_a_name_wins_and_broken_ones_are_reported(workspace: Path) -> None:
    catalog = discover_skills(workspace, env={"HOME": str(workspace / "nohome")})
    assert sorted(catalog.skills) == ["release", "secret-deploy"]
    assert catalog.skills["release"].body == "Steps to release."
    assert catalog.skills["release"].allowed_tools == ("read_file", "shell")
    reasons = {Path(p.path).parent.name: p.shown() for p in catalog.problems}
    assert set(reasons) == {"broken", "nodesc"}
    assert "broken/SKILL.md:3: front matter" in reasons["broken"]  # the file and line, once
    assert "front matter" in reasons["broken"]
    assert "description is missing" in reasons["nodesc"]


def test_the_prompt_offers_only_skills_the_model_may_invoke(workspace: Path) -> None:
    catalog = discover_skills(workspace, env={"HOME": str(workspace / "nohome")})
    prompt = skills_prompt(list(catalog.skills.values()))
    assert "- release: Cut a release." in prompt
    assert "secret-deploy" not in prompt


async def test_use_skill_returns_the_body_and_the_files_of_the_skill(workspace: Path) -> None:
    catalog = discover_skills(workspace, env={"HOME": str(workspace / "nohome")})
    tool = UseSkillTool(list(catalog.skills.values()))
    assert tool.input_schema["properties"]["name"]["enum"] == ["release"]
    output = await tool.run({"name": "release"}, ToolContext(workspace=workspace))
    assert "Steps to release." in output.content
    assert "- scripts/bump.sh" in output.content
    with pytest.raises(ToolError, match="no skill of that name"):
        await tool.run({"name": "secret-deploy"}, ToolContext(workspace=workspace))


@pytest.mark.parametrize(
    ("body", "folder_files", "tools", "arguments"),
    [
        ("Review the file.", [], (), "src/app.py"),
        ("Review the file.", [], (), ""),
        ("Arguments: a path.\n\nThen review.", ["notes.md"], ("shell",), "src/app.py\n\nand more"),
        ("Review.\n\nArguments: a path.", ["notes.md"], (), ""),
        ("Review.\n\nArguments: a path.", [], ("read_file",), ""),
        ("", [], (), "x"),
    ],
)
def test_the_typed_command_is_read_back_from_the_message_a_skill_expands_to(
    tmp_path: Path, body: str, folder_files: list[str], tools: tuple[str, ...], arguments: str
) -> None:
    folder = tmp_path / "review"
    _skill(folder, "unused", *folder_files)
    skill = Skill(
        name="review",
        description="d",
        path=str(folder / "SKILL.md"),
        body=body,
        allowed_tools=tools,
    )
    invocation = skill_invocation(skill_text(skill, arguments), {"review": skill})
    assert invocation is not None
    assert invocation.typed == f"/review {arguments.strip()}".strip()


@pytest.mark.parametrize(
    "text",
    [
        "just a message",
        "# Skill: review and more\n\nbody",
        "# Skill: review\nbody",
        "# Skills",
        # A SKILL.md pasted for review: the heading of a skill that exists, other instructions.
        "# Skill: review\n\nSteps:\n1. build\n\nArguments: --prod",
        # The skill's own expansion with a line added.
        "# Skill: review\n\nReview the file.\nAnd deploy.\n\nArguments: --prod",
        # A skill this workspace does not have.
        "# Skill: deploy\n\nReview the file.\n\nArguments: --prod",
    ],
)
def test_text_that_is_not_exactly_a_skills_expansion_is_not_read_as_its_invocation(
    tmp_path: Path, text: str
) -> None:
    _skill(tmp_path / "review", "unused")
    skill = Skill(
        name="review",
        description="d",
        path=str(tmp_path / "review" / "SKILL.md"),
        body="Review the file.",
    )
    assert skill_invocation(text, {"review": skill}) is None
    assert skill_invocation(skill_text(skill, "--prod"), {"review": skill}) is not None


def test_a_skills_expansion_is_read_as_its_invocation_only_when_slash_name_runs_that_skill(
    tmp_path: Path,
) -> None:
    """A skill named like a built-in (``/help`` opens the help) or hidden by a nearer skill
    of the name in another case: the message it left (``agent-tui run "/help me"``, before
    built-ins won there too) is not read as ``/help me``, which would open the help on Enter."""
    skills = {
        name: Skill(name=name, description="d", path=str(tmp_path / name / "SKILL.md"), body=body)
        for name, body in [("help", "Explain."), ("Review", "Near."), ("review", "Far.")]
    }
    assert skill_invocation(skill_text(skills["help"], "me"), skills) is None
    assert skill_invocation(skill_text(skills["review"], "a.py"), skills) is None
    invocation = skill_invocation(skill_text(skills["Review"], "a.py"), skills)
    assert invocation is not None and invocation.typed == "/Review a.py"


def test_a_workspaces_skills_are_read_again_when_one_is_added_or_edited(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(workspace / "noconfig"))
    assert sorted(workspace_skills(workspace)) == ["release", "secret-deploy"]
    _skill(workspace / ".agent-tui" / "skills" / "deploy", "---\ndescription: D.\n---\nGo.\n")
    assert workspace_skills(workspace)["deploy"].body == "Go."
    path = workspace / ".agent-tui" / "skills" / "deploy" / "SKILL.md"
    path.write_text("---\ndescription: D.\n---\nGo now.\n")
    os.utime(path, ns=(path.stat().st_mtime_ns + 10**9,) * 2)
    assert workspace_skills(workspace)["deploy"].body == "Go now."
