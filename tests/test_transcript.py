"""A job as one transcript: root runs in order with headers, a fork's inherited history
labelled, a stopped run's streamed text kept as a partial answer; the same in exports."""

from __future__ import annotations

import json
from pathlib import Path

from runtime.api import Runtime
from runtime.config import Config
from runtime.export import export_job
from runtime.models import DraftKind, Role, RunState, TextBlock, ToolCallState
from runtime.store.base import NewRun
from runtime.store.sqlite import SqliteStore
from runtime.transcript import (
    ForkOrigin,
    PartialAnswer,
    RunHeader,
    TranscriptMessage,
    job_transcript,
)
from tests.tui.helpers import finish_run


async def _items(store: SqliteStore, job_id: str) -> list[object]:
    return [item async for item in job_transcript(store, job_id)]


async def _cancelled_mid_stream(store: SqliteStore, workspace: Path) -> tuple[str, str]:
    """A run (its prompt committed by create_run) that streamed some text, then was
    cancelled."""
    run = await store.create_run(
        NewRun(agent="default", model="demo", input="explain the notes", workspace=str(workspace))
    )
    await store.register_owner("owner-1", lease_seconds=30)
    claimed = await store.claim_run(run.id, owner_id="owner-1")
    token = claimed.execution_token or ""
    await store.save_draft(
        run.id, token=token, message_id="m-2", text="Reading them.", kind=DraftKind.THINKING
    )
    await store.save_draft(run.id, token=token, message_id="m-2", text="The notes say the ans")
    await store.cancel_run(run.id, reason="stopped by the person")
    return run.job_id, run.id


async def test_a_cancelled_runs_streamed_text_is_kept_and_marked_partial(
    tmp_path: Path, workspace: Path
) -> None:
    async with SqliteStore(tmp_path / "db.sqlite") as store:
        job_id, run_id = await _cancelled_mid_stream(store, workspace)
        items = await _items(store, job_id)
        assert isinstance(items[0], RunHeader) and items[0].run.id == run_id
        assert "cancelled" in items[0].label()
        assert isinstance(items[1], TranscriptMessage) and items[1].message.role is Role.USER
        partial = items[2]
        assert isinstance(partial, PartialAnswer)
        assert (partial.thinking, partial.text) == ("Reading them.", "The notes say the ans")
        assert "cancelled before it finished" in partial.label()

        markdown = await export_job(store, job_id, format="md")
        assert "### Assistant (partial)" in markdown
        assert "The notes say the ans" in markdown
        assert markdown.index("### User") < markdown.index("### Assistant (partial)")
        assert markdown.index("<summary>Thinking</summary>") < markdown.index("The notes say")
        assert "> Reading them." in markdown
        data = json.loads(await export_job(store, job_id, format="json"))
        assert data["runs"][0]["partial_answer"]["text"] == "The notes say the ans"
        assert data["runs"][0]["partial_answer"]["thinking"] == "Reading them."
        assert data["runs"][0]["partial_answer"]["partial"] is True


async def test_a_running_runs_draft_is_live_text_not_a_partial_answer(
    tmp_path: Path, workspace: Path
) -> None:
    async with SqliteStore(tmp_path / "db.sqlite") as store:
        run = await store.create_run(
            NewRun(agent="default", model="demo", input="hi", workspace=str(workspace))
        )
        await store.register_owner("owner-1", lease_seconds=30)
        claimed = await store.claim_run(run.id, owner_id="owner-1")
        await store.save_draft(
            run.id, token=claimed.execution_token or "", message_id="m", text="Hel"
        )
        items = await _items(store, run.job_id)
        assert not any(isinstance(item, PartialAnswer) for item in items)
        markdown = await export_job(store, run.job_id)
        assert "(partial)" not in markdown


