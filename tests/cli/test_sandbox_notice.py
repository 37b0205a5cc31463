"""`doctor` says once whether shell commands are sandboxed, and why not."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.tools.sandbox import sandbox_status
from tests.cli.harness import Cli


def test_doctor_says_the_shell_is_sandboxed_where_bwrap_works(cli: Cli) -> None:
    if not sandbox_status().available:
        pytest.skip(f"no shell sandbox here: {sandbox_status().detail}")
    result = cli.run("doctor")
    assert "Shell sandbox:\n  on (bubblewrap" in result.stdout


def test_doctor_says_why_when_bwrap_cannot_start_and_that_shell_calls_ask(
    cli: Cli, tmp_path: Path
) -> None:
    broken = tmp_path / "bwrap"
    broken.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"
    )
    broken.chmod(0o755)
    cli.env["AGENT_TUI_BWRAP"] = str(broken)
    result = cli.run("doctor")
    assert result.returncode == 0, result.stdout + result.stderr  # degraded, not broken
    lines = result.stdout.splitlines()
    shown = lines[lines.index("Shell sandbox:") + 1]
    assert "off:" in shown and "No permissions to create new namespace" in shown
    assert "every shell call asks first" in shown
    assert result.stdout.count("No permissions to create new namespace") == 1
