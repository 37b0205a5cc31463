"""The stylesheets parsed at one launch are the next launch's (``tui.stylesheet_cache``): the
same rules, the same screen, nothing parsed again; a changed theme or source, a damaged file or
a write cut short costs a parse, never a wrong style or a failed launch."""

from __future__ import annotations

import os
import pickle
import time
from pathlib import Path

import pytest
from textual.css.stylesheet import Stylesheet

from runtime.api import Runtime
from tests.tui.helpers import SIZE, make_app
from tui.app import AgentTuiApp
from tui.stylesheet_cache import FILE_NAME, STALE_SECONDS, StoredRules


class ParseCount:
    """How many sources Textual's own parser parsed (our stylesheet calls it on a miss)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sources = 0
        original = Stylesheet._parse_rules

        def counting(stylesheet: Stylesheet, *args: object, **kwargs: object) -> object:
            self.sources += 1
            return original(stylesheet, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(Stylesheet, "_parse_rules", counting)


async def _launch(
    runtime: Runtime, workspace: Path, cache: Path | None, *, theme: str = "agent-dusk"
) -> tuple[AgentTuiApp, str]:
    """An app on ``cache`` through its first frame and out: the app and its first screen."""
    app = make_app(runtime, workspace, stylesheet_cache=cache, theme=theme)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        picture = app.export_screenshot()
    return app, picture


def _stored(cache: Path) -> dict[str, object]:
    with cache.open("rb") as file:
        data = pickle.load(file)
    assert isinstance(data, dict)
    return data


async def test_a_second_launch_takes_every_rule_from_the_first_and_draws_the_same_screen(
    runtime: Runtime, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache" / FILE_NAME
    parsed = ParseCount(monkeypatch)
    _, first = await _launch(runtime, workspace, cache)
    assert cache.exists()
    parsed_first = parsed.sources
    assert parsed_first > 10  # the app's sheet and its widgets' default CSS

    parsed.sources = 0
    second_app, second = await _launch(runtime, workspace, cache)
    assert parsed.sources == 0
    assert second == first
    # Every source the second launch styled with came from the file.
    assert len(second_app.stylesheet.rules) > 100


async def test_without_a_cache_folder_every_launch_parses_and_writes_nothing(
    runtime: Runtime, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsed = ParseCount(monkeypatch)
    app, _ = await _launch(runtime, workspace, None)
    assert parsed.sources > 10
    assert type(app.stylesheet) is Stylesheet
    assert not list(tmp_path.rglob(FILE_NAME))


async def test_another_theme_parses_again_and_the_file_then_holds_that_theme(
    runtime: Runtime, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / FILE_NAME
    await _launch(runtime, workspace, cache, theme="agent-dusk")
    dusk = _stored(cache)["variables"]
    parsed = ParseCount(monkeypatch)
    _, paper = await _launch(runtime, workspace, cache, theme="agent-paper")
    assert parsed.sources > 10  # its colours are substituted as the rules are parsed
    assert _stored(cache)["variables"] != dusk
    # And the light theme's screen drawn from the file is the one it parsed.
    parsed.sources = 0
    _, paper_again = await _launch(runtime, workspace, cache, theme="agent-paper")
    assert parsed.sources == 0
    assert paper_again == paper


async def test_a_changed_source_is_parsed_again_and_styles_as_written_now(
    runtime: Runtime, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / FILE_NAME
    _, before = await _launch(runtime, workspace, cache)
    # Every stored source says something else now: the file names the rules by their text,
    # so a launch whose CSS says otherwise (an upgrade, an edit) must not take them.
    data = _stored(cache)
    entries = data["entries"]
    assert isinstance(entries, dict)
    data["entries"] = {
        (css + "\n/* changed */", *rest): rules for (css, *rest), rules in entries.items()
    }
    cache.write_bytes(pickle.dumps(data))
    parsed = ParseCount(monkeypatch)
    _, after = await _launch(runtime, workspace, cache)
    assert parsed.sources > 10
    assert after == before


@pytest.mark.parametrize(
    "content",
    [b"", b"not a pickle at all", pickle.dumps({"stamp": "another textual"}), pickle.dumps([1])],
    ids=["empty", "garbage", "another-textual", "not-a-dict"],
)
async def test_a_damaged_or_foreign_file_is_parsed_past_and_written_again(
    runtime: Runtime,
    workspace: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    content: bytes,
) -> None:
    cache = tmp_path / FILE_NAME
    _, clean = await _launch(runtime, workspace, None)
    cache.write_bytes(content)
    parsed = ParseCount(monkeypatch)
    _, picture = await _launch(runtime, workspace, cache)
    assert parsed.sources > 10
    assert picture == clean
    assert isinstance(_stored(cache)["entries"], dict)  # usable by the next launch


def test_a_write_cut_short_leaves_nothing_behind_for_long(tmp_path: Path) -> None:
    cache = tmp_path / FILE_NAME
    stale = tmp_path / f".{FILE_NAME}.killed"
    stale.write_bytes(b"half a pickle")
    old = time.time() - STALE_SECONDS - 5
    os.utime(stale, (old, old))
    fresh = tmp_path / f".{FILE_NAME}.writing"  # another launch writing right now
    fresh.write_bytes(b"being written")
    stored = StoredRules.load(cache)
    stored.add(("Static { color: red; }", ("", "Static"), True, 0, ""), {"primary": "red"}, [])
    stored.save()
    assert not stale.exists()
    assert fresh.exists()
    assert _stored(cache)["variables"] == {"primary": "red"}
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([FILE_NAME, fresh.name])


def test_a_folder_that_cannot_be_written_costs_only_the_cache(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder would be")
    stored = StoredRules.load(blocker / FILE_NAME)
    stored.add(("Static { color: red; }", ("", "Static"), True, 0, ""), {"primary": "red"}, [])
    stored.save()  # logged, not raised: the app goes on
    assert blocker.read_text() == "a file where the cache folder would be"


@pytest.mark.parametrize("others", ["group-writable file", "group-writable folder", "other owner"])
async def test_a_file_others_could_have_written_is_not_loaded(
    runtime: Runtime,
    workspace: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    others: str,
) -> None:
    """A pickle runs code as it loads: one that another user could have written (a cache
    folder in a shared place, ``sudo`` keeping the user's home) is parsed past, not loaded."""
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    cache = folder / FILE_NAME
    await _launch(runtime, workspace, cache)
    cache.chmod(0o600)
    if others == "group-writable file":
        cache.chmod(0o620)
    elif others == "group-writable folder":
        folder.chmod(0o770)
    else:
        if os.geteuid() != 0:
            pytest.skip("giving a file to another user needs root")
        os.chown(cache, 65534, 65534)
    parsed = ParseCount(monkeypatch)
    await _launch(runtime, workspace, cache)
    assert parsed.sources > 10


async def test_a_file_only_its_user_can_write_is_loaded(
    runtime: Runtime, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o755)  # readable by others is fine: only writing is theirs to not do
    cache = folder / FILE_NAME
    await _launch(runtime, workspace, cache)
    cache.chmod(0o644)
    parsed = ParseCount(monkeypatch)
    await _launch(runtime, workspace, cache)
    assert parsed.sources == 0
