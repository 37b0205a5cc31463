"""Compaction planning: when, where to cut (never between a tool_use and its result), and the
history that replaces the older part."""

from __future__ import annotations

import pytest

from runtime.compaction import (
    SUMMARY_HEADER,
    SUMMARY_MAX_TOKENS,
    CompactionPlan,
    HistoryTally,
    compacted_history,
    compaction_can_help,
    compaction_room,
    estimate_tokens,
    kept_share,
    needs_compaction,
    plan_compaction,
    summary_allowance,
    summary_request_text,
    tool_specs_tokens,
)
from runtime.engine.extensions import AppliedCompaction, compacted_messages
from runtime.history import repair
from runtime.models import Message, Role, TextBlock, ToolResultBlock, ToolUseBlock
from runtime.providers.base import ToolSpec


def _conversation(turns: int, *, size: int = 400) -> list[Message]:
    messages: list[Message] = []

    def add(role: Role, content: list) -> None:  # type: ignore[type-arg]
        position = len(messages)
        messages.append(
            Message(
                id=f"m{position}",
                run_id="r",
                job_id="j",
                position=position,
                role=role,
                content=content,
                created_at=float(position),
            )
        )

    add(Role.USER, [TextBlock(text="GOAL: tidy the repo")])
    for turn in range(turns):
        add(
            Role.ASSISTANT,
            [
                TextBlock(text=f"step {turn}"),
                ToolUseBlock(id=f"u{turn}", tool_call_id=f"c{turn}", name="read_file", input={}),
            ],
        )
        add(
            Role.TOOL,
            [ToolResultBlock(tool_use_id=f"u{turn}", tool_call_id=f"c{turn}", content="x" * size)],
        )
    add(Role.ASSISTANT, [TextBlock(text="done")])
    return messages


def test_compaction_is_needed_past_the_share_of_the_window() -> None:
    messages = _conversation(20)
    tokens = estimate_tokens(messages)
    assert needs_compaction(messages, context_window=int(tokens / 0.81))
    assert not needs_compaction(messages, context_window=int(tokens / 0.5))


def _specs(count: int, *, description: str = "d" * 400) -> list[ToolSpec]:
    return [
        ToolSpec(name=f"tool_{n}", description=description, input_schema={"type": "object"})
        for n in range(count)
    ]


def test_tool_definitions_count_in_the_estimate_and_can_take_a_request_past_the_share() -> None:
    messages = _conversation(4)
    specs = _specs(10)
    alone = estimate_tokens(messages, system="sys")
    assert estimate_tokens(messages, system="sys", tools=specs) == alone + tool_specs_tokens(specs)
    window = int(alone / 0.8) + 10  # the messages alone fit under 80% of it
    assert not needs_compaction(messages, context_window=window, system="sys")
    assert needs_compaction(messages, context_window=window, system="sys", tools=specs)


def test_compaction_cannot_help_when_the_definitions_and_a_summary_leave_no_room() -> None:
    # 10,000-token window, threshold 8,000: a first summary is expected to take 500 tokens,
    # and a compaction must leave the recent history at least 200.
    assert summary_allowance(context_window=10_000) == 500
    room = compaction_room(7_000, context_window=10_000, share=0.8, summary_tokens=500)
    assert room == 500 and compaction_can_help(room, context_window=10_000)
    # The definitions at 97% of the threshold: under it, yet no summary fits beside them.
    room = compaction_room(7_791, context_window=10_000, share=0.8, summary_tokens=500)
    assert room < 0 and not compaction_can_help(room, context_window=10_000)
    room = compaction_room(7_350, context_window=10_000, share=0.8, summary_tokens=500)
    assert not compaction_can_help(room, context_window=10_000)  # 150 tokens: too little
    assert compaction_can_help(200, context_window=10_000)


def test_the_summary_allowance_is_the_previous_summary_and_at_most_the_cap_for_a_first() -> None:
    assert summary_allowance(context_window=1_000_000) == SUMMARY_MAX_TOKENS
    assert summary_allowance(context_window=10_000, previous_summary="short") == 500
    previous = "x" * 8_000  # ~2,000 tokens: the next summary folds it in
    assert summary_allowance(context_window=10_000, previous_summary=previous) > 2_000
    room = compaction_room(
        6_000,
        context_window=10_000,
        share=0.8,
        summary_tokens=summary_allowance(context_window=10_000, previous_summary=previous),
    )
    assert not compaction_can_help(room, context_window=10_000)


def test_a_compaction_keeps_less_recent_history_when_the_definitions_leave_less_room() -> None:
    assert kept_share(7_500, context_window=10_000) == 0.25
    # 1,000 tokens of room below the threshold, beside the summary: half of it is kept.
    assert kept_share(1_000, context_window=10_000) == pytest.approx(0.05)
    assert kept_share(-500, context_window=10_000) == 0.0
    messages = _conversation(30)
    plan = plan_compaction(
        messages,
        context_window=10_000,
        keep_share=kept_share(1_000, context_window=10_000),
    )
    assert plan is not None and estimate_tokens(plan.kept) <= 500


