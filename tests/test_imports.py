"""Start-up cost (DESIGN §13): the CLI's light commands import only what they use.

Each check runs the real command in a fresh interpreter with ``python -X importtime``, which
names every module imported, on stderr, as it is imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.models import RunState
from tui._cli.parser import RUN_STATES

HEAVY = ("textual", "rich", "anthropic", "openai", "mcp", "jsonschema", "httpx")


def _imported(*argv: str, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "tui.cli", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    modules = {
        line.rsplit("|", 1)[1].strip()
        for line in result.stderr.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }
    return result, modules


def _top_level(modules: set[str]) -> set[str]:
    return {name.split(".")[0] for name in modules}


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    values = dict(os.environ)
    values["AGENT_TUI_DB"] = str(tmp_path / "data" / "agent-tui.db")
    values["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    values.pop("ANTHROPIC_API_KEY", None)
    values.pop("OPENAI_API_KEY", None)
    return values


def test_version_imports_neither_textual_nor_the_sdks_nor_pydantic(
    env: dict[str, str],
) -> None:
    result, modules = _imported("--version", env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("agent-tui ")
    assert "tui._cli.parser" in modules  # the measurement itself works
    loaded = _top_level(modules)
    assert not loaded & {*HEAVY, "pydantic", "asyncio"}, sorted(loaded & {*HEAVY, "pydantic"})


def test_runs_imports_neither_textual_anthropic_mcp_nor_jsonschema(
    env: dict[str, str], tmp_path: Path
) -> None:
    result, modules = _imported("runs", "--workspace", str(tmp_path), env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "No runs yet." in result.stderr
    assert "tui._cli.commands" in modules
    loaded = _top_level(modules)
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_runs_with_runs_in_the_database_stays_light(env: dict[str, str], tmp_path: Path) -> None:
    started = subprocess.run(
        [sys.executable, "-m", "tui.cli", "run", "hello", "--model", "demo:instant"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert started.returncode in (0, 3), started.stderr[-2000:]  # completed, or asks a question
    result, modules = _imported("runs", "--limit", "20", "--workspace", str(tmp_path), env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "hello" in result.stdout
    loaded = _top_level(modules)
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_the_parser_lists_exactly_the_run_states() -> None:
    assert [state.value for state in RunState] == RUN_STATES


FIRST_MOUNT_SCRIPT = """
import asyncio, json, sys
from pathlib import Path

from tui import app as app_module
from tui.screens.main import MainScreen

WATCHED = ("runtime.engine", "runtime.runtime", "runtime.api", "runtime.store.sqlite",
           "runtime.providers", "anthropic", "openai", "mcp")
seen = {}

def loaded():
    return sorted(m for m in WATCHED if m in sys.modules)

original = MainScreen.on_mount

async def on_mount(self):
    seen["mounted"] = loaded()
    seen["composed"] = [w.id for w in self.query("#tree, #conversation, #composer")]
    seen["runtime_at_mount"] = self.app.runtime is not None
    await original(self)

MainScreen.on_mount = on_mount

async def main():
    db, workspace = Path(sys.argv[1]), Path(sys.argv[2])
    app = app_module.program_app(db, workspace)
    async with app.run_test(size=(100, 30)) as pilot:
        async with asyncio.timeout(60):
            while app.runtime is None or not app.screen.job_tree.job_ids:
                await asyncio.sleep(0.01)
        seen["after_open"] = loaded()
    print(json.dumps(seen))

asyncio.run(main())
"""


def test_the_tui_composes_its_first_screen_before_the_engine_is_imported(
    env: dict[str, str], tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    db = Path(env["AGENT_TUI_DB"])
    seeded = subprocess.run(
        [sys.executable, "-m", "tui.cli", "run", "hello", "--model", "demo:instant"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=workspace,
    )
    assert seeded.returncode in (0, 3), seeded.stderr[-2000:]
    result = subprocess.run(
        [sys.executable, "-c", FIRST_MOUNT_SCRIPT, str(db), str(workspace)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=workspace,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["composed"] == ["tree", "conversation", "composer"]
    assert seen["runtime_at_mount"] is False
    assert seen["mounted"] == []
    # The same check sees the engine once the runtime is open: it measures something real.
    assert "runtime.api" in seen["after_open"]
    assert "runtime.store.sqlite" in seen["after_open"]
    assert "runtime.engine" in seen["after_open"]
