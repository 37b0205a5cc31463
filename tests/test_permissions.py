"""Permission rules with where they are saved, revocable, and re-read when a file changes:
a revoked "always" rule or a hand edit takes effect for the next tool call, no restart."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runtime.api import Runtime
from runtime.approvals import save_always_rule
from runtime.config import Config, Permissions, load_config
from runtime.models import InputKind, RunState
from runtime.permissions import (
    PermissionRule,
    _forget_cache,
    current_permissions,
    list_rules,
    restore_rule,
    revoke_rule,
)


@pytest.fixture(autouse=True)
def user_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test has its own (empty) user config folder and a fresh re-read cache."""
    config_home = tmp_path / "xdg-config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config_home))
    _forget_cache()
    return config_home / "agent-tui" / "config.toml"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_rules_are_listed_with_the_file_they_are_saved_in(workspace: Path, user_home: Path) -> None:
    _write(user_home, '[permissions]\nallow = ["read_file"]\ndeny = ["github__delete_*"]\n')
    _write(workspace / "agent-tui.toml", '[permissions]\nallow = ["shell"]\nask = ["write_*"]\n')
    rules = list_rules(workspace)
    assert [(r.kind, r.pattern, r.source) for r in rules] == [
        ("deny", "github__delete_*", "user"),
        ("allow", "read_file", "user"),
        ("ask", "write_*", "workspace"),
        ("allow", "shell", "workspace"),
    ]
    assert rules[0].path == user_home and rules[-1].path == workspace / "agent-tui.toml"
    assert "workspace" in rules[-1].describe() and "shell" in rules[-1].describe()


@pytest.mark.parametrize(
    "allow",
    [
        '["shell", "read_file", "write_file"]',
        '[\n    "shell",  # mind it\n    "read_file",\n    "write_file",\n]',
        # Comments on a rule's line and over it; the last rule without a comma.
        "[\n"
        "    # reading never changes anything\n"
        '    "shell",  # mind it\n'
        "    # the formatter only rewrites files in place\n"
        "    # (checked in CI)\n"
        '    "read_file", # as is\n'
        '    "write_file"  # last\n'
        "]",
    ],
    ids=["one-line", "a-comment", "comments-around"],
)
def test_a_revoked_rule_restored_goes_back_where_it_stood_in_its_list_with_its_comment(
    workspace: Path, allow: str
) -> None:
    """The comment on a revoked rule's line was lost when u put the rule back; the first rule
    of a list came back under the comment lines of the rule after it."""
    path = workspace / "agent-tui.toml"
    for pattern in ("shell", "read_file", "write_file"):
        text = f'[permissions]\nallow = {allow}\ndeny = ["github__delete_*"]  # never\n'
        _write(path, text)
        (rule,) = [r for r in list_rules(workspace) if r.pattern == pattern]
        removed = revoke_rule(rule)
        assert removed is not None and removed.position == rule.position
        assert pattern not in path.read_text()
        restore_rule(removed)
        assert path.read_text() == text


def test_a_rule_restored_after_another_edit_goes_back_at_its_index_and_the_edit_stays(
    workspace: Path,
) -> None:
    path = workspace / "agent-tui.toml"
    _write(path, '[permissions]\nallow = [\n    "shell",  # mind it\n    "read_file",\n]\n')
    (rule,) = [r for r in list_rules(workspace) if r.pattern == "shell"]
    removed = revoke_rule(rule)
    assert removed is not None
    _write(path, path.read_text() + 'deny = ["write_file"]\n')  # edited by hand meanwhile
    restore_rule(removed)
    assert [(r.kind, r.pattern) for r in list_rules(workspace)] == [
        ("deny", "write_file"),
        ("allow", "shell"),
        ("allow", "read_file"),
    ]


