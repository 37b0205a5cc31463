"""The conversation pane shows the job around the selected run: a fork's inherited history
(dimmed, "forked from job …"), earlier root runs under their headers, and a stopped run's
streamed text marked as partial."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Collapsible

from runtime.api import Runtime
from runtime.models import DraftKind
from runtime.store.base import NewRun
from tests.tui.helpers import SIZE, finish_run, make_app, wait_until
from tui.screens.main import MainScreen
from tui.widgets.message_view import MessageView


def _texts(screen: MainScreen) -> list[str]:
    from textual.widgets import Static

    return [
        str(child.render()) if isinstance(child, Static) else f"<{type(child).__name__}>"
        for child in screen.conversation.children
    ]


async def test_a_follow_up_shows_the_earlier_run_under_its_header_before_its_own(
    runtime: Runtime, workspace: Path
) -> None:
    first = await runtime.start("summarise the project")
    await finish_run(runtime, first.id)
    second = await runtime.follow_up(first.job_id, "and now the tests")
    await finish_run(runtime, second.id)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        screen.open_run(second.id)
        await wait_until(
            pilot, lambda: screen.selected_run is not None and screen.selected_run.id == second.id
        )
        await wait_until(pilot, lambda: any("follow-up 2" in t for t in _texts(screen)))
        texts = _texts(screen)
        run1 = next(i for i, t in enumerate(texts) if t.startswith("── run 1"))
        run2 = next(i for i, t in enumerate(texts) if t.startswith("── follow-up 2"))
        assert run1 < run2
        views = list(screen.conversation.query(MessageView))
        prompts = [v.text for v in views if v.role.value == "user"]
        assert prompts[0] == "summarise the project" and "and now the tests" in prompts


async def test_a_fork_shows_its_inherited_history_dimmed_and_labelled(
    runtime: Runtime, workspace: Path
) -> None:
    first = await runtime.start("summarise the project")
    await finish_run(runtime, first.id)
    checkpoint = (await runtime.checkpoints(first.id))[0]
    fork = await runtime.fork(checkpoint.id, "only the README")
    await runtime.wait(fork.id, timeout=20)
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        screen.open_run(fork.id)
        await wait_until(pilot, lambda: any("forked from" in t for t in _texts(screen)))
        texts = _texts(screen)
        origin = next(t for t in texts if "forked from" in t)
        assert "“summarise the project”" in origin and f"at step {checkpoint.step}" in origin
        inherited = list(screen.conversation.query("MessageView.inherited"))
        assert inherited and isinstance(inherited[0], MessageView)
        assert inherited[0].text == "summarise the project"
        own = [v for v in screen.conversation.query(MessageView) if not v.has_class("inherited")]
        assert own[0].text == "only the README"


async def test_a_cancelled_runs_streamed_text_shows_after_relaunch_marked_partial(
    runtime: Runtime, workspace: Path
) -> None:
    store = runtime.store
    run = await store.create_run(
        NewRun(agent="default", model="demo", input="explain", workspace=str(workspace))
    )
    await store.register_owner("other-owner", lease_seconds=30)
    claimed = await store.claim_run(run.id, owner_id="other-owner")
    token = claimed.execution_token or ""
    await store.save_draft(
        run.id, token=token, message_id="m", text="Which notes?", kind=DraftKind.THINKING
    )
    await store.save_draft(run.id, token=token, message_id="m", text="The notes say the")
    await store.cancel_run(run.id, reason="test")
    app = make_app(runtime, workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        screen.open_run(run.id)
        await wait_until(pilot, lambda: any("partial answer" in t for t in _texts(screen)))
        texts = _texts(screen)
        assert any("cancelled before it finished" in t for t in texts)
        views = list(screen.conversation.query(MessageView))
        assert views[-1].text == "The notes say the"
        # What it was thinking is there too, folded as a committed message's thinking is.
        assert views[-1].thinking_text == "Which notes?"
        assert views[-1].query_one(Collapsible).collapsed
