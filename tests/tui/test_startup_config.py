"""The program's configuration is read after the first frame (DESIGN §13): the theme it names
is on that frame, and a configuration with a problem still ends the app with the error naming
the file and exit status 2, as before the first frame it did."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from textual.color import Color
from textual.css.stylesheet import Stylesheet
from textual.dom import DOMNode
from textual.pilot import Pilot

from runtime.api import Runtime
from runtime.config import Config
from runtime.locations import peek_default
from tests.tui.helpers import SIZE, wait_until
from tui.app import AgentTuiApp, Launch, Settings, create_app, program_app
from tui.widgets.composer import ComposerInput


@pytest.fixture
def config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    return home


def test_peek_default_reads_the_user_then_the_workspace_file(
    tmp_path: Path, config_home: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    assert peek_default(workspace, "theme") is None
    (config_home / "agent-tui").mkdir(parents=True)
    (config_home / "agent-tui" / "config.toml").write_text('[defaults]\ntheme = "agent-moss"\n')
    assert peek_default(workspace, "theme") == "agent-moss"
    (workspace / "agent-tui.toml").write_text('[defaults]\ntheme = "agent-paper"\n')
    assert peek_default(workspace, "theme") == "agent-paper"  # the workspace's file wins
    (workspace / "agent-tui.toml").write_text("[defaults\ntheme = ")  # broken: said later
    assert peek_default(workspace, "theme") == "agent-moss"


async def test_the_configured_theme_is_on_the_first_frame(
    tmp_path: Path, config_home: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "agent-tui.toml").write_text('[defaults]\ntheme = "agent-paper"\n')
    app = program_app(tmp_path / "data" / "agent-tui.db", workspace)
    async with app.run_test(size=(100, 30)) as pilot:
        assert app.theme == "agent-paper"
        async with asyncio.timeout(30):
            while app.runtime is None:
                await pilot.pause(0.01)
        assert app.runtime.config.defaults.theme == "agent-paper"


async def _startup_error(app: AgentTuiApp) -> str:
    """Run ``app`` until it ends by itself; it must end with status 2, one line of error and no
    runtime open. The error."""
    async with app.run_test(size=(100, 30)) as pilot:
        async with asyncio.timeout(30):
            while app.is_running:
                await pilot.pause(0.01)
    assert app.return_code == 2
    assert app.exit_error is not None
    assert app.exit_error.startswith("agent-tui: error: ")
    assert "\n" not in app.exit_error
    assert app.runtime is None
    return app.exit_error


async def test_a_broken_configuration_ends_the_app_naming_the_file_with_status_2(
    tmp_path: Path, config_home: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    broken = workspace / "agent-tui.toml"
    broken.write_text("[defaults]\nmodel = = 'x'\n")
    db = tmp_path / "data" / "agent-tui.db"
    app = program_app(db, workspace)
    error = await _startup_error(app)
    assert str(broken) in error
    assert not db.exists()  # the database is not even created
    assert broken.read_text() == "[defaults]\nmodel = = 'x'\n"  # nothing modified


@pytest.mark.parametrize(
    ("launch", "said"),
    [
        (Launch(model="nonsense:model"), "unknown model provider 'nonsense'"),
        (Launch(model="demo:slow"), "unknown demo model 'demo:slow'"),
        (Launch(agent="nosuchagent"), "unknown agent 'nosuchagent'"),
    ],
)
async def test_an_unusable_model_or_agent_asked_for_at_launch_ends_the_app_with_status_2(
    tmp_path: Path, config_home: Path, launch: Launch, said: str
) -> None:
    """``agent-tui --model nonsense:model`` said nothing until the first task was sent ("Not
    sent"), where ``--agent`` with a name nobody configured was refused at once. Both are
    refused before the runtime opens: a typo recovers (or resumes) no run."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    db = tmp_path / "data" / "agent-tui.db"
    app = program_app(db, workspace, launch)
    assert said in await _startup_error(app)
    assert not db.exists()  # the database was not even opened


@pytest.mark.parametrize("theme", ["agent-dusk", "agent-moss", "agent-paper"])
async def test_the_first_screen_is_in_the_starting_theme_and_its_styles_are_parsed_once(
    tmp_path: Path, config_home: Path, monkeypatch: pytest.MonkeyPatch, theme: str
) -> None:
    """A dark theme with the default ANSI colours starts without the theme's watcher, which
    parsed and applied every stylesheet twice more before the first frame (with the main
    screen's own CSS_PATH, a third time); its colours and class are there all the same."""
    reparses: list[None] = []
    reparse = Stylesheet.reparse

    def counted(self: Stylesheet) -> None:
        reparses.append(None)
        reparse(self)

    monkeypatch.setattr(Stylesheet, "reparse", counted)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "agent-tui.toml").write_text(f'[defaults]\ntheme = "{theme}"\n')
    app = program_app(tmp_path / "data" / "agent-tui.db", workspace)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        before_first_frame = len(reparses)
        variables = app.get_css_variables()
        assert app.theme == theme and app.has_class(f"-theme-{theme}")
        assert app.has_class("-dark-mode") is app.current_theme.dark
        assert app.screen.styles.background == Color.parse(variables["background"])
        composer = app.screen.query_one("#composer-input")
        assert composer.styles.color.a > 0
        assert composer.styles.background == Color.parse(variables["surface"])
    # None at all for a dark theme (not even as the start mode's screen is made: the
    # stylesheet already has the theme's variables); the theme's watcher (two more, and the
    # start mode's) only for a light theme, which needs its ANSI mapping.
    if app.current_theme.dark:
        assert before_first_frame == 0
    else:
        assert before_first_frame <= 3