async def test_a_fork_shows_and_exports_its_inherited_history_labelled(
    db_path: Path, workspace: Path
) -> None:
    runtime = await Runtime.open(
        db_path=db_path, workspace=workspace, config=Config(), model="demo:instant"
    )
    try:
        first = await runtime.start("summarise the sample project")
        await finish_run(runtime, first.id)
        follow = await runtime.follow_up(first.job_id, "and list the files")
        await finish_run(runtime, follow.id)
        checkpoints = await runtime.checkpoints(first.id)
        fork = await runtime.fork(checkpoints[0].id, "now only the README")
        await runtime.wait(fork.id, timeout=20)

        items = await _items(runtime.store, first.job_id)
        headers = [item for item in items if isinstance(item, RunHeader)]
        assert [h.run.id for h in headers] == [first.id, follow.id]
        assert headers[1].label().startswith("follow-up 2")
        assert not any(isinstance(item, ForkOrigin) for item in items)

        items = await _items(runtime.store, fork.job_id)
        origin = items[0]
        assert isinstance(origin, ForkOrigin)
        assert origin.source_job.id == first.job_id
        assert origin.checkpoint_step == checkpoints[0].step
        assert f"forked from job {first.job_id}" in origin.label()
        inherited = [i for i in items if isinstance(i, TranscriptMessage) and i.inherited]
        assert inherited and all(i.run.id == first.id for i in inherited)
        assert inherited[0].message.role is Role.USER
        assert inherited[-1].message.position == checkpoints[0].last_position
        own_header = items[len(inherited) + 1]
        assert isinstance(own_header, RunHeader) and own_header.run.id == fork.id
        own = [i for i in items if isinstance(i, TranscriptMessage) and not i.inherited]
        assert own[0].message.content[0] == TextBlock(text="now only the README")

        markdown = await runtime.export_job(fork.job_id)
        assert f"## Inherited history — forked from job {first.job_id}" in markdown
        assert "### User (inherited)" in markdown
        assert "summarise the sample project" in markdown
        assert markdown.index("### User (inherited)") < markdown.index(f"## Run `{fork.id}`")
        data = json.loads(await runtime.export_job(fork.job_id, format="json"))
        assert data["inherited"]["source_job_id"] == first.job_id
        assert len(data["inherited"]["messages"]) == len(inherited)
        assert (await runtime.get_run(first.id)).state is RunState.COMPLETED
    finally:
        await runtime.close()


