"""Start-up cost (DESIGN §13): the CLI's light commands import only what they use.

Each check runs the real command in a fresh interpreter with ``python -X importtime``, which
names every module imported, on stderr, as it is imported.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.models import RunState
from runtime.store.migrations import migrate
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
    return result, _modules(result.stderr)


def _modules(importtime_stderr: str) -> set[str]:
    return {
        line.rsplit("|", 1)[1].strip()
        for line in importtime_stderr.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }


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


def test_checking_the_tuis_model_before_its_first_frame_imports_no_pydantic(
    env: dict[str, str], tmp_path: Path
) -> None:
    """``--model`` / ``AGENT_TUI_MODEL`` are checked before the TUI draws (a typo ends it
    there); the check brought ``runtime.providers`` and pydantic with it, 75 ms of every first
    frame with AGENT_TUI_MODEL set (``bench/pty_bench.py first-frame`` caught it)."""
    script = (
        "import sys, argparse\n"
        "from tui.cli import _check_launch\n"
        "args = argparse.Namespace(model=None, agent=None, resume=None, workspace=None)\n"
        "_check_launch(args, sys.argv[1])\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'textual')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "agent-tui.db")],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "AGENT_TUI_MODEL": "demo:instant"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[]"


def test_version_imports_nothing_beyond_argparse_but_its_own_small_modules(
    env: dict[str, str],
) -> None:
    # The budget (DESIGN §13): ``--version`` ≤ 2× ``python -c "import argparse"``. Whatever
    # the standard library module set of that baseline is here, --version adds only ours.
    baseline = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import argparse"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    argparse_modules = _modules(baseline.stderr)
    assert "argparse" in argparse_modules
    # As the console script runs it (``-m`` would add runpy).
    script = "import sys; from tui.cli import main; sys.exit(main())"
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", script, "--version"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("agent-tui ")
    modules = _modules(result.stderr)
    extra = {name for name in modules - argparse_modules if _top_level({name}) - {"runtime", "tui"}}
    assert not extra, sorted(extra)
    assert modules & {"tui.cli", "runtime.version"} == {"tui.cli", "runtime.version"}


def test_version_prints_the_installed_distribution_version(env: dict[str, str]) -> None:
    from importlib.metadata import version

    result = subprocess.run(
        [sys.executable, "-m", "tui.cli", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"agent-tui {version('agent-tui')}\n"
    assert result.stderr == ""


NOT_FOR_RUNS = ("runtime.engine", "runtime.runtime", "runtime.store.sqlite", "runtime.models")
"""``runs`` on SQLite reads the file with the standard library (``tui._cli.fast_runs``)."""


def _assert_light_runs(modules: set[str]) -> None:
    assert "tui._cli.fast_runs" in modules  # the measurement itself works
    loaded = _top_level(modules)
    assert not loaded & {*HEAVY, "pydantic"}, sorted(loaded & {*HEAVY, "pydantic"})
    assert not modules & set(NOT_FOR_RUNS), sorted(modules & set(NOT_FOR_RUNS))


def test_runs_imports_neither_textual_anthropic_mcp_nor_jsonschema(
    env: dict[str, str], tmp_path: Path
) -> None:
    # An empty database (``runs`` creates none where there is no file).
    db = Path(env["AGENT_TUI_DB"])
    db.parent.mkdir(parents=True)
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        migrate(conn, path=str(db))
    finally:
        conn.close()
    result, modules = _imported("runs", "--workspace", str(tmp_path), env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "No runs yet." in result.stderr
    _assert_light_runs(modules)


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
    _assert_light_runs(modules)
    result, modules = _imported(
        "runs", "--json", "--state", "completed", "--workspace", str(tmp_path), env=env
    )
    assert result.returncode == 0, result.stderr[-2000:]
    _assert_light_runs(modules)


def test_the_parser_lists_exactly_the_run_states() -> None:
    assert [state.value for state in RunState] == RUN_STATES


FIRST_MOUNT_SCRIPT = """
import asyncio, gc, json, sys
from pathlib import Path

