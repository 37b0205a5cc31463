"""Streams from the fake Anthropic API become the right ModelEvents through the real SDK."""

from __future__ import annotations

import json

import pytest

from runtime.models import Usage
from runtime.providers.anthropic import AnthropicProvider
from runtime.providers.base import (
    RedactedThinking,
    StopReason,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageReport,
)
from tests.fakes.anthropic_server import (
    FakeAnthropicServer,
    block_delta,
    block_start,
    block_stop,
    event,
    message_delta,
    message_start,
    message_stop,
    ping,
    redacted_thinking_block,
    stream,
    text_block,
    text_response,
    thinking_block,
    tool_use_block,
)
from tests.providers.helpers import collect, collect_until_error, request


async def test_streamed_text_arrives_piece_by_piece_even_when_frames_split_across_chunks(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider
) -> None:
    anthropic_server.add(text_response(["Hel", "lo, ", "wörld ✓"], chunk_size=5))

    events = await collect(anthropic_provider, request())

    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hel", "lo, ", "wörld ✓"]
    assert events[-1] == StopReason(reason="end_turn")
    assert [e.usage for e in events if isinstance(e, UsageReport)][-1] == Usage(
        input_tokens=12, output_tokens=20
    )


async def test_thinking_streams_its_text_then_its_signature(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider
) -> None:
    anthropic_server.add(
        stream(
            [
                message_start(),
                *thinking_block(0, ["Let me ", "think."], signature="EqQBCkYIARgCsig=="),
                *text_block(1, ["Done."]),
                message_delta("end_turn"),
                message_stop(),
            ]
        )
    )

    events = await collect(anthropic_provider, request(thinking_budget=2048))

    thinking = [e for e in events if isinstance(e, ThinkingDelta)]
    assert [t.text for t in thinking] == ["Let me ", "think.", ""]
    assert thinking[-1].signature == "EqQBCkYIARgCsig=="
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Done."]
    # Thinking comes before the text it led to.
    assert events.index(thinking[-1]) < events.index(TextDelta(text="Done."))


async def test_redacted_thinking_is_passed_on_as_opaque_data(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider
) -> None:
    anthropic_server.add(
        stream(
            [
                message_start(),
                *redacted_thinking_block(0, "ENCRYPTED-BLOB"),
                *text_block(1, ["ok"]),
                message_delta("end_turn"),
                message_stop(),
            ]
        )
    )

    events = await collect(anthropic_provider, request())

    assert RedactedThinking(data="ENCRYPTED-BLOB") in events


async def test_tool_input_split_mid_string_and_mid_escape_reassembles_exactly(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider
) -> None:
    arguments = {"path": 'dir/"quoted"\\file.txt', "text": "line 1\nline 2 — é"}
    encoded = json.dumps(arguments)
    escape = encoded.index("\\")
    pieces = [
        encoded[:5],
        encoded[5 : escape + 1],
        encoded[escape + 1 : escape + 4],
        encoded[escape + 4 :],
    ]
    assert pieces[1].endswith("\\")  # the split lands inside an escape sequence
    anthropic_server.add(
        stream(
            [
                message_start(),
                *tool_use_block(0, "toolu_01A", "write_file", pieces),
                message_delta("tool_use"),
                message_stop(),
            ],
            chunk_size=9,
        )
    )

    events = await collect(anthropic_provider, request())

    assert events[1] == ToolCallStart(index=0, id="toolu_01A", name="write_file")
    fragments = [e.json_fragment for e in events if isinstance(e, ToolCallDelta)]
    assert json.loads("".join(fragments)) == arguments
    assert ToolCallEnd(index=0) in events
    assert events[-1] == StopReason(reason="tool_use")


