"""Fixtures of the tool tests: the shell tool in both of its modes."""

from __future__ import annotations

import pytest

from runtime.tools.sandbox import sandbox_status
from runtime.tools.shell import ShellTool


def require_sandbox() -> None:
    """Skip, saying why, where bubblewrap cannot be had (CI installs it: .ci/run)."""
    status = sandbox_status()
    if not status.available:
        pytest.skip(f"no shell sandbox here: {status.detail}")


@pytest.fixture(params=["sandboxed", "unconfined"])
def shell_tool(request: pytest.FixtureRequest) -> ShellTool:
    """The shell tool confined by bubblewrap, and without a sandbox (the fallback)."""
    if request.param == "sandboxed":
        require_sandbox()
        return ShellTool(sandbox=True)
    return ShellTool(sandbox=False)
