"""Keys typed as a prompt docks are text for the message box, not answers. Found by a new-user
trial: "hello there" and Enter, typed into an empty box just as a write's approval docked,
denied the write (its "r" asked for a reason, Enter sent it) and the words were gone; a "y",
"a" or "A" among them would have allowed it, "A" for good. A prompt that takes the keys from the
box now answers to them only once settled (``Settings.prompt_settle_seconds``), and shows its
keys line from then on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from textual import events
from textual.pilot import Pilot
from textual.widgets import Static

from runtime.api import Runtime
from runtime.models import InputRequest, InputRequestState
from tests.fakes.scripted import ScriptedProvider, Turn, open_scripted
from tests.tui.helpers import (
    SIZE,
    first_task_running,
    main_screen,
    make_app,
    screen_text,
    wait_until,
)
from tui.app import AgentTuiApp
from tui.screens.main import MainScreen
from tui.widgets._prompt_base import SettlingPrompt
from tui.widgets.approval_prompt import ApprovalPrompt
from tui.widgets.key_footer import FooterKey, KeyFooter
from tui.widgets.search_field import SearchField

CALLS = {
    "approval": ("write_file", {"path": "n.md", "content": "x"}),
    "question": (
        "ask_user",
        {"question": "Which folder?", "options": ["src", "docs"], "allow_free_text": True},
    ),
}


async def _open(kind: str, gate: asyncio.Event, db_path: Path, workspace: Path) -> Runtime:
    """A model that asks for ``kind`` once ``gate`` is set (the run works meanwhile)."""
    script = [Turn("One thing first.", tool_calls=[CALLS[kind]], gate=gate), Turn("Done.")]
    return await open_scripted(ScriptedProvider(script), db_path, workspace)


def _docked(app: AgentTuiApp, screen: MainScreen) -> SettlingPrompt | None:
    """The prompt docked with the keys (its answer field's, for a question), if one is."""
    focused = app.focused
    for prompt in screen.query("#bottom > ApprovalPrompt, #bottom > QuestionPrompt"):
        if prompt.display and focused is not None and prompt in focused.ancestors_with_self:
            assert isinstance(prompt, SettlingPrompt)
            return prompt
    return None


def _keys_line_shown(prompt: SettlingPrompt) -> bool:
    return prompt.query_one(".prompt-keys", Static).styles.visibility == "visible"


def _footer_keys(screen: MainScreen) -> set[str]:
    return {key.key for key in screen.query_one(KeyFooter).query(FooterKey)}


async def _pending(runtime: Runtime, request: InputRequest) -> bool:
    stored = await runtime.store.get_input_request(request.id)
    return stored.state is InputRequestState.PENDING


@dataclass
class _Working:
    """A first task sent from the box and working, its model held until ``ask`` lets it ask."""

    runtime: Runtime
    app: AgentTuiApp
    pilot: Pilot[Any]
    screen: MainScreen
    gate: asyncio.Event

    async def ask(self) -> tuple[SettlingPrompt, InputRequest]:
        """The model asks: the prompt docked with the keys, and its request."""
        self.gate.set()
        await wait_until(self.pilot, lambda: _docked(self.app, self.screen) is not None)
        prompt, request = _docked(self.app, self.screen), self.screen.open_request
        assert prompt is not None and request is not None
        return prompt, request

    async def answer(self, request: InputRequest) -> object:
        """The answer stored once the prompt went."""
        await wait_until(self.pilot, lambda: self.screen.open_request is None)
        stored = await self.runtime.store.get_input_request(request.id)
        assert stored.state is InputRequestState.ANSWERED
        return stored.answer


@asynccontextmanager
async def _working(
    db_path: Path,
    workspace: Path,
    kind: str = "approval",
    *,
    settle: float = 600,
    size: tuple[int, int] = SIZE,
) -> AsyncIterator[_Working]:
    """``settle``: how long a prompt takes to settle (600: longer than the test, every key
    typed at it is too soon)."""
    gate = asyncio.Event()
    runtime = await _open(kind, gate, db_path, workspace)
    try:
        app = make_app(runtime, workspace, prompt_settle_seconds=settle)
        async with app.run_test(size=size) as pilot:
            screen = main_screen(app)
            await first_task_running(pilot, screen)
            yield _Working(runtime, app, pilot, screen, gate)
    finally:
        await runtime.close()


@pytest.mark.parametrize("kind", ["approval", "question"])
async def test_keys_typed_as_a_prompt_docks_go_into_the_box_and_answer_nothing(
    db_path: Path, workspace: Path, kind: str
) -> None:
    async with _working(db_path, workspace, kind) as w:
        app, pilot, screen = w.app, w.pilot, w.screen
        first = screen.selected_run
        assert first is not None
        prompt, request = await w.ask()
        assert not prompt.settled
        assert not _keys_line_shown(prompt)  # its keys show once they answer it
        assert not {"y", "a", "A"} & _footer_keys(screen)  # nor does the footer offer them
        # The person starts a message just then: "A" would allow for good, "a" for the run,
        # "y" once, "r" ask a reason; in a question's field, Enter would send the words as
        # the answer.
        await pilot.press(*"Always say hello there")
        composer = screen.composer
        await wait_until(pilot, lambda: composer.input.text == "Always say hello there")
        assert app.focused is composer.input and composer.display
        assert screen.prompt_waits and "Tab answers now" in screen_text(app)
        assert await _pending(w.runtime, request)

        await pilot.press("enter")  # sent: queued for the job, and the prompt docks again
        await wait_until(pilot, lambda: composer.queued(first.job_id))
        assert composer.queued(first.job_id) == ["Always say hello there"]
        await wait_until(pilot, lambda: _docked(app, screen) is not None)
        await pilot.press("y")  # too soon again: text, not an answer
        await wait_until(pilot, lambda: composer.input.text == "y")
        assert await _pending(w.runtime, request)

        await pilot.press("tab")  # answer now: asked for, it takes the keys at once
        await wait_until(pilot, lambda: _docked(app, screen) is not None)
        prompt = _docked(app, screen)
        assert prompt is not None and prompt.settled and _keys_line_shown(prompt)
        await pilot.press(*(["y"] if kind == "approval" else ["1", "enter"]))
        assert await w.answer(request) == (
            {"decision": "allow_once", "reason": None} if kind == "approval" else "src"
        )
        await wait_until(pilot, lambda: composer.input.text == "y")  # kept, not lost


async def test_a_prompt_takes_its_keys_once_settled_and_shows_them_then(
    db_path: Path, workspace: Path
) -> None:
    async with _working(db_path, workspace, settle=0.3, size=(120, 40)) as w:
        pilot, screen = w.pilot, w.screen
        prompt, request = await w.ask()
        await wait_until(pilot, lambda: prompt.settled)
        assert _keys_line_shown(prompt)
        await wait_until(pilot, lambda: {"y", "a", "A", "n"} <= _footer_keys(screen))
        # In the form that fits the prompt's width, chosen once it shows (hidden, it had no
        # width, and the long form wrapped).
        keys = prompt.query_one(".prompt-keys", Static)
        await wait_until(pilot, lambda: "y once" in str(keys.render()))
        assert keys.size.height == 1
        await pilot.press("y")
        assert await w.answer(request) == {"decision": "allow_once", "reason": None}
        assert screen.composer.input.text == ""


async def test_a_prompt_that_docks_while_the_browser_has_the_keys_takes_them_at_once(
    db_path: Path, workspace: Path
) -> None:
    """Keys there are commands, not text: the prompt answers to them as before."""
    async with _working(db_path, workspace) as w:
        w.screen.job_tree.focus()
        await wait_until(w.pilot, lambda: w.app.focused is w.screen.job_tree)
        prompt, _ = await w.ask()
        assert prompt.settled and _keys_line_shown(prompt)


async def test_the_hidden_keys_line_already_has_the_form_that_fits_so_the_prompt_keeps_its_height(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: hidden, the line had no width of its own, kept the long
    form, which took two rows at 120 columns, and the prompt shrank by one as it settled."""
    async with _working(db_path, workspace, size=(120, 40)) as w:
        prompt, _ = await w.ask()
        assert not prompt.settled
        keys = prompt.query_one(".prompt-keys", Static)
        await wait_until(w.pilot, lambda: str(keys.render()) == ApprovalPrompt.SHORT_KEYS)


@pytest.mark.parametrize("kind", ["approval", "question"])
async def test_a_paste_as_a_prompt_docks_goes_into_the_box(
    db_path: Path, workspace: Path, kind: str
) -> None:
    """Found by a new-user trial: pasted as the question docked, the text went into its
    answer field (and Enter sent it as the answer); at an approval it vanished."""
    async with _working(db_path, workspace, kind) as w:
        _, request = await w.ask()
        w.app.post_message(events.Paste("pasted note\nsecond line"))
        composer = w.screen.composer
        await wait_until(w.pilot, lambda: composer.input.text == "pasted note\nsecond line")
        assert w.app.focused is composer.input and w.screen.prompt_waits
        assert await _pending(w.runtime, request)


async def test_a_prompt_that_docks_while_a_search_is_typed_leaves_the_keys_to_the_search(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: typing "aaa" in the browser's search field as a write's
    approval docked, the next "a" allowed the write for the whole run."""
    async with _working(db_path, workspace, settle=0) as w:
        app, pilot, screen = w.app, w.pilot, w.screen
        screen.action_search()
        search = screen.query_one(SearchField)
        await wait_until(pilot, lambda: app.focused is search)
        await pilot.press(*"aa")
        w.gate.set()
        await wait_until(pilot, lambda: bool(screen.query(ApprovalPrompt)))
        request = screen.open_request
        assert request is not None
        await pilot.press(*"aA")
        await wait_until(pilot, lambda: search.value == "aaaA")
        assert app.focused is search
        assert await _pending(w.runtime, request)


async def test_enter_in_the_emptied_box_docks_the_prompt_that_waited(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: a stray key held the prompt; rubbed out, the box was empty,
    Enter did nothing, and the prompt stayed hidden."""
    async with _working(db_path, workspace) as w:
        await w.ask()
        await w.pilot.press("y")
        await wait_until(w.pilot, lambda: w.screen.prompt_waits)
        await w.pilot.press("backspace", "enter")
        await wait_until(w.pilot, lambda: _docked(w.app, w.screen) is not None)
        prompt = _docked(w.app, w.screen)
        assert prompt is not None and prompt.settled and not w.screen.prompt_waits


async def test_a_prompt_that_waits_over_the_box_docks_when_the_inbox_opens_it(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: with the prompt waiting over the box, Esc, i and Enter on its
    request in the inbox left it hidden and the keys in the browser ("y" did nothing)."""
    from textual.widgets import OptionList

    from tui.screens.inbox import InboxScreen

    async with _working(db_path, workspace) as w:
        app, pilot, screen = w.app, w.pilot, w.screen
        _, request = await w.ask()
        await pilot.press("x")  # too soon: text, and the prompt waits over the box
        await wait_until(pilot, lambda: screen.prompt_waits)
        await pilot.press("escape")
        await wait_until(pilot, lambda: screen._pane_of(app.focused) == 0)
        await pilot.press("i")
        await wait_until(pilot, lambda: isinstance(app.screen, InboxScreen))
        inbox = app.screen.query_one("#inbox-list", OptionList)
        await wait_until(pilot, lambda: inbox.option_count == 1)
        await pilot.press("enter")
        await wait_until(pilot, lambda: _docked(app, screen) is not None)
        await pilot.press("y")
        assert await w.answer(request) == {"decision": "allow_once", "reason": None}
        await wait_until(pilot, lambda: screen.composer.input.text == "x")  # kept
