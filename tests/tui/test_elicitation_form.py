"""The elicitation form answering a real MCP server (the SDK's, in memory): every choice shape of
the spec (several of a list, titled or not, with bounds; one of a list titled by ``oneOf`` or
``enumNames``) is shown by its titles, chosen with the keyboard and sent back as the server's
values; a refused submit says so at the top and goes to the field; fields use the form's width."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from textual.containers import Vertical
from textual.widgets import Input, Select, SelectionList, Static

from runtime.api import Runtime
from runtime.config import Config
from runtime.mcp import InMemoryServer, McpManager
from runtime.models import RunState, ToolCall, ToolCallState
from tests.fakes.mcp_servers import build_server
from tests.fakes.scripted import ScriptedProvider, Turn, open_scripted
from tests.tui.helpers import make_app, send_burst, wait_until
from tui.app import AgentTuiApp
from tui.screens.main import MainScreen
from tui.widgets.elicitation_form import ElicitationForm

DEFAULTS = {
    "opening": "It was a dark and stormy night.",
    "instruments": ["Guitar"],
    "hero": "hero-1",
    "fish": ["fish-1"],
    "pet": "pet-1",
}
WAIT = 20  # seconds: bounds every wait below


@pytest.fixture
async def runtime(db_path: Path, workspace: Path) -> AsyncIterator[Runtime]:
    """A run that calls the test server's ``favourites`` (read-only: no approval), whose
    result is the form's answer as the server received it."""
    model = ScriptedProvider([Turn(tool_calls=[("basic__favourites", {})]), Turn(text="Noted.")])
    manager = McpManager(
        {"basic": InMemoryServer(build_server("basic"), timeout=30)}, workspace=workspace
    )
    opened = await open_scripted(model, db_path, workspace, mcp=manager)
    try:
        yield opened
    finally:
        await opened.close()


async def _open_form(pilot: Any, app: AgentTuiApp) -> ElicitationForm:
    screen = app.screen
    assert isinstance(screen, MainScreen)
    await pilot.press(*"pick", "enter")
    await wait_until(pilot, lambda: screen.query(ElicitationForm), timeout=WAIT)
    form = screen.query_one(ElicitationForm)
    await wait_until(pilot, lambda: app.focused in form.query("#input-opening"), timeout=WAIT)
    return form


async def _server_received(runtime: Runtime, pilot: Any, app: AgentTuiApp) -> Any:
    """The answer the server got (its tool's result), once the run has finished."""
    screen = app.screen
    assert isinstance(screen, MainScreen)
    await wait_until(
        pilot,
        lambda: screen.selected_run is not None and screen.selected_run.state is RunState.COMPLETED,
        timeout=WAIT,
    )
    run = screen.selected_run
    assert run is not None
    [call] = await runtime.tool_calls(run.id)
    assert call.state is ToolCallState.COMPLETED, call
    return json.loads(call.result or "")


async def test_a_form_sent_untouched_gives_the_server_its_own_defaults_in_the_shapes_it_asked(
    runtime: Runtime, workspace: Path
) -> None:
    # Found by a new-user trial: a list default showed as "['Guitar']" in a text box, and the
    # form refused its own default ("is not of type 'array'").
    app = make_app(runtime, workspace)
    async with app.run_test(size=(140, 45)) as pilot:
        await _open_form(pilot, app)
        await pilot.press("ctrl+s")
        received = await _server_received(runtime, pilot, app)
    assert received == DEFAULTS


async def test_a_quit_with_a_form_open_says_the_form_ended_and_how_to_go_on(
    runtime: Runtime, workspace: Path, db_path: Path
) -> None:
    """Found by a trial: quitting with a form typed into said nothing, and the README promised
    that an MCP server's request for input survives a restart; it ends with its session."""
    app = make_app(runtime, workspace)
    async with app.run_test(size=(140, 45)) as pilot:
        await _open_form(pilot, app)
        await pilot.press(*"Once upon a time")
        screen = app.screen
        assert isinstance(screen, MainScreen) and screen.selected_run is not None
        run_id = screen.selected_run.id
        await pilot.press("ctrl+q")
        await wait_until(pilot, lambda: not app.is_running, timeout=WAIT)
    assert app.quit_note == (
        "agent-tui: the form an MCP server asked for ended with its session, and its run failed"
        f" (select it and press R, or agent-tui --db {db_path.resolve()} retry {run_id[:8]},"
        " to go on)."
    )