def _whole_screen_restyles(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the restyles that cover the whole main screen from here on (both sides
    of it: the browser's tree and the composer)."""
    restyles: list[int] = []
    update_nodes = Stylesheet.update_nodes

    def counted(self: Stylesheet, nodes: Iterable[DOMNode], animate: bool = False) -> None:
        nodes = list(nodes)
        if {"tree", "composer-input"} <= {node.id for node in nodes}:
            restyles.append(len(nodes))
        update_nodes(self, nodes, animate=animate)

    monkeypatch.setattr(Stylesheet, "update_nodes", counted)
    return restyles


async def test_the_main_screen_is_styled_as_it_mounts_and_not_again_as_it_is_first_shown(
    tmp_path: Path, config_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Textual restyled the whole screen when it was first shown, right after each widget had
    been styled as it mounted, with the same stylesheet (6-8 ms of the first frame)."""
    restyles = _whole_screen_restyles(monkeypatch)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    app = program_app(tmp_path / "data" / "agent-tui.db", workspace)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert restyles == []
        variables = app.get_css_variables()
        composer = app.screen.query_one("#composer-input")
        assert composer.has_focus
        assert composer.styles.background == Color.parse(variables["surface"])


async def test_collection_is_back_on_when_the_runtime_fails_to_open_unexpectedly(
    tmp_path: Path,
) -> None:
    # The program starts with garbage collection off until the runtime is open; an opener that
    # fails in a way nobody planned for must not leave it off for the rest of the session.
    import gc

    from tui.app import Settings, _AfterFirstFrame, create_app

    async def broken_opener(app: object) -> object:
        raise RuntimeError("an opener that breaks")

    workspace = tmp_path / "ws"
    workspace.mkdir()
    app = create_app(
        _AfterFirstFrame(broken_opener),  # type: ignore[arg-type]
        Settings(workspace=workspace, remember_theme=False),
    )
    gc.disable()
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            async with asyncio.timeout(30):
                while not gc.isenabled():
                    await pilot.pause(0.01)
            assert app.runtime is None
            assert app.is_running  # the failure is a notification, not a crash
    finally:
        gc.enable()


async def test_keys_typed_while_the_app_starts_reach_the_composer_in_order(
    tmp_path: Path, workspace: Path
) -> None:
    # The main screen is the default screen (its first frame is written at once), mounted
    # after the app counts as running; keys that arrive before it is mounted with the runtime
    # open are held, then replayed in order (the first letter went to no widget before).
    async def opener() -> Runtime:
        return await Runtime.open(
            db_path=tmp_path / "agent-tui.db",
            workspace=workspace,
            config=Config(),
            model="demo:instant",
        )

    app = create_app(opener, Settings(workspace=workspace, remember_theme=False))
    typed: list[str] = []

    async def type_at_once(pilot: Pilot[int]) -> None:
        # An auto-pilot starts as the app starts (``run_test`` first waits for the screen).
        await pilot.press(*"summarise this")
        await wait_until(pilot, lambda: bool(app.query(ComposerInput)))
        composer = app.query_one(ComposerInput)
        await wait_until(pilot, lambda: len(composer.text) >= len("ummarise this"))
        await pilot.pause()
        typed.append(composer.text)
        app.exit()

    async with asyncio.timeout(60):
        await app.run_async(headless=True, size=SIZE, auto_pilot=type_at_once)
    assert typed == ["summarise this"]


async def test_a_task_typed_and_entered_while_the_app_starts_is_sent(
    tmp_path: Path, workspace: Path
) -> None:
    """Typed before the terminal leaves its line mode, the Enter that ends a task arrives as
    a line feed (the terminal's ICRNL), which reads as ctrl+J, a new line in the composer: the
    task sat there unsent. Ending what is typed during start-up, it is that Enter; a line feed
    inside it stays a new line."""
    typed = asyncio.Event()

    async def opener(_app: object) -> Runtime:
        await typed.wait()  # everything is typed while the app starts (after its first frame)
        return await Runtime.open(
            db_path=tmp_path / "agent-tui.db",
            workspace=workspace,
            config=Config(),
            model="demo:instant",
        )

    from tui.app import _AfterFirstFrame

    settings = Settings(workspace=workspace, remember_theme=False)
    app = create_app(_AfterFirstFrame(opener), settings)  # type: ignore[arg-type]
    sent: list[str] = []

    async def type_at_once(pilot: Pilot[int]) -> None:
        await pilot.press(*"two", "ctrl+j", *"lines", "ctrl+j")
        typed.set()
        await wait_until(pilot, lambda: app.runtime is not None)
        runtime = app.runtime
        assert runtime is not None
        async with asyncio.timeout(45):
            while not (page := await runtime.list_jobs(limit=5)).items:
                await pilot.pause(0.05)
        for job in page.items:
            sent.extend(run.input or "" for run in await runtime.job_runs(job.id))
        composer = app.query_one(ComposerInput)
        await wait_until(pilot, lambda: composer.text == "")
        app.exit()

    async with asyncio.timeout(60):
        await app.run_async(headless=True, size=SIZE, auto_pilot=type_at_once)
    assert sent == ["two\nlines"]  # sent, its line break kept where it was typed


async def test_ctrl_q_while_the_database_opens_quits_cleanly(
    tmp_path: Path, workspace: Path
) -> None:
    # ctrl+q is the one key not held while the app starts; quitting then saved the drafts
    # through a runtime not open yet and ended in a traceback instead of quitting.
    never = asyncio.Event()

    async def opener(_app: object) -> Runtime:
        await never.wait()
        raise AssertionError("the runtime was never to open")

    from tui.app import _AfterFirstFrame

    settings = Settings(workspace=workspace, remember_theme=False)
    app = create_app(_AfterFirstFrame(opener), settings)  # type: ignore[arg-type]

    async def quit_at_once(pilot: Pilot[int]) -> None:
        await pilot.press(*"draft", "ctrl+q")

    async with asyncio.timeout(60):
        await app.run_async(headless=True, size=SIZE, auto_pilot=quit_at_once)
    assert app.runtime is None
    assert app.return_code == 0
    assert app._exception is None


async def test_a_default_agent_with_an_unusable_model_is_said_after_the_first_frame_naming_the_line(
    tmp_path: Path, config_home: Path
) -> None:
    """``agent-tui --agent reviewer`` with a model nobody can use is refused at launch, naming
    the file, line and key; the same agent named by ``[defaults] agent`` was learnt of only
    from "Not sent" on the first task. It is said once the runtime is open, and the app stays
    (follow-ups, the browser and the other agents still work)."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    config = workspace / "agent-tui.toml"
    config.write_text(
        '[defaults]\nagent = "reviewer"\n\n[agents.reviewer]\nmodel = "nonsense:model"\n'
    )
    app = program_app(tmp_path / "data" / "agent-tui.db", workspace)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until(pilot, lambda: app.runtime is not None and app._notifications)
        [notice] = list(app._notifications)
        assert notice.title == "Configuration" and notice.severity == "error"
        assert notice.message.startswith("New jobs use agent 'reviewer' ([defaults] agent)")
        # The same located error as the launch check of ``--agent reviewer``.
        assert (
            f"{config}:5: agents.reviewer.model: unknown model provider 'nonsense'"
            in notice.message
        )
        assert notice.timeout >= 30  # long enough to read where the problem is
        await pilot.pause()
        assert app.is_running and app.return_code is None
        # Once it is gone, a new job with that agent says it again.
        await pilot.press(*"hello", "enter")
        await wait_until(pilot, lambda: len(app._notifications) > 1)
        refusal = list(app._notifications)[-1]
        assert f"{config}:5: agents.reviewer.model" in refusal.message
        assert app.is_running


async def test_a_default_agent_whose_model_works_brings_no_notice(
    tmp_path: Path, config_home: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "agent-tui.toml").write_text(
        '[defaults]\nagent = "reviewer"\n\n[agents.reviewer]\nmodel = "demo:instant"\n'
    )
    app = program_app(tmp_path / "data" / "agent-tui.db", workspace)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until(pilot, lambda: app.runtime is not None)
        await pilot.pause()
        assert not [n for n in app._notifications if n.title == "Configuration"]


async def _database_with_a_job(db: Path, workspace: Path, task: str = "hello there") -> str:
    """``db`` with one finished job of ``task``, made by another runtime: the job's id."""
    from tests.tui.helpers import finished_earlier_run

    return (await finished_earlier_run(db, workspace, task)).job_id


async def test_a_refused_launch_leaves_a_database_with_jobs_as_it_was(
    tmp_path: Path, config_home: Path
) -> None:
    """The browser's first page is read before the command line is checked, to be on screen
    sooner (``tui.app._show_first_page``): read only, so a launch refused for a typo sets up,
    migrates and recovers nothing, and writes not a byte."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    db = tmp_path / "data" / "agent-tui.db"
    await _database_with_a_job(db, workspace)
    before = db.read_bytes()
    app = program_app(db, workspace, Launch(agent="nosuchagent"))
    assert "unknown agent 'nosuchagent'" in await _startup_error(app)
    assert db.read_bytes() == before


async def test_the_first_page_is_shown_before_the_runtime_opens_and_its_rows_wait_for_it(
    tmp_path: Path, config_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The jobs are on screen once the store is imported, while the rest of the engine is
    still importing; a row chosen meanwhile (a click) does nothing until the runtime is open,
    then its job is the one under the cursor on the runtime's page, and it opens as always."""
    import threading

    from tests.tui.helpers import main_screen, notifications
    from tui import app as app_module

    workspace = tmp_path / "ws"
    workspace.mkdir()
    db = tmp_path / "data" / "agent-tui.db"
    older = await _database_with_a_job(db, workspace, "an early task")
    newer = await _database_with_a_job(db, workspace, "a later task")
    engine_may_load = threading.Event()
    import_engine = app_module._import_engine

    def held_import() -> None:
        engine_may_load.wait(30)
        import_engine()

    monkeypatch.setattr(app_module, "_import_engine", held_import)
    app = program_app(db, workspace)
    try:
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            tree = screen.job_tree
            await wait_until(pilot, lambda: tree.job_ids == [newer, older])
            assert app.runtime is None
            node = tree.job_node(older)
            assert node is not None
            assert "an early task" in tree.row_text(node)
            tree.move_cursor(node)  # as a click on its row
            tree.select_node(node)
            await pilot.pause()
            assert not notifications(app)
            assert screen.composer.selected_job_id is None  # nothing acted on yet
            engine_may_load.set()
            await wait_until(pilot, lambda: app.runtime is not None)
            await wait_until(pilot, lambda: screen.composer.selected_job_id == older)
            chosen = tree.cursor_job()
            assert chosen is not None and chosen.id == older
            node = tree.job_node(older)
            assert node is not None
            tree.select_node(node)
            await wait_until(pilot, lambda: screen.selected_run is not None)
            assert screen.selected_run is not None and screen.selected_run.job_id == older
            assert not notifications(app)
    finally:
        engine_may_load.set()


async def test_a_first_page_that_cannot_be_read_ahead_is_left_to_the_runtime(
    tmp_path: Path, config_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading the first page ahead of the runtime is only sooner: whatever fails there (a row
    this code cannot read), the runtime still opens and its own path shows the page, or says
    what is wrong. An error there left the app with no runtime and every key held."""
    from runtime.store.sqlite import SqliteStore
    from tests.tui.helpers import main_screen, notifications

    workspace = tmp_path / "ws"
    workspace.mkdir()
    db = tmp_path / "data" / "agent-tui.db"
    job_id = await _database_with_a_job(db, workspace)
    list_jobs = SqliteStore.list_jobs

    async def failing_ahead(self: SqliteStore, **options: Any) -> Any:
        if self.peek:
            raise ValueError("a row this code cannot read")
        return await list_jobs(self, **options)

    monkeypatch.setattr(SqliteStore, "list_jobs", failing_ahead)
    app = program_app(db, workspace)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.runtime is not None)
        await wait_until(pilot, lambda: main_screen(app).job_tree.job_ids == [job_id])
        assert not notifications(app)
