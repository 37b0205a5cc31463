"""The permissions screen: rules with their file, a filter, revoking by key; a revoked
"always" rule makes the next task ask again in the same process."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import OptionList

from runtime.api import Runtime
from runtime.permissions import _forget_cache
from tests.tui.helpers import SIZE, make_app, notifications, screen_text, wait_until
from tests.tui.test_browser import lines_on_screen
from tui.app import AgentTuiApp
from tui.screens.main import MainScreen
from tui.screens.permissions import PermissionsScreen
from tui.widgets.approval_prompt import ApprovalPrompt
from tui.widgets.confirm_bar import ConfirmBar
from tui.widgets.question_prompt import QuestionPrompt


@pytest.fixture(autouse=True)
def user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    _forget_cache()
    path = tmp_path / "xdg-config" / "agent-tui" / "config.toml"
    path.parent.mkdir(parents=True)
    return path


def _lines(screen: PermissionsScreen) -> list[str]:
    options = screen.query_one(OptionList)
    return [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]


async def test_the_screen_lists_filters_and_revokes_rules_by_key(
    runtime: Runtime, workspace: Path, user_config: Path
) -> None:
    user_config.write_text('[permissions]\ndeny = ["github__delete_*"]\n')
    (workspace / "agent-tui.toml").write_text(
        '# team\n[permissions]\nallow = ["shell", "read_file"]\n'
    )
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press(*"/permissions", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, PermissionsScreen))
        screen = app.screen
        assert isinstance(screen, PermissionsScreen)
        lines = _lines(screen)
        assert len(lines) == 3
        assert "deny" in lines[0] and "github__delete_*" in lines[0] and "user" in lines[0]
        assert "allow" in lines[1] and "shell" in lines[1] and "workspace" in lines[1]

        await pilot.press("slash", *"shell", "enter")
        assert len(_lines(screen)) == 1 and "shell" in _lines(screen)[0]
        await pilot.press("d", "y")
        await wait_until(pilot, lambda: "Rule revoked" in screen_text(app))
        assert "No rule matches" in _lines(screen)[0]
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, MainScreen))
    assert (workspace / "agent-tui.toml").read_text() == (
        '# team\n[permissions]\nallow = ["read_file"]\n'
    )
    assert "github__delete_*" in user_config.read_text()


async def test_answering_always_then_revoking_on_the_screen_asks_again_in_the_same_process(
    runtime: Runtime, workspace: Path
) -> None:
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        await pilot.press(*"summarise", "enter")
        await wait_until(pilot, lambda: screen.query(QuestionPrompt))
        await pilot.press("1", "enter")  # an option's number, then Enter
        await wait_until(pilot, lambda: screen.query(ApprovalPrompt))
        await pilot.press("A")
        await wait_until(pilot, lambda: (workspace / "agent-notes.md").exists())
        assert "write_file" in (workspace / "agent-tui.toml").read_text()

        await wait_until(pilot, lambda: screen.query_one("#composer-input").display)
        screen.query_one("#composer-input").focus()
        await pilot.press(*"/permissions", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, PermissionsScreen))
        permissions = app.screen
        assert isinstance(permissions, PermissionsScreen)
        await wait_until(pilot, lambda: permissions.rules)
        assert any("write_file" in line for line in _lines(permissions))
        await pilot.press("slash", *"write_file", "enter", "d", "d", "escape")
        await wait_until(pilot, lambda: app.screen is screen)
        assert "write_file" not in (workspace / "agent-tui.toml").read_text()

        os.remove(workspace / "agent-notes.md")
        screen.query_one("#composer-input").focus()
        await pilot.press(*"/new summarise again", "enter")
        await wait_until(pilot, lambda: screen.query(QuestionPrompt))
        await pilot.press("1", "enter")  # an option's number, then Enter
        await wait_until(pilot, lambda: screen.query(ApprovalPrompt))
        assert screen.query_one(ApprovalPrompt).request.detail["tool"] == "write_file"


async def _open_permissions(pilot: Pilot[Any], app: AgentTuiApp) -> PermissionsScreen:
    await pilot.pause()
    await pilot.press(*"/permissions", "enter")
    await wait_until(pilot, lambda: isinstance(app.screen, PermissionsScreen))
    screen = app.screen
    assert isinstance(screen, PermissionsScreen)
    await wait_until(pilot, lambda: screen.rules)
    return screen


async def test_d_asks_first_and_only_d_again_or_y_revokes_the_rule(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: d revoked the highlighted rule at once, and a person who
    pressed it by mistake did not know u puts it back."""
    config = workspace / "agent-tui.toml"
    config.write_text('[permissions]\ndeny = ["shell"]\nallow = ["read_file"]\n')
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open_permissions(pilot, app)
        await pilot.press("d")
        await wait_until(pilot, lambda: screen.query(ConfirmBar))
        assert "Revoke deny shell" in screen_text(app)
        assert config.read_text() == '[permissions]\ndeny = ["shell"]\nallow = ["read_file"]\n'

        await pilot.press("escape")  # no: the question goes, the rule stays, the screen too
        await wait_until(pilot, lambda: not screen.query(ConfirmBar))
        assert app.screen is screen and isinstance(app.focused, OptionList)
        await pilot.press("d", "x")  # any other key is a no as well
        await wait_until(pilot, lambda: not screen.query(ConfirmBar))
        assert any("Kept" in n for n in notifications(app))
        assert 'deny = ["shell"]' in config.read_text()

        await pilot.press("d", "d")
        await wait_until(pilot, lambda: "shell" not in config.read_text())
        assert not screen.query(ConfirmBar) and isinstance(app.focused, OptionList)
        await pilot.press("d", "y")
        await wait_until(pilot, lambda: "read_file" not in config.read_text())


