"""Elicitation forms built from a JSON Schema, and themes loaded from data files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.color import Color
from textual.pilot import Pilot
from textual.widgets import Checkbox, Input, Static

from runtime.api import Runtime
from runtime.models import InputKind, InputRequestState
from runtime.store.base import NewInputRequest, NewRun
from tests.fakes.scripted import ScriptedProvider, Turn, open_scripted
from tests.tui.helpers import (
    SIZE,
    main_screen,
    make_app,
    notifications,
    wait_for_browser,
    wait_until,
)
from themes import load_theme_file, load_themes
from tui.screens.main import MainScreen
from tui.widgets.approval_prompt import ApprovalPrompt
from tui.widgets.elicitation_form import ElicitationForm
from tui.widgets.message_view import MessageView
from tui.widgets.question_prompt import AnswerInput, QuestionPrompt

FORM_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {
            "type": "string",
            "title": "Name",
            "description": "Your full legal name",
            "minLength": 2,
        },
        "count": {"type": "integer", "title": "How many", "minimum": 1},
        "urgent": {"type": "boolean", "title": "Urgent"},
        "colour": {"enum": ["red", "green"], "title": "Colour"},
    },
    "required": ["name", "count"],
}


async def _waiting_elicitation(
    runtime: Runtime, workspace: Path, schema: dict[str, Any] = FORM_SCHEMA
) -> tuple[str, str]:
    """A run waiting on an MCP-style form, made through the store as the engine would."""
    store = runtime.store
    run = await store.create_run(
        NewRun(
            agent="default",
            model="demo:instant",
            input="book a table",
            workspace=str(workspace),
            owner_id=runtime.owner_id,
        )
    )
    claimed = await store.claim_run(run.id, owner_id=runtime.owner_id)
    _, request = await store.open_input_request(
        run.id,
        token=claimed.execution_token or "",
        request=NewInputRequest(
            kind=InputKind.ELICITATION,
            prompt="Details for the booking",
            schema=schema,
            detail={"server": "bookings"},
        ),
    )
    return run.id, request.id


async def test_an_elicitation_form_shows_errors_beside_fields_then_sends_the_answer(
    runtime: Runtime, workspace: Path
) -> None:
    run_id, request_id = await _waiting_elicitation(runtime, workspace)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        await wait_for_browser(pilot, app)
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen.query(ElicitationForm))
        form = screen.query_one(ElicitationForm)
        assert isinstance(form.query_one("#input-urgent"), Checkbox)
        label = form.query_one("#field-name .field-label", Static)
        assert str(label.render()).startswith("Name")
        assert str(form.query_one("#help-name", Static).render()) == "Your full legal name"

        await pilot.press("x", "ctrl+s")  # a one-letter name and no count
        await pilot.pause()
        assert "required" in str(form.query_one("#error-count", Static).render())
        assert str(form.query_one("#error-name", Static).render())
        pending = await runtime.store.get_input_request(request_id)
        assert pending.state is InputRequestState.PENDING

        form.query_one("#input-name", Input).value = "Ada"
        form.query_one("#input-count", Input).value = "4"
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: not screen.query(ElicitationForm))
    answered = await runtime.store.get_input_request(request_id)
    assert answered.state is InputRequestState.ANSWERED
    assert answered.answer["content"] == {"name": "Ada", "count": 4, "urgent": False}
    assert run_id


async def test_a_number_typed_over_its_default_replaces_it_and_is_kept_when_focus_returns(
    runtime: Runtime, workspace: Path
) -> None:
    # Found by a trial: Tab into a field whose default is 42, type 500, and it read 42500
    # ("greater than the maximum of 100"). What was typed is still kept when the focus comes
    # back (it was once replaced whole by the next key).
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Name"},
            "guests": {"type": "integer", "title": "Guests", "default": 42, "maximum": 100},
        },
    }
    _, request_id = await _waiting_elicitation(runtime, workspace, schema)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        await wait_for_browser(pilot, app)
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen.query(ElicitationForm))
        form = screen.query_one(ElicitationForm)
        guests = form.query_one("#input-guests", Input)
        await pilot.press(*"Ada", "tab", "5")
        await wait_until(pilot, lambda: guests.value == "5")
        await pilot.press("shift+tab", "tab", "0", "ctrl+s")
        await wait_until(pilot, lambda: not screen.query(ElicitationForm))
    answered = await runtime.store.get_input_request(request_id)
    assert answered.answer["content"] == {"name": "Ada", "guests": 50}


def test_the_project_themes_load_and_validate() -> None:
    themes, problems = load_themes()
    assert problems == []
    assert {"agent-dusk", "agent-paper", "agent-moss"} <= {theme.name for theme in themes}


def test_a_bad_theme_file_is_reported_with_its_name_and_problem(tmp_path: Path) -> None:
    bad = tmp_path / "broken.toml"
    bad.write_text('name = "broken"\nprimary = "not-a-colour"\n')
    with pytest.raises(ValueError, match=r"broken\.toml: primary"):
        load_theme_file(bad)


async def test_a_bad_theme_file_is_a_notification_and_the_app_still_runs(
    runtime: Runtime, workspace: Path, tmp_path: Path
) -> None:
    themes_dir = tmp_path / "themes"
    themes_dir.mkdir()
    (themes_dir / "broken.toml").write_text("name = [unclosed\n")
    (themes_dir / "fine.toml").write_text('name = "fine"\nprimary = "#336699"\n')
    app = make_app(runtime, workspace, theme_dirs=(themes_dir,), theme="fine")
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: any("broken.toml" in n for n in notifications(app)))
        assert app.theme == "fine"
        assert app.is_running


async def test_the_theme_the_app_starts_in_colours_the_first_screen(
    runtime: Runtime, workspace: Path, tmp_path: Path
) -> None:
    # The stylesheet starts with the theme's variables and is not parsed again as the first
    # screen is made: the screen's widgets must still have the theme's colours, not the
    # default's.
    themes_dir = tmp_path / "themes"
    themes_dir.mkdir()
    (themes_dir / "fine.toml").write_text('name = "fine"\nprimary = "#336699"\n')
    app = make_app(runtime, workspace, theme_dirs=(themes_dir,), theme="fine")
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        await wait_until(pilot, lambda: app.focused is screen.composer.input)
        await pilot.press("tab")  # the composer's border is $primary when it has no focus
        await wait_until(pilot, lambda: app.focused is screen.job_tree)
        _, colour = screen.composer.styles.border_top
        assert colour == Color.parse("#336699")
        assert app.theme == "fine"


async def _choose_theme(pilot: Pilot[Any], name: str) -> None:
    """ctrl+p, "theme", Enter, the theme's name, Enter: as a person picks one."""
    await pilot.pause()
    await pilot.press("ctrl+p", *"theme")
    await pilot.pause()
    await pilot.press("enter")
    await pilot.pause()
    await pilot.press(*name)
    await pilot.pause()
    await pilot.press("enter")
    await wait_until(pilot, lambda: pilot.app.theme == name)