async def test_choices_show_their_titles_and_are_made_with_tab_arrows_space_and_enter(
    runtime: Runtime, workspace: Path
) -> None:
    app = make_app(runtime, workspace)
    async with app.run_test(size=(140, 45)) as pilot:
        form = await _open_form(pilot, app)
        fish = form.query_one("#input-fish", SelectionList)
        assert [str(fish.get_option_at_index(i).prompt) for i in range(3)] == [
            "Tuna",
            "Salmon",
            "Trout",
        ]
        assert form.query_one("#input-hero", Select).selection == 0  # shown as "Superman"
        assert "Superman" in _texts(form) and "hero-1" not in _texts(form)
        assert "Cats" in _texts(form) and "pet-1" not in _texts(form)

        await pilot.press("tab")  # instruments: Guitar is ticked; tick Piano too
        assert app.focused is form.query_one("#input-instruments")
        await pilot.press("down", "space")
        await pilot.press("tab", "enter")  # hero: open the list, one down, take it
        await pilot.press("down", "enter")
        await pilot.press("tab")  # fish: untick Tuna, tick Trout
        assert app.focused is fish
        await pilot.press("space", "down", "down", "space")
        await pilot.press("tab", "enter", "down", "enter")  # pet: Dogs
        await pilot.press("ctrl+s")
        received = await _server_received(runtime, pilot, app)
    assert received == {
        "opening": "It was a dark and stormy night.",
        "instruments": ["Guitar", "Piano"],
        "hero": "hero-2",
        "fish": ["fish-3"],
        "pet": "pet-2",
    }


async def test_more_choices_than_max_items_are_refused_in_words_then_a_fixed_answer_goes(
    runtime: Runtime, workspace: Path
) -> None:
    app = make_app(runtime, workspace)
    async with app.run_test(size=(140, 45)) as pilot:
        form = await _open_form(pilot, app)
        instruments = form.query_one("#input-instruments", SelectionList)
        await pilot.press("tab", "down", "space", "down", "space")  # Guitar, Piano, Violin
        await pilot.press("shift+tab")  # back in the text box: ctrl+s from anywhere
        await pilot.press("ctrl+s")
        await pilot.pause()

        error = str(form.query_one("#error-instruments", Static).render())
        assert error == "choose 1 to 2 (3 chosen)"
        top = str(form.query_one("#error-form", Static).render())
        assert top == "✗ Not sent: 1 field needs attention: Instruments"
        assert app.focused is instruments
        run = app.screen.selected_run  # type: ignore[attr-defined]
        [call] = await runtime.tool_calls(run.id)
        assert call.state is ToolCallState.RUNNING  # nothing was sent

        await pilot.press("space")  # Violin, still highlighted, is unticked
        await pilot.press("ctrl+s")
        received = await _server_received(runtime, pilot, app)
    assert received["instruments"] == ["Guitar", "Piano"]


async def test_a_refused_submit_says_so_at_the_top_and_goes_to_the_first_field_in_view(
    runtime: Runtime, workspace: Path
) -> None:
    app = make_app(runtime, workspace)
    async with app.run_test(size=(80, 24)) as pilot:
        form = await _open_form(pilot, app)
        fields = form.query_one("#fields")
        opening = form.query_one("#field-opening", Vertical)  # label, box, help
        await pilot.press("ctrl+u")  # the required opening line emptied
        await pilot.press("tab", "tab", "tab", "tab")  # down to the last field
        assert app.focused is form.query_one("#input-pet")
        await wait_until(
            pilot, lambda: not fields.region.contains_region(opening.region), timeout=WAIT
        )

        await pilot.press("ctrl+s")
        top = form.query_one("#error-form", Static)
        await wait_until(pilot, lambda: top.region.height > 0, timeout=WAIT)
        assert str(top.render()) == "✗ Not sent: 1 field needs attention: Opening line"
        assert app.focused is form.query_one("#input-opening", Input)
        error = form.query_one("#error-opening", Static)
        seen = (form.query_one("#input-opening"), error)  # the field and what is wrong with it
        await wait_until(
            pilot,
            lambda: all(fields.region.contains_region(w.region) for w in seen),
            timeout=WAIT,
        )
        assert str(error.render()) == "required"

        await pilot.press(*"Once upon a time", "enter")
        received = await _server_received(runtime, pilot, app)
    assert received == DEFAULTS | {"opening": "Once upon a time"}