async def test_several_tool_calls_in_one_message_are_numbered_in_order_after_text(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider
) -> None:
    anthropic_server.add(
        stream(
            [
                message_start(),
                *text_block(0, ["Reading both."]),
                *tool_use_block(1, "toolu_A", "read_file", ['{"path": ', '"a.txt"}']),
                *tool_use_block(2, "toolu_B", "read_file", ['{"path": "b', '.txt"}']),
                *tool_use_block(3, "toolu_C", "list_dir", ["{}"]),
                message_delta("tool_use"),
                message_stop(),
            ]
        )
    )

    events = await collect(anthropic_provider, request())

    starts = [e for e in events if isinstance(e, ToolCallStart)]
    assert [(s.index, s.id, s.name) for s in starts] == [
        (0, "toolu_A", "read_file"),
        (1, "toolu_B", "read_file"),
        (2, "toolu_C", "list_dir"),
    ]
    for index, expected in enumerate([{"path": "a.txt"}, {"path": "b.txt"}, {}]):
        fragments = [
            e.json_fragment for e in events if isinstance(e, ToolCallDelta) and e.index == index
        ]
        assert json.loads("".join(fragments)) == expected
    ends = [e.index for e in events if isinstance(e, ToolCallEnd)]
    assert ends == [0, 1, 2]


async def test_pings_and_unknown_events_and_blocks_are_ignored(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider
) -> None:
    anthropic_server.add(
        stream(
            [
                ping(),
                message_start(),
                ping(),
                event("brand_new_event", {"type": "brand_new_event", "whatever": [1, 2]}),
                block_start(0, {"type": "server_gadget", "id": "x"}),
                block_delta(0, {"type": "gadget_delta", "stuff": "?"}),
                block_stop(0),
                *text_block(1, ["still fine"]),
                ping(),
                message_delta("end_turn"),
                message_stop(),
            ]
        )
    )

    events = await collect(anthropic_provider, request())

    assert [e.text for e in events if isinstance(e, TextDelta)] == ["still fine"]
    assert not any(isinstance(e, ToolCallStart | ToolCallEnd) for e in events)
    assert events[-1] == StopReason(reason="end_turn")


async def test_usage_reports_cache_reads_and_writes_and_final_output_tokens(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider
) -> None:
    anthropic_server.add(
        stream(
            [
                message_start(input_tokens=40, cache_read=1500, cache_write=300, output_tokens=1),
                *text_block(0, ["cached"]),
                message_delta("end_turn", output_tokens=57),
                message_stop(),
            ]
        )
    )

    events = await collect(anthropic_provider, request())

    reports = [e.usage for e in events if isinstance(e, UsageReport)]
    assert reports[0] == Usage(
        input_tokens=40, output_tokens=1, cache_read_tokens=1500, cache_write_tokens=300
    )
    assert reports[-1] == Usage(
        input_tokens=40, output_tokens=57, cache_read_tokens=1500, cache_write_tokens=300
    )
    assert anthropic_provider.cost_usd(reports[-1]) == 0.0  # "claude-test" has no price


@pytest.mark.parametrize(
    ("wire_reason", "expected"),
    [
        ("end_turn", "end_turn"),
        ("tool_use", "tool_use"),
        ("max_tokens", "max_tokens"),
        ("refusal", "refusal"),
        ("pause_turn", "pause_turn"),
        ("stop_sequence", "stop_sequence"),
        ("model_context_window_exceeded", "max_tokens"),
        ("a_reason_from_the_future", "end_turn"),
    ],
)
async def test_every_stop_reason_is_passed_through_to_the_engine(
    anthropic_server: FakeAnthropicServer,
    anthropic_provider: AnthropicProvider,
    wire_reason: str,
    expected: str,
) -> None:
    anthropic_server.add(text_response("partial", stop_reason=wire_reason))

    events = await collect(anthropic_provider, request())

    assert events[-1] == StopReason(reason=expected)


async def test_a_stream_that_ends_without_message_stop_is_an_interrupted_stream(
    anthropic_server: FakeAnthropicServer, anthropic_provider: AnthropicProvider
) -> None:
    anthropic_server.add(stream([message_start(), *text_block(0, ["half an ans"])]))

    events, error = await collect_until_error(anthropic_provider.stream(request()))

    assert TextDelta(text="half an ans") in events
    assert error is not None
    assert getattr(error, "code", None) == "stream_interrupted"
    assert getattr(error, "retryable", None) is True
