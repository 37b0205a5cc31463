"""The approval policy and the 'allow always in this workspace' rules it reads and writes."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.approvals import (
    ApprovalPolicy,
    list_always_rules,
    remove_always_rule,
    save_always_rule,
)
from runtime.config import Permissions, load_config
from runtime.errors import ConfigError


def policy(
    allow: list[str] | None = None,
    ask: list[str] | None = None,
    deny: list[str] | None = None,
    run_allowed: set[str] | None = None,
) -> ApprovalPolicy:
    permissions = Permissions(allow=allow or [], ask=ask or [], deny=deny or [])
    return ApprovalPolicy(permissions, run_allowed=run_allowed)


# --- decisions ------------------------------------------------------------------------------


def test_without_rules_the_tool_default_decides() -> None:
    assert policy().decide("read_file", default="allow") == "allow"
    assert policy().decide("shell", default="ask") == "ask"
    assert policy().decide("anything", default="deny") == "deny"


def test_deny_wins_over_every_other_rule_and_over_this_run() -> None:
    everything = policy(allow=["shell"], ask=["shell"], deny=["shell"], run_allowed={"shell"})
    assert everything.decide("shell", default="allow") == "deny"


def test_ask_wins_over_allow() -> None:
    assert policy(allow=["*"], ask=["shell"]).decide("shell", default="allow") == "ask"


def test_allow_rules_skip_the_question() -> None:
    assert policy(allow=["write_file"]).decide("write_file", default="ask") == "allow"


def test_allowed_for_this_run_skips_the_question_even_with_an_ask_rule() -> None:
    assert policy(ask=["shell"], run_allowed={"shell"}).decide("shell", default="ask") == "allow"
    assert policy(run_allowed={"shell"}).decide("write_file", default="ask") == "ask"


@pytest.mark.parametrize(
    ("pattern", "tool", "matches"),
    [
        ("shell", "shell", True),
        ("shell", "shell2", False),
        ("write_*", "write_file", True),
        ("write_*", "edit_file", False),
        ("github__*", "github__create_issue", True),
        ("github__*", "gitlab__create_issue", False),
        ("*", "anything__at_all", True),
        ("*__delete_*", "db__delete_row", True),
    ],
)
def test_rules_are_fnmatch_patterns(pattern: str, tool: str, matches: bool) -> None:
    decision = policy(deny=[pattern]).decide(tool, default="allow")
    assert decision == ("deny" if matches else "allow")


def test_the_explanation_names_the_rule() -> None:
    decision, why = policy(deny=["server__*"]).explain("server__drop", default="ask")
    assert decision == "deny"
    assert "'server__*'" in why


# --- allow always in this workspace ---------------------------------------------------------


def test_a_saved_rule_creates_the_file_and_is_read_back_by_config(workspace: Path) -> None:
    path = save_always_rule(workspace, "shell")
    assert path == workspace / "agent-tui.toml"
    assert path.read_text() == '[permissions]\nallow = ["shell"]\n'
    config = load_config(workspace, user_config=workspace / "no-user.toml", env={})
    assert config.permissions.allow == ["shell"]
    assert (
        ApprovalPolicy(config.permissions, shell_confined=True).decide("shell", default="ask")
        == "allow"
    )


def test_saving_keeps_the_rest_of_the_file_and_its_comments(workspace: Path) -> None:
    original = (
        "# project settings\n"
        "[defaults]\n"
        'model = "demo"  # offline please\n'
        "\n"
        "[permissions]\n"
        "# reviewed by the team\n"
        "allow = [\n"
        '    "read_file",  # always fine\n'
        '    "list_dir"\n'
        "]\n"
        'deny = ["shell"]\n'
    )
    (workspace / "agent-tui.toml").write_text(original)
    save_always_rule(workspace, "write_file")
    assert (workspace / "agent-tui.toml").read_text() == original.replace(
        '    "list_dir"\n', '    "list_dir",\n    "write_file"\n'
    )
    assert list_always_rules(workspace) == ["read_file", "list_dir", "write_file"]


def test_saving_into_a_one_line_list_appends_to_it(workspace: Path) -> None:
    (workspace / "agent-tui.toml").write_text('[permissions]\nallow = ["a"] # short\n')
    save_always_rule(workspace, "b")
    assert (workspace / "agent-tui.toml").read_text() == (
        '[permissions]\nallow = ["a", "b"] # short\n'
    )


def test_saving_adds_the_section_when_the_file_has_none(workspace: Path) -> None:
    (workspace / "agent-tui.toml").write_text('[defaults]\nmodel = "demo"\n')
    save_always_rule(workspace, "github__*")
    assert (workspace / "agent-tui.toml").read_text() == (
        '[defaults]\nmodel = "demo"\n\n[permissions]\nallow = ["github__*"]\n'
    )


def test_saving_adds_the_allow_key_to_an_existing_section(workspace: Path) -> None:
    (workspace / "agent-tui.toml").write_text(
        '[permissions]\ndeny = ["rm"]\n\n[defaults]\nmodel = "demo"\n'
    )
    save_always_rule(workspace, "shell")
    assert (workspace / "agent-tui.toml").read_text() == (
        '[permissions]\ndeny = ["rm"]\nallow = ["shell"]\n\n[defaults]\nmodel = "demo"\n'
    )


def test_saving_the_same_rule_twice_changes_nothing(workspace: Path) -> None:
    save_always_rule(workspace, "shell")
    save_always_rule(workspace, "shell")
    assert list_always_rules(workspace) == ["shell"]


def test_a_saved_rule_can_be_removed(workspace: Path) -> None:
    original = '[permissions]\nallow = [\n  "read_file",\n]\n# end\n'
    (workspace / "agent-tui.toml").write_text(original)
    save_always_rule(workspace, "shell")
    assert remove_always_rule(workspace, "shell") is True
    assert (workspace / "agent-tui.toml").read_text() == original
    assert remove_always_rule(workspace, "shell") is False
    config = load_config(workspace, user_config=workspace / "no-user.toml", env={})
    assert config.permissions.allow == ["read_file"]


def test_removing_from_a_one_line_list_keeps_the_others(workspace: Path) -> None:
    (workspace / "agent-tui.toml").write_text('[permissions]\nallow = ["a", "shell", "b"]\n')
    remove_always_rule(workspace, "shell")
    assert (workspace / "agent-tui.toml").read_text() == '[permissions]\nallow = ["a", "b"]\n'
    remove_always_rule(workspace, "b")
    assert (workspace / "agent-tui.toml").read_text() == '[permissions]\nallow = ["a"]\n'


def test_removing_from_a_workspace_without_rules_is_a_no_op(workspace: Path) -> None:
    assert remove_always_rule(workspace, "shell") is False
    assert not (workspace / "agent-tui.toml").exists()
    assert list_always_rules(workspace) == []


def test_a_broken_workspace_file_is_reported_and_left_alone(workspace: Path) -> None:
    (workspace / "agent-tui.toml").write_text("[permissions\nallow = []\n")
    with pytest.raises(ConfigError, match=r"agent-tui.toml:1: invalid TOML"):
        save_always_rule(workspace, "shell")
    assert (workspace / "agent-tui.toml").read_text() == "[permissions\nallow = []\n"


def test_a_tool_name_needing_quotes_round_trips(workspace: Path) -> None:
    save_always_rule(workspace, 'odd "name"')
    assert list_always_rules(workspace) == ['odd "name"']
    remove_always_rule(workspace, 'odd "name"')
    assert list_always_rules(workspace) == []


LAYOUTS = [
    "",
    '[defaults]\nmodel = "demo"\n',
    "[permissions]\nallow = []\n",
    "[permissions]\nallow = [ # none yet\n]\n",
    '[permissions]\nallow = ["seed"] # one line\ndeny = ["x"]\n',
    '# top\n[permissions]\nallow = [\n    "seed",  # why\n    "other"\n]\n\n'
    '[defaults]\ntheme = "nord"\n',
]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    layout=st.sampled_from(LAYOUTS),
    operations=st.lists(
        st.tuples(st.booleans(), st.sampled_from(["shell", "write_*", "srv__t", "seed", 'q"x'])),
        max_size=8,
    ),
)
def test_any_sequence_of_saves_and_removals_keeps_a_valid_file_with_the_expected_rules(
    tmp_path: Path, layout: str, operations: list[tuple[bool, str]]
) -> None:
    workspace = tmp_path / f"ws{abs(hash((layout, tuple(operations))))}"
    workspace.mkdir(exist_ok=True)  # hypothesis may replay an example
    (workspace / "agent-tui.toml").write_text(layout)
    expected = list_always_rules(workspace)
    for save, name in operations:
        if save:
            save_always_rule(workspace, name)
            if name not in expected:
                expected.append(name)
        else:
            remove_always_rule(workspace, name)
            expected = [rule for rule in expected if rule != name]
        assert list_always_rules(workspace) == expected
    text = (workspace / "agent-tui.toml").read_text()
    # Comments stay, except one on the line of an element that was removed (it went with it).
    seed_removed = any(not save and name == "seed" for save, name in operations)
    for comment in ("# top", "# why", "# one line", "# none yet"):
        if comment == "# why" and seed_removed:
            continue
        assert (comment in text) == (comment in layout)
