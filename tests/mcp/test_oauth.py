"""OAuth round trip against a local authorization server built from the SDK's auth pieces."""

from __future__ import annotations

import asyncio
import logging
import stat
from pathlib import Path

import httpx2
import pytest

from runtime.config import HttpServerConfig
from runtime.mcp import McpManager
from tests.fakes.oauth_server import serve_oauth_http
from tests.mcp.helpers import Recorder, tool_named

pytestmark = pytest.mark.slow


async def test_an_oauth_server_signs_in_through_the_shown_url_and_keeps_tokens_in_a_private_file(
    workspace: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    shown: list[tuple[str, str]] = []
    browsing: list[asyncio.Task[None]] = []

    async def browser(url: str) -> None:
        # The person's browser: the authorization server approves and redirects back.
        async with httpx2.AsyncClient() as http:
            approved = await http.get(url)
            assert approved.status_code in (302, 303, 307), approved.text
            back = await http.get(approved.headers["location"])
            assert back.status_code == 200

    def on_url(server: str, url: str) -> None:
        shown.append((server, url))
        browsing.append(asyncio.ensure_future(browser(url)))

    tokens = tmp_path / "tokens"
    with caplog.at_level(logging.DEBUG), serve_oauth_http() as auth:
        config = HttpServerConfig(url=auth.url, oauth=True, timeout=20.0)
        async with McpManager(
            {"guarded": config}, workspace=workspace, on_authorize_url=on_url, token_dir=tokens
        ) as manager:
            whoami = await tool_named(manager, "guarded__whoami")
            output = await whoami.run({}, Recorder().context(workspace))
            notices = manager.take_notices()
        await asyncio.gather(*browsing)
        # A second process start: the stored token is used, no sign-in.
        async with McpManager(
            {"guarded": config}, workspace=workspace, on_authorize_url=on_url, token_dir=tokens
        ) as again:
            second = await (await tool_named(again, "guarded__whoami")).run(
                {}, Recorder().context(workspace)
            )
        issued = list(auth.provider.issued)

    assert output.content == "signed in" and second.content == "signed in"
    assert len(shown) == 1 and shown[0][0] == "guarded"
    assert "code_challenge=" in shown[0][1] and "code_challenge_method=S256" in shown[0][1]
    assert any("needs you to sign in: open http://127.0.0.1" in n.text for n in notices)
    path = tokens / "guarded.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(tokens.stat().st_mode) == 0o700
    assert issued and issued[0] in path.read_text()
    assert not any(token in caplog.text for token in issued)


async def test_an_oauth_sign_in_during_a_run_shows_the_url_and_keeps_tokens_out_of_the_database(
    workspace: Path, tmp_path: Path
) -> None:
    from runtime.api import Runtime
    from runtime.config import Config, Permissions
    from runtime.events import Notice
    from runtime.models import RunState, ToolCallState
    from tests.fakes.scripted import ScriptedProvider, Turn

    browsing: list[asyncio.Task[None]] = []

    async def browser(url: str) -> None:
        async with httpx2.AsyncClient() as http:
            approved = await http.get(url)
            await http.get(approved.headers["location"])

    def on_url(server: str, url: str) -> None:
        browsing.append(asyncio.ensure_future(browser(url)))

    db_path = tmp_path / "agent-tui.db"
    provider = ScriptedProvider([Turn("", [("guarded__whoami", {})]), Turn("you are signed in")])
    notices: list[Notice] = []
    with serve_oauth_http() as auth:
        manager = McpManager(
            {"guarded": HttpServerConfig(url=auth.url, oauth=True, timeout=20.0)},
            workspace=workspace,
            on_authorize_url=on_url,
            token_dir=tmp_path / "tokens",
        )
        runtime = await Runtime.open(
            db_path=db_path,
            workspace=workspace,
            config=Config(permissions=Permissions(allow=["guarded__*"])),
            model="scripted:test",
            providers=lambda reference: provider,
            mcp=manager,
        )
        try:

            async def collect() -> None:
                async for event in runtime.observe():
                    if isinstance(event, Notice):
                        notices.append(event)

            watcher = asyncio.create_task(collect())
            await asyncio.sleep(0)  # subscribed before the run starts
            run = await runtime.start("who am I?")
            boundary = await runtime.wait(run.id, timeout=60)
            [call] = await runtime.tool_calls(run.id)
            watcher.cancel()
        finally:
            await runtime.close()
        await asyncio.gather(*browsing)
        issued = list(auth.provider.issued)

    assert boundary.state is RunState.COMPLETED
    assert (call.state, call.result) == (ToolCallState.COMPLETED, "signed in")
    assert any("needs you to sign in: open http://127.0.0.1" in n.text for n in notices)
    stored = b"".join(
        path.read_bytes() for path in tmp_path.iterdir() if path.name.startswith("agent-tui.db")
    )
    assert issued and all(token.encode() not in stored for token in issued)
    assert issued[0] in (tmp_path / "tokens" / "guarded.json").read_text()