async def test_the_revoke_hint_stays_on_the_permissions_screen_where_u_puts_the_rule_back(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: "Rule revoked — allow write_file: u puts it back" was a toast
    that stayed up once Esc closed the screen, where u brings back the job archived last: it
    did nothing visible and the rule stayed revoked. The hint is a line of the screen."""
    config = workspace / "agent-tui.toml"
    config.write_text('[permissions]\nallow = ["write_file"]\n')
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        await _open_permissions(pilot, app)
        await pilot.press("d", "d")
        await wait_until(pilot, lambda: "write_file" not in config.read_text())
        await wait_until(pilot, lambda: "u puts it back" in screen_text(app))
        assert "Rule revoked: allow write_file" in screen_text(app)
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, MainScreen))
        await pilot.pause()
        assert not any("puts it back" in n for n in notifications(app))
        assert "puts it back" not in screen_text(app)

        # Opened again, the screen says nothing of a revoke it cannot undo (its u is gone).
        await pilot.press(*"/permissions", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, PermissionsScreen))
        again = app.screen
        assert isinstance(again, PermissionsScreen)
        await wait_until(pilot, lambda: "No permission rules saved" in _lines(again)[0])
        assert "Rule revoked" not in screen_text(app)
        await pilot.press("u")
        await pilot.pause()
        assert "write_file" not in config.read_text()


async def test_at_80_columns_a_long_rule_takes_one_marked_row_and_shows_whole_below(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: long rules wrapped over several rows, and only colour told
    which row was highlighted."""
    long_rule = "mcp_server_with_a_long_name__tool_with_an_even_longer_name_" + "x" * 40
    (workspace / "agent-tui.toml").write_text(
        f'[permissions]\nallow = ["{long_rule}", "read_file"]\n'
    )
    app = make_app(runtime, workspace)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _open_permissions(pilot, app)
        options = screen.query_one(OptionList)
        await pilot.pause()
        rows = [row for row in lines_on_screen(options) if row.strip()]
        assert len(rows) == 2, rows
        assert rows[0].lstrip().startswith("› allow  mcp_server") and rows[0].rstrip().endswith("…")
        assert not rows[1].lstrip().startswith("›") and "read_file" in rows[1]
        assert f"› allow {long_rule}" in screen_text(app)

        await pilot.press("down")
        await wait_until(pilot, lambda: "› allow read_file" in screen_text(app))
        rows = [row for row in lines_on_screen(options) if row.strip()]
        assert rows[1].lstrip().startswith("› allow  read_file")
        assert not rows[0].lstrip().startswith("›")


def _footer(screen: object) -> list[str]:
    from textual.screen import Screen

    from tui.widgets.key_footer import FooterKey

    assert isinstance(screen, Screen)
    return [key.description for key in screen.query(FooterKey) if key.display]


async def test_a_revoked_rule_comes_back_with_u_and_esc_in_the_filter_only_leaves_it(
    runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: d revoked a rule (a deny one too) with no way back, and Esc
    in the filter closed the whole screen; the footer showed the main screen's keys."""
    (workspace / "agent-tui.toml").write_text('[permissions]\ndeny = ["shell"]\n')
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press(*"/permissions", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, PermissionsScreen))
        screen = app.screen
        assert isinstance(screen, PermissionsScreen)
        await wait_until(pilot, lambda: "Revoke rule" in _footer(screen))
        assert "New job" not in _footer(screen) and "Undo revoke" not in _footer(screen)

        await pilot.press("d", "d")
        await wait_until(pilot, lambda: "shell" not in (workspace / "agent-tui.toml").read_text())
        await wait_until(pilot, lambda: "Undo revoke" in _footer(screen))
        await pilot.press("u")
        await wait_until(
            pilot, lambda: 'deny = ["shell"]' in (workspace / "agent-tui.toml").read_text()
        )
        await wait_until(pilot, lambda: "Rule restored" in screen_text(app))
        assert any("shell" in line and "deny" in line for line in _lines(screen))

        await pilot.press("slash", *"she")
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen and isinstance(app.focused, OptionList)
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, MainScreen))


