"""Compaction planning: when, where to cut (never between a tool_use and its result), and the
history that replaces the older part."""

from __future__ import annotations

from runtime.compaction import (
    SUMMARY_HEADER,
    HistoryTally,
    compacted_history,
    estimate_tokens,
    needs_compaction,
    plan_compaction,
    summary_request_text,
)
from runtime.history import repair
from runtime.models import Message, Role, TextBlock, ToolResultBlock, ToolUseBlock


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


def test_the_running_tally_counts_again_for_another_history() -> None:
    tally = HistoryTally()
    long = _conversation(10, size=4000)
    assert tally.estimate(long, long) == estimate_tokens(long)
    reloaded = _conversation(2, size=10)  # another list, fewer and smaller messages
    assert tally.estimate(reloaded, reloaded) == estimate_tokens(reloaded)
    same_length = _conversation(10, size=7)
    assert tally.estimate(same_length, same_length) == estimate_tokens(same_length)