async def test_on_a_short_terminal_the_choice_the_arrows_move_to_stays_in_view(
    runtime: Runtime, workspace: Path
) -> None:
    app = make_app(runtime, workspace)
    async with app.run_test(size=(80, 20)) as pilot:
        form = await _open_form(pilot, app)
        fields = form.query_one("#fields")
        instruments = form.query_one("#input-instruments", SelectionList)
        await pilot.press("tab")
        assert app.focused is instruments
        assert instruments.region.height > fields.region.height  # five choices, a short view

        def highlighted_row_in_view() -> bool:
            index = instruments.highlighted or 0
            row = instruments.region.y + 1 + index - round(instruments.scroll_y)
            return fields.region.contains_point((instruments.region.x, row))

        for _ in range(4):
            await pilot.press("down")
            await wait_until(pilot, highlighted_row_in_view, timeout=WAIT)
        await pilot.press("space")  # Bass, seen
        await pilot.press("ctrl+s")
        received = await _server_received(runtime, pilot, app)
    assert received["instruments"] == ["Guitar", "Bass"]


async def test_letters_on_a_form_s_choice_list_are_not_the_screen_s_single_letter_keys(
    runtime: Runtime, workspace: Path
) -> None:
    from tui.widgets.confirm_bar import ConfirmBar

    app = make_app(runtime, workspace)
    async with app.run_test(size=(140, 45)) as pilot:
        form = await _open_form(pilot, app)
        await pilot.press("tab")
        assert app.focused is form.query_one("#input-instruments")
        await pilot.press("c")  # the screen's "cancel the run?" would take the next keys
        await pilot.press("down", "space")  # Piano ticked
        assert not app.screen.query(ConfirmBar)
        await pilot.press("ctrl+s")
        received = await _server_received(runtime, pilot, app)
    assert received == DEFAULTS | {"instruments": ["Guitar", "Piano"]}


async def test_shift_tab_from_the_first_field_never_stops_on_the_form_s_invisible_scroller(
    runtime: Runtime, workspace: Path
) -> None:
    # Found by a new-user trial: shift+tab from the first field went to the fields' scroll
    # container, which shows no focus and takes no text: the letters typed next vanished.
    app = make_app(runtime, workspace)
    async with app.run_test(size=(140, 45)) as pilot:
        form = await _open_form(pilot, app)
        screen = app.screen
        assert isinstance(screen, MainScreen)
        await pilot.press("shift+tab")
        assert app.focused is screen.conversation  # the pane before the prompt
        await pilot.press("tab")  # and back to the form's first field
        assert app.focused is form.query_one("#input-opening")


async def test_text_typed_in_a_burst_after_tab_goes_into_the_field_tab_moved_to(
    runtime: Runtime, workspace: Path
) -> None:
    # Found by a new-user trial (tmux, keys sent at once): Tab, Tab, Tab and "ada" put "ada"
    # into the first field, and the focus went one field down: it moved behind the keys
    # already queued, and each Tab started again from the first field.
    app = make_app(runtime, workspace)
    async with app.run_test(size=(140, 45)) as pilot:
        form = await _open_form(pilot, app)
        opening = form.query_one("#input-opening", Input)
        send_burst(app, ["tab", "tab", *"Ada", "shift+tab", "shift+tab", *" The end."])
        await wait_until(pilot, lambda: opening.value.endswith("The end."), timeout=WAIT)
        assert app.focused is opening
        assert opening.value == DEFAULTS["opening"] + " The end."  # "Ada" went to the hero
        await pilot.press("ctrl+s")
        received = await _server_received(runtime, pilot, app)
    assert received == DEFAULTS | {"opening": DEFAULTS["opening"] + " The end."}


@pytest.mark.parametrize("size", [(80, 24), (140, 45)])
async def test_text_fields_use_the_form_s_width_and_the_buttons_stay_in_view(
    runtime: Runtime, workspace: Path, size: tuple[int, int]
) -> None:
    # Found by a new-user trial: boxes of a dozen characters with 30 empty columns beside
    # them; the default "It was a dark and stormy night." was cut.
    app = make_app(runtime, workspace)
    async with app.run_test(size=size) as pilot:
        form = await _open_form(pilot, app)
        opening = form.query_one("#input-opening", Input)
        await pilot.pause()
        assert opening.content_region.width > len(DEFAULTS["opening"])
        fields = form.query_one("#fields")
        assert fields.scrollable_content_region.right - opening.region.right <= 0
        bottom = app.screen.query_one("#bottom")
        submit = form.query_one("#submit")
        assert bottom.region.contains_region(submit.region)


