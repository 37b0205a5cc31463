"""Keys typed as a prompt comes are text for the message box: they never answer an approval, a
question or an MCP server's form, and none is lost. Found by a new-user trial: "hello there" and
Enter, typed into an empty box just as a write's approval docked, denied the write (its "r" asked
for a reason, Enter sent it) and the words were gone; a "y", "a" or "A" among them would have
allowed it, "A" for good. A prompt that comes while the keys go to the box now waits for a pause
in typing; the person's clock is the app's (``Settings.clock``), moved on by the tests."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from textual.pilot import Pilot

from runtime.api import Runtime
from runtime.mcp import InMemoryServer, McpManager
from runtime.models import InputRequestState, Run, RunState
from tests.fakes.mcp_servers import build_server
from tests.fakes.scripted import ScriptedProvider, Turn, open_scripted
from tests.tui.helpers import (
    SIZE,
    PersonsClock,
    main_screen,
    make_app,
    screen_text,
    send_burst,
    wait_until,
)
from tui.app import AgentTuiApp
from tui.screens.main import MainScreen
from tui.widgets.approval_prompt import ApprovalPrompt

PROMPTS = "#bottom > ApprovalPrompt, #bottom > QuestionPrompt, #bottom > ElicitationForm"


def _asking(kind: str, gate: asyncio.Event) -> Turn:
    """A model turn that asks for ``kind`` once ``gate`` is set (the run works meanwhile)."""
    calls = {
        "approval": ("write_file", {"path": "n.md", "content": "x"}),
        "question": (
            "ask_user",
            {"question": "Which folder?", "options": ["src", "docs"], "allow_free_text": True},
        ),
        "form": ("basic__favourites", {}),
    }
    return Turn("One thing first.", tool_calls=[calls[kind]], gate=gate)


async def _open(kind: str, gate: asyncio.Event, db_path: Path, workspace: Path) -> Runtime:
    script = [_asking(kind, gate), Turn("Done.")]
    manager = None
    if kind == "form":
        server = InMemoryServer(build_server("basic"), timeout=30)
        manager = McpManager({"basic": server}, workspace=workspace)
    return await open_scripted(ScriptedProvider(script), db_path, workspace, mcp=manager)


async def _working(pilot: Pilot[object], screen: MainScreen) -> Run:
    """A first task sent from the box and working (its model held)."""
    await pilot.press(*"first task", "enter")
    await wait_until(
        pilot,
        lambda: screen.selected_run is not None and screen.selected_run.state is RunState.RUNNING,
    )
    assert screen.selected_run is not None
    return screen.selected_run


def _settled(app: AgentTuiApp, screen: MainScreen) -> bool:
    """The screen has the request, and has decided where keys go: to its prompt (docked with
    the focus) or to the box (the prompt waits)."""
    if screen.open_request is None:
        return False
    if screen.prompt_waits:
        return True
    focused = app.focused
    return focused is not None and any(
        prompt in focused.ancestors_with_self for prompt in screen.query(PROMPTS)
    )


def _files(workspace: Path) -> list[Path]:
    return sorted(workspace.rglob("*"))


@pytest.mark.parametrize("kind", ["approval", "question", "form"])
async def test_keys_typed_as_a_prompt_comes_go_into_the_box_and_answer_nothing(
    db_path: Path, workspace: Path, kind: str
) -> None:
    gate = asyncio.Event()
    runtime = await _open(kind, gate, db_path, workspace)
    clock = PersonsClock()
    try:
        app = make_app(runtime, workspace, clock=clock)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            first = await _working(pilot, screen)
            files = _files(workspace)
            clock.now += 30  # the person reads the answer as it comes, typing nothing
            gate.set()
            await wait_until(pilot, lambda: _settled(app, screen))
            # The person starts a message just then: "A" would allow for good, "a" for the
            # run, "y" once; in a question's or a form's field, Enter would send the words.
            await pilot.press(*"Always say hello there")
            composer = screen.composer
            assert composer.input.text == "Always say hello there"
            assert app.focused is composer.input and composer.display
            assert "Tab answers now" in screen_text(app)
            request = await runtime.open_request(first.id)
            assert request is not None and request.state is InputRequestState.PENDING

            await pilot.press("enter")  # sent: queued for the job
            await wait_until(pilot, lambda: composer.queued(first.job_id))
            assert composer.queued(first.job_id) == ["Always say hello there"]
            assert screen.prompt_waits  # Enter was a key too: it docks once typing pauses
            clock.now += 2
            await wait_until(pilot, lambda: not screen.prompt_waits and screen.query(PROMPTS))
            assert composer.queued(first.job_id) == ["Always say hello there"]
            stored = await runtime.store.get_input_request(request.id)
            assert stored.state is InputRequestState.PENDING and stored.answer is None
            assert (await runtime.get_run(first.id)).state is RunState.INPUT_REQUIRED
        # Nothing written: no file of the write, no rule allowing it for good.
        assert _files(workspace) == files
    finally:
        gate.set()
        await runtime.close()


async def test_keys_sent_in_one_burst_with_the_prompt_land_in_the_box(
    db_path: Path, workspace: Path
) -> None:
    """The empty box has the focus, and the keys arrive with the prompt, all queued before
    either is handled (a terminal's burst while the app is busy)."""
    gate = asyncio.Event()
    runtime = await _open("approval", gate, db_path, workspace)
    clock = PersonsClock()
    try:
        app = make_app(runtime, workspace, clock=clock)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            first = await _working(pilot, screen)
            clock.now += 30
            gate.set()
            async with asyncio.timeout(30):
                while await runtime.open_request(first.id) is None:
                    await asyncio.sleep(0.01)
            send_burst(app, list("yaA say hi"))
            composer = screen.composer
            await wait_until(pilot, lambda: composer.input.text == "yaA say hi")
            await wait_until(pilot, lambda: _settled(app, screen))
            assert app.focused is composer.input and screen.prompt_waits
            request = await runtime.open_request(first.id)
            assert request is not None and request.state is InputRequestState.PENDING
        assert not (workspace / "n.md").exists()
    finally:
        gate.set()
        await runtime.close()


async def test_a_prompt_that_waited_for_a_pause_takes_the_keys_once_typing_stops(
    db_path: Path, workspace: Path
) -> None:
    """A word typed and rubbed out just before the prompt came: the box is empty, but the
    person is typing. The prompt waits, and says so; a moment without keys later it docks by
    itself and its keys answer it."""
    gate = asyncio.Event()
    runtime = await _open("approval", gate, db_path, workspace)
    clock = PersonsClock()
    try:
        app = make_app(runtime, workspace, clock=clock)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            first = await _working(pilot, screen)
            clock.now += 30
            await pilot.press(*"ok", "backspace", "backspace")
            gate.set()
            await wait_until(pilot, lambda: _settled(app, screen))
            clock.now += 0.6  # the prompt has been there a while; the last key is as recent
            await pilot.press("y")  # typed on: text
            assert screen.composer.input.text == "y"
            await pilot.press("backspace")
            assert screen.prompt_waits and not screen.query(ApprovalPrompt)
            assert "once you stop typing; Tab answers now" in screen_text(app)

            clock.now += 2  # a pause: the prompt takes the keys
            await wait_until(pilot, lambda: isinstance(app.focused, ApprovalPrompt))
            assert not screen.composer.display
            await pilot.press("y")
            await wait_until(pilot, lambda: (workspace / "n.md").exists(), timeout=30)
        run = await runtime.get_run(first.id)
        assert run.state is not RunState.INPUT_REQUIRED
    finally:
        gate.set()
        await runtime.close()


async def test_a_prompt_that_comes_while_the_browser_has_the_focus_takes_the_keys_at_once(
    db_path: Path, workspace: Path
) -> None:
    """No key goes to the box: nothing to wait for (the browser's keys are actions, and the
    prompt docks as before)."""
    gate = asyncio.Event()
    runtime = await _open("approval", gate, db_path, workspace)
    clock = PersonsClock()
    try:
        app = make_app(runtime, workspace, clock=clock)
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)
            await _working(pilot, screen)
            await pilot.press("tab")  # from the box: the browser
            await wait_until(pilot, lambda: app.focused is screen.job_tree)
            gate.set()  # the clock stands still: no pause needed
            await wait_until(pilot, lambda: isinstance(app.focused, ApprovalPrompt))
            assert not screen.prompt_waits
            await pilot.press("y")
            await wait_until(pilot, lambda: (workspace / "n.md").exists(), timeout=30)
    finally:
        gate.set()
        await runtime.close()
