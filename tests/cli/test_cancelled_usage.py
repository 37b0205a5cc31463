"""`agent-tui cancel` of a run that streams Claude's answer in another process (a real
`agent-tui run`: the real SDK against the fake server on loopback): `show` and `runs` then give
the tokens the cut-short message used and what they cost, and its job counts them. Claude
reports the output at a message's end, which a cancelled one never reaches: they used to say 0
tokens and $0.00."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runtime.models import Usage
from runtime.providers import pricing
from runtime.results import CHARS_PER_TOKEN
from tests.cli.harness import Cli, LineStream, finish, json_lines, kill_hard
from tests.fakes.anthropic_server import (
    gate,
    message_start,
    spawn_fake_server,
    stream,
    text_block,
)

pytestmark = pytest.mark.slow

MODEL = "anthropic:claude-sonnet-5"
TEXT = "The answer has three parts, each with its reasons. " * 6


def test_a_run_cancelled_mid_stream_from_another_process_shows_its_tokens_and_cost(
    cli: Cli, tmp_path: Path
) -> None:
    script = [
        stream(
            [message_start(input_tokens=1200, cache_read=300), *text_block(0, [TEXT]), gate("x")]
        )
    ]
    with spawn_fake_server(script, directory=tmp_path) as server:
        cli.env.update(ANTHROPIC_API_KEY="sk-ant-test-usage", ANTHROPIC_BASE_URL=server.base_url)
        proc = cli.spawn("run", "why?", "--json", "--model", MODEL)
        try:
            shown: list[str] = []

            def all_shown(item: dict[str, Any], seen: list[dict[str, Any]]) -> bool:
                if item.get("kind") == "message_delta":
                    shown.append(item["text"])
                return "".join(shown) == TEXT

            run_id = LineStream(proc).json_until(all_shown)[0]["run_id"]
            cancelled = cli.run("cancel", run_id)
            assert cancelled.returncode == 0, cancelled.stderr
            finish(proc)
        finally:
            if proc.poll() is None:
                kill_hard(proc)

    expected = Usage(
        input_tokens=1200, output_tokens=-(-len(TEXT) // CHARS_PER_TOKEN), cache_read_tokens=300
    )
    cost = pricing.cost_usd("claude-sonnet-5", expected)
    assert cost > 0
    data = json.loads(cli.run("show", run_id, "--json").stdout)
    assert data["run"]["state"] == "cancelled"
    assert Usage.model_validate(data["run"]["usage"]) == expected
    assert data["run"]["cost_usd"] == pytest.approx(cost)
    assert Usage.model_validate(data["job"]["usage"]) == expected
    assert data["job"]["cost_usd"] == pytest.approx(cost)

    text = cli.run("show", run_id).stdout
    assert f"tokens:  1200 in, {expected.output_tokens} out, 300 cache read" in text
    assert "cost:    $0.00\n" not in text
    [row] = json_lines(cli.run("runs", "--json").stdout)
    assert row["id"] == run_id and row["cost_usd"] == pytest.approx(cost)