from textual.css.stylesheet import Stylesheet

from tui import app as app_module
from tui.screens.main import MainScreen

WATCHED = ("runtime.engine", "runtime.runtime", "runtime.api", "runtime.store.sqlite",
           "runtime.providers", "anthropic", "openai", "mcp", "jsonschema", "httpx",
           # what draws messages, not the first screen: Markdown, syntax highlighting
           "tui.widgets.message_view", "markdown_it", "rich.markdown", "pygments",
           # editing config files in place (a theme chosen, a rule added), not reading them
           "tomlkit",
           # the models, the events and the configuration's checks: pydantic's imports and
           # model building were a third of the time to the first frame
           "pydantic", "runtime.models", "runtime.events", "runtime.config",
           # what only a run on screen shows: its events, prompts, tool blocks, a confirmation
           "tui.bridge", "tui.widgets.approval_prompt", "tui.widgets.question_prompt",
           "tui.widgets.elicitation_form", "tui.widgets.retry_choice", "tui.widgets.confirm_bar",
           "tui.widgets.tool_call_view", "runtime.transcript_pages")
seen = {"reparsed": 0}

original_reparse = Stylesheet.reparse

def reparse(self):
    seen["reparsed"] += 1
    original_reparse(self)

Stylesheet.reparse = reparse

def loaded():
    return sorted(m for m in WATCHED if m in sys.modules)

original = MainScreen.on_mount

async def on_mount(self):
    seen["mounted"] = loaded()
    seen["composed"] = [w.id for w in self.query("#tree, #conversation, #composer")]
    seen["runtime_at_mount"] = self.app.runtime is not None
    seen["collecting_at_mount"] = gc.isenabled()
    seen["reparsed_at_mount"] = seen["reparsed"]
    await original(self)

MainScreen.on_mount = on_mount

from tui.widgets.job_tree import JobTree

original_add_jobs = JobTree.add_jobs

def add_jobs(self, jobs, next_cursor):
    if jobs and "first_page" not in seen:
        seen["first_page"] = {
            "engine": sorted(m for m in ("runtime.api", "runtime.runtime", "runtime.engine",
                                         "runtime.config") if m in sys.modules),
            "runtime_open": self.app.runtime is not None,
        }
    original_add_jobs(self, jobs, next_cursor)

JobTree.add_jobs = add_jobs

async def drive(db, workspace):
    app = app_module.program_app(db, workspace)
    async with app.run_test(size=(100, 30)) as pilot:
        async with asyncio.timeout(60):
            while app.runtime is None or not app.screen.job_tree.job_ids:
                await asyncio.sleep(0.01)
        seen["after_open"] = loaded()
        seen["collecting_after_open"] = gc.isenabled()
        seen["frozen_after_open"] = gc.get_freeze_count()

def run_app(*, db_path, workspace, launch=None):
    # As the program starts it, through the command line; only the terminal is Pilot's.
    asyncio.run(drive(db_path, workspace))
    return 0

app_module.run_app = run_app
import tui.cli
tui.cli._has_a_terminal = lambda: True  # Pilot's terminal stands in for one
from tui.cli import main
status = main(["--db", sys.argv[1], "--workspace", sys.argv[2]])
seen["status"] = status
print(json.dumps(seen))
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
    assert seen["status"] == 0
    assert seen["composed"] == ["tree", "conversation", "composer"]
    assert seen["runtime_at_mount"] is False
    assert seen["mounted"] == []
    # The browser's first page, read through the store once it is imported: before the rest
    # of the engine and before the runtime opens.
    assert seen["first_page"] == {"engine": [], "runtime_open": False}
    # Nothing collected before the first frame, and the stylesheet parsed once, not again as
    # the start mode's screen is made; collection is back on, with start-up's objects frozen,
    # once the runtime is open.
    assert seen["collecting_at_mount"] is False
    assert seen["reparsed_at_mount"] == 0
    assert seen["collecting_after_open"] is True
    assert seen["frozen_after_open"] > 10_000
    # The same check sees the engine once the runtime is open: it measures something real.
    assert "runtime.api" in seen["after_open"]
    assert "runtime.store.sqlite" in seen["after_open"]
    assert "runtime.engine" in seen["after_open"]
    assert "markdown_it" in seen["after_open"]  # loaded behind the first frame, for the first run
    assert {"pydantic", "runtime.models", "runtime.config"} <= set(seen["after_open"])