async def test_an_exports_outline_keeps_the_models_headings_under_its_own(
    tmp_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: the model's "## Summary" sat at the level of the export's
    "## Run …" sections. Its headings go three levels down; a "#" in a code block stays."""
    from tests.store.helpers import assistant, running_run

    async with SqliteStore(tmp_path / "db.sqlite") as store:
        run, token = await running_run(store, workspace=str(workspace))
        text = "## Plan\nRead it.\n```sh\n# a comment\n```\n# Done"
        await store.commit_message(run.id, token=token, message=assistant(text))
        markdown = await export_job(store, run.job_id)
    assert "\n##### Plan\n" in markdown and "\n#### Done\n" in markdown
    assert "\n# a comment\n" in markdown
    assert "\n## Plan" not in markdown


async def test_a_pages_earlier_run_messages_come_with_their_tool_calls_and_the_shown_runs_without(
    db_path: Path, workspace: Path
) -> None:
    from runtime.transcript_pages import TranscriptPager

    runtime = await Runtime.open(
        db_path=db_path, workspace=workspace, config=Config(), model="demo:instant"
    )
    try:
        first = await runtime.start("summarise the sample project")
        await finish_run(runtime, first.id)
        follow = await runtime.follow_up(first.job_id, "and list the files")
        await finish_run(runtime, follow.id)

        pager = await TranscriptPager.open(runtime.store, follow)
        messages = [
            item for _, item in await pager.tail(500) if isinstance(item, TranscriptMessage)
        ]
        earlier = [m for m in messages if m.run.id == first.id and m.message.tool_uses]
        assert earlier
        for item in earlier:
            assert [call.id for call in item.tool_calls] == [
                use.tool_call_id for use in item.message.tool_uses
            ]
            assert all(call.state is ToolCallState.COMPLETED for call in item.tool_calls)
        read = next(c for m in earlier for c in m.tool_calls if c.name == "read_file")
        assert read.result and "Sample project" in read.result
        own = [m for m in messages if m.run.id == follow.id]
        assert any(m.message.tool_uses for m in own)
        assert not any(m.tool_calls for m in own)  # the shown run's calls come with the run
    finally:
        await runtime.close()


async def _retried_after_crashes(store: SqliteStore, workspace: Path) -> str:
    """A run that committed an answer, was killed twice while streaming its next one (each
    time recovered and retried), then committed two more and was killed again mid-answer."""
    from tests.store.helpers import assistant

    run = await store.create_run(
        NewRun(agent="default", model="demo", input="explain", workspace=str(workspace))
    )

    async def attempt(owner: str) -> str:
        await store.register_owner(owner, lease_seconds=30)
        return (await store.claim_run(run.id, owner_id=owner)).execution_token or ""

    async def killed(owner: str, token: str, message_id: str, text: str) -> None:
        await store.save_draft(run.id, token=token, message_id=message_id, text=text)
        await store.recover_owners([owner])

    token = await attempt("first")
    await store.commit_message(run.id, token=token, message=assistant("one"))
    await killed("first", token, "cut-a", "two, first try")
    await killed("second", await attempt("second"), "cut-b", "two, second try")
    token = await attempt("third")
    await store.commit_message(run.id, token=token, message=assistant("two"))
    await store.commit_message(run.id, token=token, message=assistant("three"))
    await killed("third", token, "cut-c", "four, cut")
    return run.id


def _shown(item: object) -> str:
    if isinstance(item, RunHeader):
        return "header"
    if isinstance(item, TranscriptMessage):
        return item.message.text
    assert isinstance(item, PartialAnswer)
    kept = "kept" if item.before_position is not None else "latest"
    return f"{item.text} ({kept})"


async def test_the_partial_answers_of_attempts_a_crash_cut_short_stay_where_they_were_cut(
    tmp_path: Path, workspace: Path
) -> None:
    """Retried after a crash, a run goes on; what its killed attempts had shown stays with it,
    each before the message the run went on with, in the transcript, the pages of a pane in
    both directions, `show` and both exports."""
    from runtime.transcript_pages import ItemKey, TranscriptPager

    expected = [
        "header",
        "explain",
        "one",
        "two, first try (kept)",
        "two, second try (kept)",
        "two",
        "three",
        "four, cut (latest)",
    ]
    async with SqliteStore(tmp_path / "db.sqlite") as store:
        run_id = await _retried_after_crashes(store, workspace)
        run = await store.get_run(run_id)
        assert [_shown(item) async for item in job_transcript(store, run.job_id)] == expected
        kept = [item async for item in job_transcript(store, run.job_id)][3]
        assert isinstance(kept, PartialAnswer)
        assert (
            kept.label()
            == "partial answer — cut short when its process stopped; the run went on after it"
        )

        for limit in (1, 2, 3, 50):
            pager = await TranscriptPager.open(store, run)
            backwards: list[object] = []
            page = await pager.tail(limit)
            while page:
                backwards[:0] = [item for _, item in page]
                page = await pager.before(page[0][0], limit)
            assert [_shown(item) for item in backwards] == expected, limit
            forwards: list[object] = []
            page = await pager.after(ItemKey(0, -2), limit)
            while page:
                forwards += [item for _, item in page]
                page = await pager.after(page[-1][0], limit)
            assert [_shown(item) for item in forwards] == expected, limit

        markdown = await export_job(store, run.job_id)
        order = ["### User", "one", "two, first try", "two, second try", "\ntwo\n", "four, cut"]
        places = [markdown.index(text) for text in order]
        assert places == sorted(places)
        data = json.loads(await export_job(store, run.job_id, format="json"))
        assert [
            (p["text"], p["before_position"]) for p in data["runs"][0]["kept_partial_answers"]
        ] == [("two, first try", 2), ("two, second try", 2)]
        assert data["runs"][0]["partial_answer"]["text"] == "four, cut"