def test_revoking_a_rule_removes_it_from_its_own_file_only(
    workspace: Path, user_home: Path
) -> None:
    _write(user_home, '# mine\n[permissions]\nallow = ["shell"]  # careful\n')
    workspace_text = '[permissions]\n# team rule\nallow = ["shell", "read_file"]\n'
    _write(workspace / "agent-tui.toml", workspace_text)
    rule = PermissionRule("shell", "allow", "workspace", workspace / "agent-tui.toml")
    assert revoke_rule(rule) == rule
    assert (workspace / "agent-tui.toml").read_text() == (
        '[permissions]\n# team rule\nallow = ["read_file"]\n'
    )
    assert user_home.read_text() == '# mine\n[permissions]\nallow = ["shell"]  # careful\n'
    assert revoke_rule(rule) is None
    assert [(r.source, r.pattern) for r in list_rules(workspace) if r.kind == "allow"] == [
        ("user", "shell"),
        ("workspace", "read_file"),
    ]


def test_a_hand_edit_is_seen_by_the_next_decision_without_reloading(workspace: Path) -> None:
    path = workspace / "agent-tui.toml"
    _write(path, '[permissions]\nallow = ["shell"]\n')
    config = load_config(workspace)
    assert current_permissions(workspace, config).allow == ["shell"]
    _write(path, '[permissions]\nallow = []\ndeny = ["shell"]\n')
    now = current_permissions(workspace, config)
    assert now.allow == [] and now.deny == ["shell"]
    # Unchanged files are not read again: the same object comes back.
    assert current_permissions(workspace, config) is now


def test_a_config_given_in_code_is_used_while_no_file_exists(workspace: Path) -> None:
    config = Config(permissions=Permissions(allow=["read_file"]))
    assert current_permissions(workspace, config) is config.permissions
    save_always_rule(workspace, "shell")
    assert current_permissions(workspace, config).allow == ["shell"]


def test_a_file_broken_mid_edit_keeps_deny_and_ask_but_drops_every_allow(
    workspace: Path,
) -> None:
    path = workspace / "agent-tui.toml"
    _write(path, '[permissions]\nallow = ["shell"]\ndeny = ["rm_*"]\n')
    config = load_config(workspace)
    assert current_permissions(workspace, config).allow == ["shell"]
    _write(path, '[permissions]\nallow = ["shell"\n')
    broken = current_permissions(workspace, config)
    assert broken.allow == [] and broken.deny == ["rm_*"]
    _write(path, '[permissions]\nallow = ["shell", "write_file"]\n')
    assert current_permissions(workspace, config).allow == ["shell", "write_file"]


async def _approval_of_a_new_task(runtime: Runtime, prompt: str) -> tuple[str, bool]:
    """Start the demo task, answer its question; (run id, whether it then asked an approval)."""
    run = await runtime.start(prompt)
    boundary = await runtime.wait(run.id, timeout=20)
    assert boundary.request is not None and boundary.request.kind is InputKind.QUESTION
    await runtime.respond(run.id, boundary.request.id, boundary.request.options[0])
    boundary = await runtime.wait(run.id, timeout=20)
    if boundary.request is not None:
        assert boundary.request.kind is InputKind.APPROVAL
        return run.id, True
    assert boundary.run.state is RunState.COMPLETED
    return run.id, False


async def test_a_revoked_always_rule_asks_again_in_the_same_process(
    db_path: Path, workspace: Path
) -> None:
    runtime = await Runtime.open(
        db_path=db_path, workspace=workspace, config=Config(), model="demo:instant"
    )
    try:
        run_id, asked = await _approval_of_a_new_task(runtime, "summarise")
        assert asked
        request = await runtime.open_request(run_id)
        assert request is not None
        tool = str(request.detail["tool"])
        await runtime.respond(run_id, request.id, {"decision": "allow_always", "reason": None})
        assert (await runtime.wait(run_id, timeout=20)).run.state is RunState.COMPLETED
        assert tool in (workspace / "agent-tui.toml").read_text()

        os.remove(workspace / "agent-notes.md")
        _, asked = await _approval_of_a_new_task(runtime, "summarise again")
        assert not asked  # the saved rule allowed it

        (rule,) = [r for r in list_rules(workspace) if r.pattern == tool]
        assert revoke_rule(rule)
        os.remove(workspace / "agent-notes.md")
        _, asked = await _approval_of_a_new_task(runtime, "summarise once more")
        assert asked
    finally:
        await runtime.close()
