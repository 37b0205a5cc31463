"""MCP prompts are slash commands: ``/server:prompt`` is in the composer's menu for every
prompt a configured server offers (a real MCP server, in memory), and sending it starts a job
with the prompt's text; a missing argument says so and creates nothing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer
from textual.widgets import OptionList, Static

from runtime.api import Runtime
from runtime.config import Config
from runtime.mcp import InMemoryServer, McpManager
from tests.fakes.mcp_servers import build_server
from tests.tui.helpers import finish_run, make_app, notifications, wait_until
from tui.screens.main import MainScreen
from tui.widgets.composer import RESOURCES_ASKED


@pytest.fixture
async def mcp_runtime(db_path: Path, workspace: Path) -> AsyncIterator[Runtime]:
    manager = McpManager(
        {"basic": InMemoryServer(build_server("basic"), timeout=5.0)}, workspace=workspace
    )
    opened = await Runtime.open(
        db_path=db_path, workspace=workspace, config=Config(), model="demo:instant", mcp=manager
    )
    try:
        yield opened
    finally:
        await opened.close()


def _menu(screen: MainScreen) -> list[str]:
    menu = screen.composer.query_one("#completions", OptionList)
    return [str(menu.get_option_at_index(i).prompt) for i in range(menu.option_count)]


async def test_a_servers_prompt_is_a_slash_command_that_sends_its_text(
    mcp_runtime: Runtime, workspace: Path
) -> None:
    app = make_app(mcp_runtime, workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        await pilot.press("slash", *"bas")
        await wait_until(pilot, lambda: any("/basic:review" in o for o in _menu(screen)))
        option = next(o for o in _menu(screen) if "/basic:review" in o)
        assert "TOPIC [TONE]" in option and "Ask for a review of a topic." in option
        await pilot.press("tab")
        assert screen.composer.input.text == "/basic:review "
        await pilot.press(*'"the README" tone=stern', "enter")
        await wait_until(pilot, lambda: screen.selected_run is not None)
        assert screen.selected_run is not None
        run = await mcp_runtime.get_run(screen.selected_run.id)
        assert run.input == "Please review the README, in a stern tone."
        assert screen.composer.input.text == ""


async def test_a_job_a_prompt_started_and_its_run_are_titled_alike_as_typed(
    mcp_runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: a job started by ``/basic:review …`` read the command on its
    browser row and over the composer, its run's row "Please review the README, in a stern
    tone." (the prompt's text). Both rows, and the composer, read what was typed; the
    conversation shows the text sent, as the model read it."""
    app = make_app(mcp_runtime, workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        await pilot.press("slash", *"bas")
        await wait_until(pilot, lambda: any("/basic:review" in o for o in _menu(screen)))
        await pilot.press("tab", *'"the README" tone=stern', "enter")
        await wait_until(pilot, lambda: screen.selected_run is not None)
        assert screen.selected_run is not None
        run = await mcp_runtime.get_run(screen.selected_run.id)
        typed = '/basic:review "the README" tone=stern'
        assert (await mcp_runtime.get_job(run.job_id)).title == typed
        tree = screen.job_tree
        await wait_until(pilot, lambda: tree.run_node(run.id) is not None)
        job_row, run_row = tree.job_node(run.job_id), tree.run_node(run.id)
        assert job_row is not None and run_row is not None
        assert tree._cells(job_row.data)[1] == tree._cells(run_row.data)[1] == typed
        assert typed in str(screen.composer.query_one("#mode", Static).render())
        # A follow-up's row reads its own message; a plain job's run, its text.
        await finish_run(mcp_runtime, run.id)
        later = await mcp_runtime.follow_up(run.job_id, "now the tests")
        plain = await mcp_runtime.start("list the TODOs")
        await wait_until(pilot, lambda: tree.run_node(later.id) is not None)
        later_row = tree.run_node(later.id)
        assert later_row is not None and tree._cells(later_row.data)[1] == "now the tests"
        await finish_run(mcp_runtime, plain.id)
        await wait_until(pilot, lambda: tree.job_node(plain.job_id) is not None)
        assert tree._run_title(await mcp_runtime.get_run(plain.id)) == "list the TODOs"


async def test_a_prompt_without_its_required_argument_says_so_and_creates_nothing(
    mcp_runtime: Runtime, workspace: Path
) -> None:
    app = make_app(mcp_runtime, workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        await pilot.press("slash", *"basic:review")
        await wait_until(pilot, lambda: any("/basic:review" in o for o in _menu(screen)))
        await pilot.press("enter", "enter")  # the menu's entry completed, then sent as it is
        await wait_until(pilot, lambda: any("needs topic" in n for n in notifications(app)))
        assert (await mcp_runtime.list_jobs(limit=5)).items == []
        assert screen.composer.input.text.startswith("/basic:review")


async def test_enter_on_a_menu_entry_that_needs_an_argument_completes_it_and_sends_nothing(
    mcp_runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: Enter on ``/flaky:haiku TOPIC [TONE]`` in the menu sent it
    without its topic, to be refused ("needs topic")."""
    app = make_app(mcp_runtime, workspace)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        box = screen.composer.input
        for typed in ("basic:review", "basic:rev", "model"):
            await pilot.press("slash", *typed)
            await wait_until(pilot, lambda: bool(_menu(screen)))
            await pilot.press("enter")
            await pilot.pause()
            name = "model" if typed == "model" else "basic:review"
            assert box.text == f"/{name} "
            assert box.cursor_location == (0, len(name) + 2)  # after the space, to type on
            box.clear()
            await pilot.pause()
        assert notifications(app) == []
        assert (await mcp_runtime.list_jobs(limit=5)).items == []


async def test_a_servers_resource_is_offered_by_the_at_picker_and_sent_with_its_content(
    mcp_runtime: Runtime, workspace: Path
) -> None:
    app = make_app(mcp_runtime, workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        await pilot.press(*"follow ", "@", *"sty")
        await wait_until(pilot, lambda: any("basic:notes://team/style" in o for o in _menu(screen)))
        await pilot.press("tab")
        assert "@basic:notes://team/style" in screen.composer.input.text
        await pilot.press("end", *"please", "enter")  # the picker put a space after it
        await wait_until(pilot, lambda: screen.selected_run is not None)
        assert screen.selected_run is not None
        run = await mcp_runtime.get_run(screen.selected_run.id)
        assert run.input.startswith("follow @basic:notes://team/style please")
        assert "📎 Attached basic:notes://team/style" in run.input
        assert "Use short sentences.\nName tests as behaviour sentences." in run.input


async def test_a_resource_that_cannot_be_read_says_so_sends_nothing_and_keeps_the_text(
    mcp_runtime: Runtime, workspace: Path
) -> None:
    app = make_app(mcp_runtime, workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        await pilot.press(*"read @basic:notes://nowhere now", "enter")
        await wait_until(pilot, lambda: any("could not read" in n for n in notifications(app)))
        assert (await mcp_runtime.list_jobs(limit=5)).items == []
        assert screen.composer.input.text == "read @basic:notes://nowhere now"


async def test_the_menus_follow_the_servers_when_their_configuration_changes(
    mcp_runtime: Runtime, workspace: Path
) -> None:
    """Found by a new-user trial: a server added to .mcp.json while agent-tui ran worked in
    runs, but its prompts and resources were not offered until a relaunch."""
    app = make_app(mcp_runtime, workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        await pilot.press("slash", *"bas")
        await wait_until(pilot, lambda: any("/basic:review" in o for o in _menu(screen)))
        await pilot.press("escape")
        screen.composer.clear_text()
        manager = mcp_runtime.mcp
        assert manager is not None
        # As the runs follow a .mcp.json edit: a second server, named "extra".
        manager.reconfigure(
            {
                "basic": manager.servers["basic"],
                "extra": InMemoryServer(build_server("basic"), timeout=5.0),
            }
        )
        screen.composer.focus_input()
        await pilot.press("slash", *"ext")
        await wait_until(pilot, lambda: any("/extra:review" in o for o in _menu(screen)))
        await pilot.press("escape")
        screen.composer.clear_text()
        await pilot.press("@", *"extra:")
        await wait_until(pilot, lambda: any("extra:notes://team/style" in o for o in _menu(screen)))


class _SlowToList(MCPServer):
    """A server whose resources are listed only once ``listed`` is set."""

    def __init__(self, listed: asyncio.Event) -> None:
        super().__init__("slow")
        self.listed = listed

        @self.resource("notes://team/style", name="style")
        def style() -> str:
            return "Use short sentences."

    async def list_resources(self) -> list[Any]:
        await self.listed.wait()
        return await super().list_resources()


async def test_the_at_picker_says_resources_are_on_their_way_and_shows_them_when_they_arrive(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: @ and a resource's name read "no file matches" while the
    servers were still being asked, and the picker stayed so after they answered."""
    listed = asyncio.Event()
    manager = McpManager(
        {"slow": InMemoryServer(_SlowToList(listed), timeout=5.0)}, workspace=workspace
    )
    runtime = await Runtime.open(
        db_path=db_path, workspace=workspace, config=Config(), model="demo:instant", mcp=manager
    )
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=(120, 40)) as pilot:
            screen = app.screen
            assert isinstance(screen, MainScreen)
            await pilot.press("@", *"sty")
            await wait_until(pilot, lambda: RESOURCES_ASKED in _menu(screen))
            assert not any("no file matches" in o for o in _menu(screen))
            listed.set()  # no key pressed after this: the picker follows on its own
            await wait_until(pilot, lambda: "@slow:notes://team/style" in _menu(screen))
            assert RESOURCES_ASKED not in _menu(screen)
            await pilot.press("tab")
            assert screen.composer.input.text.startswith("@slow:notes://team/style")
    finally:
        await runtime.close()


def _slow_to_answer(answered: asyncio.Event) -> MCPServer:
    """A server whose prompt's text comes only once ``answered`` is set."""
    server = MCPServer("slow")

    @server.prompt()
    async def review(topic: str) -> str:
        """Ask for a review of a topic."""
        await answered.wait()
        return f"Please review {topic}."

    return server


async def test_text_typed_while_a_servers_prompt_is_fetched_stays_in_the_box(
    db_path: Path, workspace: Path
) -> None:
    """``/slow:review …``, Enter, and typing on while the server answers: the keys joined the
    command in the box, and went with it when the prompt's text was sent."""
    answered = asyncio.Event()
    manager = McpManager(
        {"slow": InMemoryServer(_slow_to_answer(answered), timeout=5.0)}, workspace=workspace
    )
    runtime = await Runtime.open(
        db_path=db_path, workspace=workspace, config=Config(), model="demo:instant", mcp=manager
    )
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=(120, 40)) as pilot:
            screen = app.screen
            assert isinstance(screen, MainScreen)
            await pilot.press("slash", *"slow:review README.md", "enter", *"and the tests")
            assert screen.composer.input.text.endswith("and the tests")
            answered.set()
            await wait_until(pilot, lambda: screen.selected_run is not None)
            assert screen.selected_run is not None
            run = await runtime.get_run(screen.selected_run.id)
            assert run.input == "Please review README.md."
            await wait_until(pilot, lambda: screen.composer.follow_up_job_id == run.job_id)
            assert screen.composer.input.text == "and the tests"
            await runtime.wait(run.id, timeout=30)
            await pilot.pause()
    finally:
        await runtime.close()


async def test_a_custom_command_in_a_folder_runs_as_folder_colon_name_beside_mcp_servers(
    mcp_runtime: Runtime, workspace: Path
) -> None:
    """``git/commit.md`` is ``/git:commit``: offered in the menu and run by ``agent-tui run``,
    it went to the MCP servers whenever one was configured ("no server git")."""
    command = workspace / ".agent-tui" / "commands" / "git" / "commit.md"
    command.parent.mkdir(parents=True)
    command.write_text("Write a commit message for $ARGUMENTS.")
    app = make_app(mcp_runtime, workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        await pilot.press("slash", *"git:commit the parser fix", "enter")
        await wait_until(pilot, lambda: screen.selected_run is not None)
        assert screen.selected_run is not None
        run = await mcp_runtime.get_run(screen.selected_run.id)
        assert run.input == "Write a commit message for the parser fix."
        assert notifications(app) == []


@pytest.mark.parametrize("file_name", ["review.md", "Review.md"])
async def test_a_prompt_hidden_by_a_custom_command_of_its_name_is_not_offered_beside_it(
    db_path: Path, workspace: Path, file_name: str
) -> None:
    """``basic/review.md`` is ``/basic:review``, which runs the command (tried before the MCP
    prompts): the menu offered the server's prompt of that name, which never runs, in its place
    (or, the name cased otherwise, both). It offers the command once, and so does the help."""
    command = workspace / ".agent-tui" / "commands" / "basic" / file_name
    command.parent.mkdir(parents=True)
    command.write_text("---\ndescription: Our review\n---\nReview $ARGUMENTS our way.")
    name = f"basic:{file_name.removesuffix('.md')}"
    # A second server, its prompt not hidden: it shows once the servers' prompts are read.
    servers = {
        name: InMemoryServer(build_server("basic"), timeout=5.0) for name in ("basic", "other")
    }
    runtime = await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=Config(),
        model="demo:instant",
        mcp=McpManager(servers, workspace=workspace),
    )
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=(120, 40)) as pilot:
            screen = app.screen
            assert isinstance(screen, MainScreen)
            await pilot.press("slash")
            await wait_until(pilot, lambda: any("/other:review" in o for o in _menu(screen)))
            offered = [o for o in _menu(screen) if o.lower().startswith("/basic:review")]
            assert offered == [f"/{name} [ARGS]  Our review"]
            listed = [n for n, _ in screen.workspace_commands() if n.lower().startswith("/basic:")]
            assert listed == [f"/{name} [ARGS]"]
            await pilot.press(*"basic:review the parser", "enter")
            await wait_until(pilot, lambda: screen.selected_run is not None)
            assert screen.selected_run is not None
            run = await runtime.get_run(screen.selected_run.id)
            assert run.input == "Review the parser our way."
    finally:
        await runtime.close()