def _texts(form: ElicitationForm) -> str:
    """What the form's text widgets show (labels, help, a choice list's current title)."""
    return "\n".join(str(static.render()) for static in form.query(Static))


@asynccontextmanager
async def _everything_form(
    db_path: Path, workspace: Path
) -> AsyncIterator[tuple[Any, ElicitationForm, Callable[[], Awaitable[ToolCall]]]]:
    """The published server-everything's elicitation form, docked in the real app for a task
    whose only tool call asks for it (its name field focused); ``finished()`` waits for the run
    to complete and gives that call."""
    from runtime.config import Permissions
    from tests.mcp import published

    model = ScriptedProvider(
        [Turn(tool_calls=[("everything__trigger-elicitation-request", {})]), Turn(text="Ok.")]
    )
    manager = McpManager(
        {"everything": published.stdio("everything", "stdio")}, workspace=workspace
    )
    runtime = await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=Config(permissions=Permissions(allow=["everything__*"])),
        model="scripted:test",
        providers=lambda reference: model,
        mcp=manager,
    )
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=(140, 45)) as pilot:
            screen = app.screen
            assert isinstance(screen, MainScreen)
            await pilot.press(*"try the form", "enter")
            await wait_until(pilot, lambda: screen.query(ElicitationForm), timeout=60)
            form = screen.query_one(ElicitationForm)
            await wait_until(pilot, lambda: app.focused in form.query("#input-name"))

            async def finished() -> ToolCall:
                await wait_until(
                    pilot,
                    lambda: (
                        screen.selected_run is not None
                        and screen.selected_run.state is RunState.COMPLETED
                    ),
                    timeout=60,
                )
                run = screen.selected_run
                assert run is not None
                [call] = await runtime.tool_calls(run.id)
                return call

            yield pilot, form, finished
    finally:
        await runtime.close()


@pytest.mark.slow  # a Node server process
async def test_server_everything_s_form_is_accepted_with_its_defaults_and_a_typed_name(
    db_path: Path, workspace: Path
) -> None:
    # The new-user trial's form, from the published server: only Decline worked.
    async with _everything_form(db_path, workspace) as (pilot, _form, finished):
        await pilot.press(*"Ada Lovelace", "ctrl+s")
        call = await finished()

    assert call.state is ToolCallState.COMPLETED and call.result is not None
    assert "User provided the requested information" in call.result
    raw = json.loads(call.result.split("Raw result: ", 1)[1])
    assert raw == {
        "action": "accept",
        "content": {
            "name": "Ada Lovelace",
            "check": False,
            "firstLine": "It was a dark and stormy night.",
            "integer": 42,
            "number": 3.14,
            "untitledSingleSelectEnum": "Monica",
            "untitledMultipleSelectEnum": ["Guitar"],
            "titledSingleSelectEnum": "hero-1",
            "titledMultipleSelectEnum": ["fish-1"],
            "legacyTitledEnum": "pet-1",
        },
    }


@pytest.mark.slow  # a Node server process
async def test_an_email_field_holding_no_email_address_is_refused_before_the_server_gets_it(
    db_path: Path, workspace: Path
) -> None:
    # Found by a new-user trial: server-everything's form took "ada" as an email address
    # and "example.com" as a URI, and the server was sent both.
    async with _everything_form(db_path, workspace) as (pilot, form, finished):
        await pilot.press(*"Ada", "tab", "tab", "tab", *"ada", "ctrl+s")
        top = form.query_one("#error-form", Static)
        await wait_until(pilot, lambda: top.region.height > 0, timeout=WAIT)
        assert str(top.render()) == (
            "✗ Not sent: 1 field needs attention: String with email format"
        )
        error = form.query_one("#error-email", Static)
        assert str(error.render()) == "'ada' is not an email address"
        assert pilot.app.focused is form.query_one("#input-email")
        await pilot.press(*"@example.org", "ctrl+s")
        call = await finished()
    assert call.result is not None and "- Email: ada@example.org" in call.result
