"""`make install` in a fresh environment (HOME and PREFIX in a temporary folder) yields
`agent-tui` on PATH, without the network.

`make test` fills the wheelhouse (`.wheelhouse`, by `make wheelhouse`: the dependencies' wheels,
pip and setuptools; setup may use the network). The test installs from it alone
(``--no-index --find-links``), with every proxy pointing at a closed loopback port, so an attempt
to reach an index fails instead of passing by luck.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[2]
WHEELHOUSE = CHECKOUT / ".wheelhouse"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed"),
    pytest.mark.skipif(
        not (WHEELHOUSE / ".ready").exists(),
        reason="no wheelhouse: `make wheelhouse` (or `make test`) prepares it",
    ),
    pytest.mark.timeout(300),
]


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_make_install_puts_agent_tui_on_path_in_a_fresh_home_offline(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    prefix = tmp_path / "prefix"
    source = tmp_path / "agent-tui"
    # A clean copy of the checkout: what a person clones (no .venv, no build leftovers).
    shutil.copytree(
        CHECKOUT,
        source,
        ignore=shutil.ignore_patterns(
            ".venv",
            ".git",
            "build",
            "*.egg-info",
            "__pycache__",
            ".mypy_cache",
            ".ruff_cache",
            ".wheelhouse",
            ".mcp-npm",
            "*.db",
        ),
    )
    python_dir = str(Path(sys.executable).resolve().parent)
    dead_proxy = f"http://127.0.0.1:{_closed_port()}"
    env = {
        "HOME": str(home),
        "PATH": f"{prefix}/bin:{python_dir}:/usr/local/bin:/usr/bin:/bin",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_CACHE_DIR": "1",
        "PIP_NO_INDEX": "1",
        "HTTP_PROXY": dead_proxy,
        "HTTPS_PROXY": dead_proxy,
        "http_proxy": dead_proxy,
        "https_proxy": dead_proxy,
        "LANG": "C.UTF-8",
    }
    base = sys.base_prefix
    built = subprocess.run(
        [
            "make",
            "install",
            f"PYTHON={base}/bin/python3",
            f"PREFIX={prefix}",
            f"PIP_OPTIONS=--no-index --find-links {WHEELHOUSE}",
        ],
        cwd=source,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
    )
    output = built.stdout + built.stderr
    assert built.returncode == 0, output
    assert f"installed: {prefix}/bin/agent-tui" in output
    assert "LicenseDeprecation" not in output
    assert "`project.license` as a TOML table is deprecated" not in output

    found = shutil.which("agent-tui", path=env["PATH"])
    assert found == str(prefix / "bin" / "agent-tui")
    project = tmp_path / "my-project"
    project.mkdir()
    version = subprocess.run(
        ["agent-tui", "--version"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert version.returncode == 0, version.stdout + version.stderr
    assert version.stdout.strip().startswith("agent-tui 0.1.0")
    # The installed command is the installed package, not this checkout.
    located = subprocess.run(
        [str(prefix / "share/agent-tui/venv/bin/python"), "-c", "import tui; print(tui.__file__)"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert str(prefix / "share/agent-tui/venv") in located.stdout, located.stderr