async def test_a_theme_chosen_in_the_palette_is_applied_remembered_and_said_where(
    runtime: Runtime, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))
    app = make_app(runtime, workspace, remember_theme=True)
    async with app.run_test(size=SIZE) as pilot:
        await _choose_theme(pilot, "agent-moss")
        said = "Theme: Theme agent-moss saved in ~/.config/agent-tui/config.toml"
        await wait_until(pilot, lambda: said in notifications(app))
        assert [text for text in notifications(app) if "saved in" in text] == [said]
    saved = tmp_path / "home" / ".config" / "agent-tui" / "config.toml"
    assert 'theme = "agent-moss"' in saved.read_text()


async def test_a_theme_chosen_where_the_folder_sets_another_says_which_wins(
    runtime: Runtime, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by a new-user trial: "Theme agent-paper saved in …/config.toml", and the next
    launch was agent-moss again: the folder's agent-tui.toml sets its own theme, and wins."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))
    (workspace / "agent-tui.toml").write_text('[defaults]\ntheme = "agent-dusk"\n')
    app = make_app(runtime, workspace, remember_theme=True)
    async with app.run_test(size=SIZE) as pilot:
        await _choose_theme(pilot, "agent-moss")
        await wait_until(pilot, lambda: any("saved in" in text for text in notifications(app)))
        [said] = [text for text in notifications(app) if "saved in" in text]
        assert "this folder's agent-tui.toml sets theme = 'agent-dusk', which wins" in said


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('name = "x"\nprimary = "#fff"\ncolour = "#000"\n', "colour: not a theme setting"),
        ('name = "Bad Name"\nprimary = "#fff"\n', "name: lower-case letters"),
        ('name = "x"\n', "primary: required"),
        ('name = "x"\nprimary = "#fff"\ndark = "yes"\n', "dark: true or false"),
        ('name = "x"\nprimary = "#fff"\ntext_alpha = 2\n', "text_alpha: a number from 0 to 1"),
        ('name = "x"\nprimary = "#fff"\nvariables = { a = 1 }\n', "variables: a table"),
        ('name = "x"\nprimary = 3\n', "primary: 3 is not a colour"),
    ],
)
def test_each_wrong_theme_setting_is_named(tmp_path: Path, text: str, problem: str) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    with pytest.raises(ValueError, match="bad\\.toml: ") as raised:
        load_theme_file(bad)
    assert problem in str(raised.value)