async def test_u_puts_a_revoked_rule_back_where_it_stood_in_its_file_and_on_screen(
    runtime: Runtime, workspace: Path
) -> None:
    """u appended the rule it put back at the end of its list: in the file and on screen it
    moved from the middle to the bottom."""
    config = workspace / "agent-tui.toml"
    text = (
        "[permissions]\n"
        'allow = ["read_file", "shell(git *)", "write_file"]\n'
        "ask = [\n"
        '    "edit_file",  # review edits\n'
        '    "shell",\n'
        "]\n"
    )
    config.write_text(text)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open_permissions(pilot, app)

        def rows() -> list[str]:  # without the marker
            return [line[2:] for line in _lines(screen)]

        before = rows()
        assert "edit_file" in before[0] and "shell(git *)" in before[3]

        await pilot.press("down", "down", "down")  # allow shell(git *), mid-list
        await wait_until(pilot, lambda: "› allow shell(git *)" in screen_text(app))
        await pilot.press("d", "y")
        await wait_until(pilot, lambda: "shell(git *)" not in config.read_text())
        await pilot.press("up", "up", "up")  # ask edit_file, first of its list
        await wait_until(pilot, lambda: "› ask edit_file" in screen_text(app))
        await pilot.press("d", "y")
        await wait_until(pilot, lambda: "edit_file" not in config.read_text())

        await pilot.press("u")
        await wait_until(pilot, lambda: "edit_file" in config.read_text())
        await pilot.press("u")
        await wait_until(pilot, lambda: "shell(git *)" in config.read_text())
        await wait_until(pilot, lambda: rows() == before)
        assert "› allow shell(git *)" in screen_text(app)  # the rule put back last
    assert config.read_text() == text  # the comment on edit_file's line too


async def test_the_inbox_shows_its_own_keys_not_those_of_the_prompt_under_it(
    runtime: Runtime, workspace: Path
) -> None:
    from tui.screens.inbox import InboxScreen

    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        await pilot.press(*"summarise", "enter")
        await wait_until(pilot, lambda: screen.query(QuestionPrompt))
        await pilot.press("1", "enter")
        await wait_until(pilot, lambda: isinstance(app.focused, ApprovalPrompt))
        assert "Allow once" in _footer(screen)
        await pilot.press("i")
        await wait_until(pilot, lambda: isinstance(app.screen, InboxScreen))
        inbox = app.screen
        await wait_until(pilot, lambda: "Close inbox" in _footer(inbox))
        assert "Allow once" not in _footer(inbox)
