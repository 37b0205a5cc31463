"""Snapshots of the permissions screen at 80x24 and 140x45 (rules from both files)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from runtime.permissions import _forget_cache
from tests.tui.helpers import wait_until
from tests.tui.test_snapshots import ROOT, snapshot_app  # noqa: F401 (fixture)
from tui.screens.permissions import PermissionsScreen


@pytest.fixture
def rules(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    base = ROOT / request.node.name
    config_home = base / "xdg-config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config_home))
    monkeypatch.setenv("HOME", str(base))
    _forget_cache()
    user = config_home / "agent-tui" / "config.toml"
    user.parent.mkdir(parents=True, exist_ok=True)
    user.write_text('[permissions]\nallow = ["read_file", "search"]\ndeny = ["github__delete_*"]\n')


def _workspace_rules(app: Any) -> None:
    workspace: Path = app.settings.workspace
    (workspace / "agent-tui.toml").write_text(
        '[permissions]\nallow = ["write_file", "filesystem__*"]\nask = ["shell"]\n'
    )


async def _open(pilot: Pilot[Any]) -> None:
    await pilot.pause()
    pilot.app.action_permissions()
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, PermissionsScreen))
    await wait_until(pilot, lambda: pilot.app.screen.rules)
    await pilot.pause(0.1)


@pytest.mark.sandbox
@pytest.mark.parametrize("size", [(80, 24), (140, 45)], ids=["80x24", "140x45"])
def test_the_permissions_screen_lists_rules_with_their_file(
    snap_compare: Any,
    snapshot_app: Any,  # noqa: F811
    rules: None,
    size: tuple[int, int],
) -> None:
    app = snapshot_app()
    _workspace_rules(app)
    assert snap_compare(app, terminal_size=size, run_before=_open)
