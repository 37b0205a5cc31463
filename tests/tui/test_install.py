"""`make install` in a fresh environment (HOME in a temporary folder) yields `agent-tui` on PATH.

It installs from the package index like a person's first install does, so it reaches the
network: it runs only when AGENT_TUI_NETWORK_TESTS=1 (CI sets it on the install job).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("AGENT_TUI_NETWORK_TESTS") != "1",
        reason="installs from the package index: set AGENT_TUI_NETWORK_TESTS=1",
    ),
    pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed"),
    pytest.mark.timeout(900),
]

CHECKOUT = Path(__file__).resolve().parents[2]


def test_make_install_puts_agent_tui_on_path_in_a_fresh_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    source = tmp_path / "agent-tui"
    # A clean copy of the checkout: what a person clones (no .venv, no build leftovers).
    shutil.copytree(
        CHECKOUT,
        source,
        ignore=shutil.ignore_patterns(
            ".venv", ".git", "build", "*.egg-info", "__pycache__", ".mypy_cache", ".ruff_cache"
        ),
    )
    python_dir = str(Path(sys.executable).resolve().parent)
    env = {
        "HOME": str(home),
        "PATH": f"{home}/.local/bin:{python_dir}:/usr/local/bin:/usr/bin:/bin",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "LANG": "C.UTF-8",
    }
    if "PIP_CACHE_DIR" in os.environ or (Path.home() / ".cache" / "pip").is_dir():
        env["PIP_CACHE_DIR"] = os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache/pip"))
    base = sys.base_prefix
    built = subprocess.run(
        ["make", "install", f"PYTHON={base}/bin/python3"],
        cwd=source,
        env=env,
        capture_output=True,
        text=True,
        timeout=850,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    assert "LicenseDeprecation" not in built.stdout + built.stderr
    assert "`project.license` as a TOML table is deprecated" not in built.stdout + built.stderr

    found = shutil.which("agent-tui", path=env["PATH"])
    assert found == str(home / ".local" / "bin" / "agent-tui")
    project = tmp_path / "my-project"
    project.mkdir()
    (project / "README.md").write_text("# my project\n")
    ran = subprocess.run(
        [
            "agent-tui",
            "--db",
            str(tmp_path / "t.db"),
            "run",
            "summarise",
            "--model",
            "demo:instant",
        ],
        cwd=project,
        env={**env, "ANTHROPIC_API_KEY": ""},
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    # The demo asks a question and nobody answers: exit 3 with the hint naming the database.
    assert ran.returncode == 3, ran.stdout + ran.stderr
    assert f"--db {tmp_path / 't.db'}" in ran.stdout + ran.stderr