def test_a_theme_file_s_settings_reach_the_textual_theme(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(
        'name = "mine"\ndark = false\nprimary = "#336699"\naccent = "red"\n'
        'luminosity_spread = 0.3\nvariables = { "footer-key-foreground" = "#ff0000" }\n'
    )
    theme = load_theme_file(path)
    assert (theme.name, theme.dark, theme.primary, theme.accent) == (
        "mine",
        False,
        "#336699",
        "red",
    )
    assert theme.luminosity_spread == 0.3
    assert theme.text_alpha == 0.95
    assert theme.variables == {"footer-key-foreground": "#ff0000"}


async def test_the_palette_s_screenshot_lands_in_the_exports_folder_and_says_where(
    runtime: Runtime, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by a new-user trial: "Screenshot" in the palette said only "Failed to save
    screenshot" where there is no ~/Downloads (Textual's place for it), as on most servers."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no Downloads there
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await pilot.pause()
        await pilot.press("ctrl+p", *"screenshot")
        await pilot.pause()
        await pilot.press("enter")
        await wait_until(pilot, lambda: any(n.title == "Screenshot" for n in app._notifications))
        [said] = [n.message for n in app._notifications if n.title == "Screenshot"]
    exports = workspace / ".agent-tui" / "exports"
    [svg] = exports.glob("*.svg")
    assert str(svg) in said
    assert svg.read_text().lstrip().startswith("<svg")
    assert (exports / ".gitignore").exists()  # kept out of git, as the exports are
    assert not (tmp_path / "home" / "Downloads").exists()


ASK_THEN_SHELL = [
    Turn(
        "One question first.",
        [("ask_user", {"question": "Which folder?", "options": ["src"], "allow_free_text": True})],
    ),
    Turn("Collecting the TODOs.", [("shell", {"command": "grep -rn TODO src"})]),
]


@pytest.mark.parametrize(
    "theme", ["agent-dusk", "agent-moss", "agent-paper", "textual-dark", "textual-light"]
)
async def test_a_person_s_message_and_the_prompts_text_fields_stand_apart_from_their_ground(
    db_path: Path, workspace: Path, theme: str
) -> None:
    """Found by a new-user trial: the person's message in the conversation, an approval's
    command line and reason field, and a question's answer field had no background of their
    own (``$boost``, transparent in every theme but textual-dark). Fields are checked without
    the focus: a focused Input's own tint hid the fault."""
    runtime = await open_scripted(ScriptedProvider(list(ASK_THEN_SHELL)), db_path, workspace)
    app = make_app(runtime, workspace, theme=theme)
    try:
        async with app.run_test(size=SIZE) as pilot:
            screen = main_screen(app)

            def ground(x: int, y: int) -> object:
                return app.screen.get_style_at(x, y).bgcolor

            await pilot.press(*"list the TODOs", "enter")
            await wait_until(pilot, lambda: screen.query(QuestionPrompt))
            question = screen.query_one(QuestionPrompt)
            answer = question.query_one(AnswerInput)
            await pilot.press("tab")
            await wait_until(pilot, lambda: app.focused is not answer)
            await pilot.pause()
            message = screen.conversation.query_one("MessageView.-user", MessageView)
            # Each on its padding column, beside its ground: the column left of it (the
            # conversation's padding, the prompt's).
            row = message.region.y
            assert ground(message.region.x + 1, row) != ground(message.region.x - 1, row)
            assert ground(answer.region.x, answer.region.y) != ground(
                answer.region.x - 1, answer.region.y
            )

            answer.focus()
            await pilot.press("1", "enter")
            await wait_until(pilot, lambda: screen.query(ApprovalPrompt))
            approval = screen.query_one(ApprovalPrompt)
            await wait_until(pilot, lambda: app.focused is approval)
            await pilot.press("r", *"not now", "tab")
            reason = approval.query_one("#reason")
            await wait_until(pilot, lambda: app.focused is not reason)
            await pilot.pause()
            command = approval.query_one(".prompt-command")
            for field in (command, reason):
                x, y = field.region.x, field.region.y
                assert ground(x, y) != ground(approval.region.x + 1, y)
    finally:
        await runtime.close()
