"""Drive the real app with the demo model and write SVG screenshots for the README.

Run with `make screenshots`. Every scene opens a fresh database in a small sample workspace and
uses the same factory as the program (``tui.app.create_app``)."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from runtime.api import Runtime  # noqa: E402
from runtime.config import AgentConfig, Config, Defaults  # noqa: E402
from runtime.permissions import _forget_cache  # noqa: E402
from tui.app import Settings, create_app  # noqa: E402
from tui.screens.inbox import InboxScreen  # noqa: E402
from tui.screens.main import MainScreen  # noqa: E402
from tui.widgets.approval_prompt import ApprovalPrompt  # noqa: E402
from tui.widgets.message_view import MessageView  # noqa: E402
from tui.widgets.question_prompt import QuestionPrompt  # noqa: E402
from tui.widgets.tool_call_view import ToolCallView  # noqa: E402

OUT = ROOT / "screenshots"
SIZE = (130, 38)

Scene = Callable[[Any, Runtime], Awaitable[None]]


def _sample_workspace(base: Path) -> Path:
    workspace = base / "my-project"
    (workspace / "src").mkdir(parents=True)
    (workspace / "README.md").write_text(
        "# my-project\n\nA small command line tool that greets people.\n\nTODO: add tests\n"
    )
    (workspace / "src" / "greet.py").write_text(
        'def greet(name: str) -> str:\n    return f"Hello, {name}!"  # TODO: i18n\n'
    )
    (workspace / "pyproject.toml").write_text('[project]\nname = "my-project"\n')
    return workspace


async def _until(pilot: Any, condition: Callable[[], object], timeout: float = 30.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await pilot.pause(0.02)


def _main(pilot: Any) -> MainScreen:
    screen = pilot.app.screen
    assert isinstance(screen, MainScreen)
    return screen


async def _finish(runtime: Runtime, run_id: str) -> None:
    while True:
        boundary = await runtime.wait(run_id, timeout=30)
        request = boundary.request
        if request is None:
            return
        value: Any = (
            request.options[0]
            if request.kind.value == "question"
            else {"decision": "allow_once", "reason": None}
        )
        await runtime.respond(boundary.run.id, request.id, value)


async def _to_browser(pilot: Any) -> None:
    """Tab from the composer (where the app starts) to the browser, as a person does."""
    screen = _main(pilot)
    await pilot.press("tab")
    await _until(pilot, lambda: screen.job_tree.has_focus)


async def scene_main(pilot: Any, runtime: Runtime) -> None:
    for task in ("summarise this project", "list the TODOs"):
        run = await runtime.start(task)
        await _finish(runtime, run.id)
    screen = _main(pilot)
    screen.load_jobs(None, first=True)
    await _until(pilot, lambda: len(screen.job_tree.job_ids) == 2 and screen.job_tree.cursor_node)
    await _to_browser(pilot)
    await pilot.press("enter")
    await _until(pilot, lambda: screen.selected_run is not None)
    await pilot.pause(0.3)


async def scene_streaming(pilot: Any, runtime: Runtime) -> None:
    await pilot.press(*"summarise this project", "enter")
    screen = _main(pilot)
    await _until(pilot, lambda: any(len(v.text) > 300 for v in screen.query(MessageView)))


async def scene_question(pilot: Any, runtime: Runtime) -> None:
    await pilot.press(*"summarise this project", "enter")
    await _until(pilot, lambda: _main(pilot).query(QuestionPrompt))
    await pilot.pause(0.3)


async def scene_approval(pilot: Any, runtime: Runtime) -> None:
    await scene_question(pilot, runtime)
    await pilot.press("1", "enter")
    await _until(pilot, lambda: _main(pilot).query(ApprovalPrompt))
    await pilot.pause(0.3)


async def scene_inbox(pilot: Any, runtime: Runtime) -> None:
    for task in ("summarise this project", "review src/greet.py", "plan the tests"):
        run = await runtime.start(task)
        await runtime.wait(run.id, timeout=30)
    screen = _main(pilot)
    screen.load_jobs(None, first=True)
    await _until(pilot, lambda: len(screen.job_tree.job_ids) == 3 and screen.job_tree.cursor_node)
    await _to_browser(pilot)
    await pilot.press("i")
    await _until(pilot, lambda: isinstance(pilot.app.screen, InboxScreen))
    await _until(pilot, lambda: len(pilot.app.screen.requests) == 3)
    await pilot.pause(0.3)


async def scene_search(pilot: Any, runtime: Runtime) -> None:
    for task in ("summarise this project", "find the TODO markers"):
        run = await runtime.start(task)
        await _finish(runtime, run.id)
    screen = _main(pilot)
    screen.load_jobs(None, first=True)
    await _until(pilot, lambda: len(screen.job_tree.job_ids) == 2 and screen.job_tree.cursor_node)
    await _to_browser(pilot)
    await pilot.press("slash", *"TODO", "enter")
    results = screen.query_one("#search-results")
    await _until(pilot, lambda: results.display)
    await pilot.press("enter")
    await _until(pilot, lambda: screen.selected_run is not None)
    await pilot.pause(0.3)


async def scene_delegation(pilot: Any, runtime: Runtime) -> None:
    await pilot.press(*"summarise this project", "enter")
    screen = _main(pilot)
    await _until(pilot, lambda: screen.query(QuestionPrompt))
    run = screen.selected_run
    assert run is not None
    children = [r for r in await runtime.job_runs(run.job_id) if r.parent_run_id]
    await _until(pilot, lambda: all(screen.job_tree.run_node(c.id) for c in children))
    await pilot.pause(0.3)


async def scene_subrun(pilot: Any, runtime: Runtime) -> None:
    """A finished delegation with its first sub-run unfolded under the block (Enter)."""
    run = await runtime.start("summarise this project")
    await _finish(runtime, run.id)
    for child in [r for r in await runtime.job_runs(run.job_id) if r.parent_run_id]:
        await _finish(runtime, child.id)
    await _finish(runtime, run.id)
    screen = _main(pilot)
    screen.load_jobs(None, first=True)
    await _until(pilot, lambda: screen.job_tree.job_ids)
    screen.open_run(run.id)
    await _until(
        pilot, lambda: any(v.child_run_id for v in screen.conversation.query(ToolCallView))
    )
    block = next(v for v in screen.conversation.query(ToolCallView) if v.child_run_id)
    block.focus()
    await pilot.press("enter")
    await _until(pilot, lambda: bool(block.query(MessageView)))
    pilot.app.clear_notifications()
    await pilot.pause(0.3)
    block.scroll_visible(animate=False, top=True)
    await pilot.pause(0.2)


async def scene_fork(pilot: Any, runtime: Runtime) -> None:
    first = await runtime.start("summarise this project")
    await _finish(runtime, first.id)
    second = await runtime.follow_up(first.job_id, "and list the TODOs")
    await _finish(runtime, second.id)
    checkpoint = (await runtime.checkpoints(first.id))[0]
    fork = await runtime.fork(checkpoint.id, "only the README, please")
    await runtime.wait(fork.id, timeout=30)
    screen = _main(pilot)
    screen.load_jobs(None, first=True)
    await _until(pilot, lambda: len(screen.job_tree.job_ids) == 2)
    screen.open_run(fork.id)
    await _until(pilot, lambda: screen.query(".fork-origin"))
    pilot.app.clear_notifications()
    await pilot.pause(0.3)
    screen.conversation.scroll_home(animate=False, immediate=True)
    await pilot.pause(0.2)


async def scene_permissions(pilot: Any, runtime: Runtime) -> None:
    workspace = pilot.app.settings.workspace
    (workspace / "agent-tui.toml").write_text(
        '[permissions]\nallow = ["write_file", "github__list_*"]\nask = ["shell"]\n'
        'deny = ["github__delete_*"]\n'
    )
    pilot.app.action_permissions()
    await _until(pilot, lambda: getattr(pilot.app.screen, "rules", None))


async def scene_composer(pilot: Any, runtime: Runtime) -> None:
    run = await runtime.start("summarise this project")
    await _finish(runtime, run.id)
    screen = _main(pilot)
    screen.load_jobs(None, first=True)
    await _until(pilot, lambda: screen.job_tree.job_ids and screen.job_tree.cursor_node)
    await _to_browser(pilot)
    await pilot.press("enter")
    await _until(pilot, lambda: screen.selected_run is not None)
    await pilot.press("ctrl+t", *"Now add tests for greet():", "shift+enter")
    await pilot.press(*"- an empty name", "shift+enter", *"- a name with accents")
    await pilot.press("shift+enter", *"Keep them in tests/test_greet.py")
    await pilot.pause(0.3)


async def scene_queue(pilot: Any, runtime: Runtime) -> None:
    await pilot.press(*"//stream 64", "enter")
    screen = _main(pilot)
    await _until(pilot, lambda: any(len(v.text) > 600 for v in screen.query(MessageView)))
    await pilot.press(*"then summarise it in three lines", "enter")
    await _until(pilot, lambda: screen.composer.queued(screen.composer.follow_up_job_id))
    await pilot.press(*"and list the open TODOs")
    await pilot.pause(0.3)


async def scene_slash(pilot: Any, runtime: Runtime) -> None:
    await pilot.press("slash")
    await _until(pilot, lambda: _main(pilot).composer.completing == "slash")
    await pilot.pause(0.3)


async def scene_mention(pilot: Any, runtime: Runtime) -> None:
    await pilot.press(*"review @")
    screen = _main(pilot)
    await _until(pilot, lambda: screen._files is not None)
    await pilot.press(*"gr")
    menu = screen.composer.query_one("#completions")
    await _until(pilot, lambda: menu.option_count and menu.get_option_at_index(0).id)
    await pilot.pause(0.3)


def _delegating() -> Config:
    return Config(
        defaults=Defaults(agent="coordinator"),
        agents={
            "coordinator": AgentConfig(delegates=["researcher", "reviewer"]),
            "researcher": AgentConfig(description="reads the workspace"),
            "reviewer": AgentConfig(description="reviews the findings"),
        },
    )


SCENES: list[tuple[str, str, Scene]] = [
    ("main", "demo:instant", scene_main),
    ("streaming", "demo", scene_streaming),
    ("question", "demo:instant", scene_question),
    ("approval", "demo:instant", scene_approval),
    ("inbox", "demo:instant", scene_inbox),
    ("search", "demo:instant", scene_search),
    ("delegation", "demo:instant", scene_delegation),
    ("subrun", "demo:instant", scene_subrun),
    ("fork", "demo:instant", scene_fork),
    ("permissions", "demo:instant", scene_permissions),
    ("main-80x24", "demo:instant", scene_main),
    ("approval-80x24", "demo:instant", scene_approval),
    ("fork-80x24", "demo:instant", scene_fork),
    ("composer", "demo:instant", scene_composer),
    ("queue", "demo", scene_queue),
    ("slash", "demo:instant", scene_slash),
    ("mention", "demo:instant", scene_mention),
]
SIZES = {"main-80x24": (80, 24), "approval-80x24": (80, 24), "fork-80x24": (80, 24)}

CONFIGS = {"delegation": _delegating, "subrun": _delegating}


async def shoot(name: str, model: str, scene: Scene) -> Path:
    base = Path(tempfile.mkdtemp(prefix="agent-tui-shots-"))
    # A home of its own: no user config of the machine's owner shows (or acts) in a picture,
    # and paths read as a person's (~/my-project/…), not as a temporary folder.
    saved = {key: os.environ.get(key) for key in ("HOME", "XDG_CONFIG_HOME")}
    os.environ["HOME"] = str(base)
    os.environ["XDG_CONFIG_HOME"] = str(base / ".config")
    _forget_cache()
    try:
        workspace = _sample_workspace(base)
        runtime = await Runtime.open(
            db_path=base / "agent-tui.db",
            workspace=workspace,
            config=CONFIGS.get(name, Config)(),
            model=model,
        )
        try:
            settings = Settings(workspace=workspace, theme="agent-dusk", remember_theme=False)
            app = create_app(runtime, settings)
            async with app.run_test(size=SIZES.get(name, SIZE)) as pilot:
                await pilot.pause()
                await scene(pilot, runtime)
                path = OUT / f"{name}.svg"
                path.write_text(app.export_screenshot(title=f"agent-tui — {name}"))
        finally:
            await runtime.close()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        _forget_cache()
        shutil.rmtree(base, ignore_errors=True)
    return path


async def main() -> int:
    OUT.mkdir(exist_ok=True)
    wanted = set(sys.argv[1:])  # scene names; none: all of them
    for name, model, scene in SCENES:
        if wanted and name not in wanted:
            continue
        path = await shoot(name, model, scene)
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
