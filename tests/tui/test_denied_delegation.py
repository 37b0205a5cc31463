"""A delegation refused before it ran (a ``before_tool`` hook, the rules, the person) started
no sub-run: its block says who refused it and offers no sub-run to unfold or open (found by a
new-user trial: the block read "↳ reviewer sub-run · Enter unfolds it · o opens it", and
Enter showed "This delegation has not started its sub-run yet." — it never would)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.api import Runtime
from runtime.config import AgentConfig, Config, Defaults
from runtime.hooks import HookEntry, HooksConfig
from runtime.models import RunState, ToolCallState
from tests.fakes.scripted import ScriptedProvider, Turn
from tests.tui.helpers import SIZE, main_screen, make_app, screen_text, wait_until
from tui.widgets.tool_call_view import ToolCallView

WAIT = 30


@pytest.fixture(autouse=True)
def user_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No hooks or rules of the machine's own user config."""
    home = tmp_path / "home"
    (home / ".config").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))


async def _open(db_path: Path, workspace: Path) -> Runtime:
    """A coordinator whose model delegates to both its delegates at once; a hook refuses the
    reviewer's delegation."""
    config = Config(
        defaults=Defaults(agent="coordinator"),
        agents={
            "coordinator": AgentConfig(delegates=["researcher", "reviewer"]),
            "researcher": AgentConfig(description="reads the workspace"),
            "reviewer": AgentConfig(description="reviews the findings"),
        },
        hooks=HooksConfig(
            before_tool=[
                HookEntry(
                    matcher="delegate_to_reviewer",
                    command="echo 'no reviews today' >&2; exit 2",
                )
            ]
        ),
    )
    provider = ScriptedProvider(
        [
            Turn(
                tool_calls=[
                    ("delegate_to_researcher", {"task": "read it"}),
                    ("delegate_to_reviewer", {"task": "review it"}),
                ]
            ),
            Turn("the researcher's report"),
            Turn("all done"),
        ]
    )
    return await Runtime.open(
        db_path=db_path,
        workspace=workspace,
        config=config,
        model="scripted:test",
        providers=lambda reference: provider,
    )


def _blocks(app: object) -> dict[str, ToolCallView]:
    screen = main_screen(app)  # type: ignore[arg-type]
    return {view.tool_name: view for view in screen.conversation.query(ToolCallView)}


async def test_a_delegation_a_hook_refused_offers_no_sub_run_when_the_job_is_opened(
    db_path: Path, workspace: Path
) -> None:
    runtime = await _open(db_path, workspace)
    try:
        run = await runtime.start("survey the project", agent="coordinator")
        assert (await runtime.wait(run.id, timeout=WAIT)).state is RunState.COMPLETED
        calls = {c.name: c for c in await runtime.tool_calls(run.id)}
        assert calls["delegate_to_reviewer"].state is ToolCallState.FAILED
        assert calls["delegate_to_reviewer"].child_run_id is None

        app = make_app(runtime, workspace, open_job=run.job_id)
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: len(_blocks(app)) == 2, timeout=WAIT)
            await pilot.pause()
            refused, ran = (
                _blocks(app)["delegate_to_reviewer"],
                _blocks(app)["delegate_to_researcher"],
            )
            assert "denied by hook" in screen_text(app)
            assert not refused.query_one(".tool-child").display
            assert not refused.query_one("#sub-run").display
            assert refused.check_action("toggle_sub_run", ()) is False
            assert refused.check_action("open_child", ()) is False
            # The delegation that ran still folds its sub-run.
            assert ran.query_one(".tool-child").display and ran.query_one("#sub-run").display

            refused.focus()
            await pilot.press("enter")
            await pilot.pause()
            assert "has not started its sub-run" not in screen_text(app)
            assert refused.result_expanded  # Enter shows its result instead
    finally:
        await runtime.close()


async def test_a_delegation_refused_while_the_run_is_watched_drops_its_sub_run_hint(
    db_path: Path, workspace: Path
) -> None:
    runtime = await _open(db_path, workspace)
    try:
        app = make_app(runtime, workspace)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press(*"survey the project", "enter")
            await wait_until(
                pilot,
                lambda: (
                    "delegate_to_reviewer" in _blocks(app)
                    and _blocks(app)["delegate_to_reviewer"].state is ToolCallState.FAILED
                ),
                timeout=WAIT,
            )
            await pilot.pause()
            refused = _blocks(app)["delegate_to_reviewer"]
            assert refused.has_class("-denied")
            assert not refused.query_one(".tool-child").display
            assert not refused.query_one("#sub-run").display
    finally:
        await runtime.close()