WARM_PROVIDER_SCRIPT = """
import asyncio, json, sys

from tui import app as app_module

seen = {}

async def drive(db, workspace):
    app = app_module.program_app(db, workspace)
    async with app.run_test(size=(100, 30)):
        async with asyncio.timeout(60):
            while app.runtime is None:
                await asyncio.sleep(0.01)
        seen["model"] = app.runtime.default_model
        assert app.provider_preload is not None
        # imported on a thread: the loop goes on meanwhile. A module is in sys.modules from the
        # start of its import, so the test waits for the import to end, not for the name.
        await asyncio.wait_for(asyncio.shield(app.provider_preload), 30)
        seen["anthropic"] = "anthropic" in sys.modules
        seen["runs"] = len((await app.runtime.store.list_runs(limit=10)).items)

def run_app(*, db_path, workspace, launch=None):
    asyncio.run(drive(db_path, workspace))
    return 0

app_module.run_app = run_app
import tui.cli
tui.cli._has_a_terminal = lambda: True  # Pilot's terminal stands in for one
from tui.cli import main
seen["status"] = main(["--db", sys.argv[1], "--workspace", sys.argv[2]])
print(json.dumps(seen))
"""


def test_the_tui_imports_the_default_models_sdk_before_the_first_task(
    env: dict[str, str], tmp_path: Path
) -> None:
    # Not on the event loop at the first Enter, where the anthropic SDK's import (a second or
    # more) froze the screen: behind the first frame, on a thread, with no run started.
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = {**env, "AGENT_TUI_MODEL": "anthropic:claude-test", "ANTHROPIC_API_KEY": "sk-test"}
    result = subprocess.run(
        [sys.executable, "-c", WARM_PROVIDER_SCRIPT, env["AGENT_TUI_DB"], str(workspace)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=workspace,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen == {"model": "anthropic:claude-test", "anthropic": True, "runs": 0, "status": 0}


MCP_THREAD_SCRIPT = """
import asyncio, importlib.abc, json, sys, threading

from tui import app as app_module

seen = {}

class Watch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "mcp":
            seen["mcp_imported_on"] = threading.current_thread().name
        return None

sys.meta_path.insert(0, Watch())

async def drive(db, workspace):
    app = app_module.program_app(db, workspace)
    async with app.run_test(size=(100, 30)):
        async with asyncio.timeout(60):
            while app.runtime is None and not app.exit_error:
                await asyncio.sleep(0.01)
        seen["error"] = app.exit_error

def run_app(*, db_path, workspace, launch=None):
    asyncio.run(drive(db_path, workspace))
    return 0

app_module.run_app = run_app
import tui.cli
tui.cli._has_a_terminal = lambda: True  # Pilot's terminal stands in for one
from tui.cli import main
seen["status"] = main(["--db", sys.argv[1], "--workspace", sys.argv[2]])
print(json.dumps(seen))
"""


def test_with_mcp_servers_configured_the_tui_imports_the_sdk_off_its_event_loop(
    env: dict[str, str], tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "agent-tui.toml").write_text(
        '[mcp_servers.time]\ncommand = "python"\nargs = ["-m", "mcp_server_time"]\n'
    )
    result = subprocess.run(
        [sys.executable, "-c", MCP_THREAD_SCRIPT, env["AGENT_TUI_DB"], str(workspace)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=workspace,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert (seen["status"], seen["error"]) == (0, None)
    assert seen["mcp_imported_on"] not in (None, "MainThread")