def test_the_kept_part_never_starts_with_a_tool_result_and_fits_the_budget() -> None:
    messages = _conversation(30)
    for window in (400, 800, 1500, 3000):
        plan = plan_compaction(messages, context_window=window)
        assert plan is not None
        assert plan.kept[0].role is not Role.TOOL
        assert plan.summarised + plan.kept == messages
        assert estimate_tokens(plan.kept) <= window * 0.25 or len(plan.kept) <= 2
        history = compacted_history("the summary", plan)
        repaired, repairs = repair(history)
        assert repairs == []
        assert repaired == history


def test_the_summary_request_holds_the_older_turns_and_the_history_carries_the_summary() -> None:
    messages = _conversation(10)
    plan = plan_compaction(messages, context_window=600)
    assert plan is not None
    request = summary_request_text(plan)
    assert "GOAL: tidy the repo" in request
    assert "[called read_file {}]" in request
    history = compacted_history("GOAL was to tidy", plan)
    assert history[0].role is Role.USER
    assert history[0].text.startswith(SUMMARY_HEADER)
    assert "GOAL was to tidy" in history[0].text
    assert history[1:] == plan.kept
    assert plan.through_message_id == plan.summarised[-1].id


def test_nothing_to_summarise_gives_no_plan() -> None:
    assert plan_compaction(_conversation(0), context_window=100_000) is None


def test_the_running_tally_gives_the_estimate_of_each_request_as_the_history_grows() -> None:
    whole = _conversation(12)
    history = whole[:3]
    tally = HistoryTally()
    for message in whole[3:]:
        history.append(message)
        assert tally.estimate(history, history, system="sys") == estimate_tokens(
            history, system="sys"
        )
    # A compacted request: a summary message, then the kept tail of the same history.
    plan = plan_compaction(history, context_window=estimate_tokens(history))
    assert plan is not None
    request = compacted_history("the summary", plan)
    assert tally.estimate(request, history) == estimate_tokens(request)


def test_the_running_tally_counts_the_tool_definitions_as_the_estimate_does() -> None:
    history = _conversation(5)
    tally = HistoryTally()
    specs = _specs(3)
    assert tally.estimate(history, history, system="s", tools=specs) == estimate_tokens(
        history, system="s", tools=specs
    )
    assert tally.overhead(system="s", tools=specs) == estimate_tokens([], system="s", tools=specs)
    other = _specs(8, description="another")  # another phase's tools: counted again
    assert tally.estimate(history, history, tools=other) == estimate_tokens(history, tools=other)


def test_the_running_tally_counts_again_for_another_history() -> None:
    tally = HistoryTally()
    long = _conversation(10, size=4000)
    assert tally.estimate(long, long) == estimate_tokens(long)
    reloaded = _conversation(2, size=10)  # another list, fewer and smaller messages
    assert tally.estimate(reloaded, reloaded) == estimate_tokens(reloaded)
    same_length = _conversation(10, size=7)
    assert tally.estimate(same_length, same_length) == estimate_tokens(same_length)


@pytest.mark.parametrize("kept_from", ["assistant", "user"])
def test_a_compacted_request_is_the_summary_then_the_kept_tail_at_every_step(
    kept_from: str,
) -> None:
    """``compacted_messages`` as the history grows after a compaction, when the history is
    read again, and after another compaction: always the summary and the tail from the cut,
    as ``compacted_history`` makes them."""
    whole = _conversation(12)
    if kept_from == "user":  # the first kept message a user turn: the summary merged into it
        whole.insert(9, whole[0].model_copy(update={"id": "u9", "position": 9}))
    cut = 9
    applied = AppliedCompaction(summary="GOAL was to tidy", through_message_id=whole[cut - 1].id)

    def expected(history: list[Message], summary: str, at: int) -> list[Message]:
        plan = CompactionPlan(summarised=history[:at], kept=history[at:])
        return compacted_history(summary, plan)

    for end in range(cut + 1, len(whole) + 1):
        history = whole[:end]
        sent, kept = compacted_messages(applied, history)
        assert (sent, kept) == (expected(history, applied.summary, cut), history[cut:])
    reread = [message.model_copy() for message in whole]
    assert compacted_messages(applied, reread)[0] == expected(reread, applied.summary, cut)
    edited = [*whole[:cut], whole[cut].model_copy(update={"content": [TextBlock(text="new")]})]
    assert compacted_messages(applied, edited)[0] == expected(edited, applied.summary, cut)
    later = AppliedCompaction(summary="Tidied: now tests", through_message_id=whole[12].id)
    sent, _ = compacted_messages(later, whole)
    assert sent == expected(whole, "Tidied: now tests", 13)
    assert "Tidied: now tests" in sent[0].text


def test_the_tallys_character_counts_plan_and_estimate_as_counting_each_message_does() -> None:
    """The engine plans a compaction and notes its sizes with the counts the running tally
    already has: the same cut and the same estimates as counting every message again, for
    the history it counted, for another list of equal messages, and for a summary message
    it never saw."""
    history = _conversation(40, size=300)
    tally = HistoryTally()
    tally.estimate(history, history)
    for window in (2_000, 5_000, 9_000):
        assert plan_compaction(
            history, context_window=window, chars_of=tally.chars_of
        ) == plan_compaction(history, context_window=window)
    plan = plan_compaction(history, context_window=5_000)
    assert plan is not None
    request = compacted_history("a summary " * 50, plan)
    copies = [message.model_copy(update={"content": []}) for message in history]
    for messages in (history, request, copies, history[7:]):
        assert estimate_tokens(messages, chars_of=tally.chars_of) == estimate_tokens(messages)
