"""The offline demo model: its answers read as Markdown should, and its usage counts what it
was sent."""

from __future__ import annotations

import time
from pathlib import Path

from runtime.api import Runtime
from runtime.compaction import CHARS_PER_TOKEN, tool_specs_chars
from runtime.config import Config
from runtime.mcp import InMemoryServer, McpManager
from runtime.models import InputKind, Message, Role, RunState, TextBlock
from runtime.providers.base import ModelRequest, ToolSpec, UsageReport
from runtime.providers.demo import DemoProvider
from runtime.tools.builtin import builtin_tools
from tests.fakes.mcp_servers import build_server


async def test_the_plan_quotes_a_task_of_several_paragraphs_line_by_line(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: a pasted task of two paragraphs went into ``*…*``, which
    Markdown cannot span across a blank line, so its stars showed as typed."""
    runtime = await Runtime.open(
        db_path=db_path, workspace=workspace, config=Config(), model="demo:instant"
    )
    try:
        run = await runtime.start("Line one of the paste\n\nLast *line*")
        await runtime.wait(run.id, timeout=30)
        messages = await runtime.all_messages(run.id)
    finally:
        await runtime.close()
    plan = next(m.text for m in messages if m.role is Role.ASSISTANT)
    assert "You asked:\n\n> Line one of the paste\n>\n> Last *line*\n\n" in plan
    assert "*Line one" not in plan


async def _input_tokens(request: ModelRequest) -> int:
    reports = [
        e async for e in DemoProvider(instant=True).stream(request) if isinstance(e, UsageReport)
    ]
    return reports[-1].usage.input_tokens


async def test_the_demo_counts_the_tool_definitions_offered_in_its_input_tokens(
    workspace: Path,
) -> None:
    """The demo reported the characters of the messages and system prompt only, so its input
    tokens were short of `/context`'s estimate of the same request by the tool definitions."""
    prompt = Message(
        id="m0",
        run_id="r",
        job_id="j",
        position=0,
        role=Role.USER,
        content=[TextBlock(text="summarise this folder")],
        created_at=time.time(),
    )
    specs = [
        ToolSpec(name=t.name, description=t.description, input_schema=t.input_schema)
        for t in dict(builtin_tools()).values()
    ]

    def request(tools: list[ToolSpec]) -> ModelRequest:
        return ModelRequest(
            model="instant",
            system="You help.",
            messages=[prompt],
            tools=tools,
            workspace=str(workspace),
        )

    bare = await _input_tokens(request([]))
    one = await _input_tokens(request(specs[:1]))
    every = await _input_tokens(request(specs))
    assert bare < one < every
    # The tools add what `/context` counts for their definitions (give or take the rounding).
    assert abs(every - bare - tool_specs_chars(specs) // CHARS_PER_TOKEN) <= 1


async def _answer_the_focus_question(db_path: Path, workspace: Path, answer: str) -> str:
    """The demo's line after the person answered its question with ``answer``."""
    runtime = await Runtime.open(
        db_path=db_path, workspace=workspace, config=Config(), model="demo:instant"
    )
    try:
        run = await runtime.start("Look around")
        asked = await runtime.wait(run.id, timeout=30)
        assert asked.request is not None
        await runtime.respond(run.id, asked.request.id, answer)
        await runtime.wait(run.id, timeout=30)  # the approval of its notes file
        messages = await runtime.all_messages(run.id)
    finally:
        await runtime.close()
    return [m.text for m in messages if m.role is Role.ASSISTANT][-1]


async def test_an_answer_in_the_persons_own_words_is_not_called_a_choice(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: an answer typed instead of picking an option read back as
    "You chose **Focus on the calc module**"."""
    said = await _answer_the_focus_question(db_path, workspace, "Focus on the calc module")
    assert said.startswith("You answered: **Focus on the calc module**.")


async def test_an_option_picked_is_called_a_choice(db_path: Path, workspace: Path) -> None:
    said = await _answer_the_focus_question(db_path, workspace, "The files, one by one")
    assert said.startswith("You chose **The files, one by one**.")


async def test_a_search_stopped_at_its_limit_is_counted_as_at_least_its_matches(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: with 33,000 TODO lines in the folder the demo wrote "TODO
    markers found: 200", the search's limit, as if it were the count."""
    (workspace / "todos.txt").write_text("TODO: one more\n" * 500)
    runtime = await Runtime.open(
        db_path=db_path, workspace=workspace, config=Config(), model="demo:instant"
    )
    try:
        run = await runtime.start("Look around")
        asked = await runtime.wait(run.id, timeout=30)
        assert asked.request is not None
        await runtime.respond(run.id, asked.request.id, "1")
        approval = await runtime.wait(run.id, timeout=30)  # the approval of its notes file
        assert approval.request is not None and approval.request.tool_call_id is not None
        calls = {call.id: call for call in await runtime.tool_calls(run.id)}
        notes = calls[approval.request.tool_call_id].arguments
    finally:
        await runtime.close()
    assert "- `TODO` markers found: at least 200\n" in notes["content"]


async def test_a_prompt_naming_mcp_tools_has_the_demo_call_them_and_say_what_they_returned(
    db_path: Path, workspace: Path
) -> None:
    """Found by a trial: the demo never called an MCP server's tools, so a person with no key
    could not see a configured server's tools, its approvals or its forms work at all."""
    manager = McpManager(
        {"basic": InMemoryServer(build_server("basic"), timeout=30)}, workspace=workspace
    )
    runtime = await Runtime.open(
        db_path=db_path, workspace=workspace, config=Config(), model="demo:instant", mcp=manager
    )
    try:
        run = await runtime.start(
            'call basic__echo hello world and then basic__add {"a": 2, "b": 3}'
        )
        approval = await runtime.wait(run.id, timeout=30)  # `add` is not read-only: it asks
        assert approval.request is not None and approval.request.kind is InputKind.APPROVAL
        await runtime.respond(run.id, approval.request.id, {"decision": "allow_once"})
        assert (await runtime.wait(run.id, timeout=30)).state is RunState.COMPLETED
        calls = {c.name: c for c in await runtime.tool_calls(run.id)}
        assert calls["basic__echo"].arguments == {"text": "hello world"}
        assert calls["basic__add"].arguments == {"a": 2, "b": 3}
        answer = (await runtime.all_messages(run.id))[-1].text
        assert "`basic__echo` returned:" in answer and "hello world" in answer
        assert "`basic__add` returned:" in answer and "5" in answer

        # A form its server asks for comes to the person.
        asking = await runtime.start("try `basic__ask`")
        approval = await runtime.wait(asking.id, timeout=30)
        assert approval.request is not None and approval.request.kind is InputKind.APPROVAL
        await runtime.respond(asking.id, approval.request.id, {"decision": "allow_once"})
        form = await runtime.wait(asking.id, timeout=30)
        assert form.request is not None and form.request.kind is InputKind.ELICITATION
        await runtime.respond(
            asking.id, form.request.id, {"action": "accept", "content": {"name": "Ada", "age": 36}}
        )
        assert (await runtime.wait(asking.id, timeout=30)).state is RunState.COMPLETED
        assert "hello Ada, aged 36" in (await runtime.all_messages(asking.id))[-1].text
    finally:
        await runtime.close()


async def test_a_prompt_naming_no_offered_tool_still_gets_the_tour(
    db_path: Path, workspace: Path
) -> None:
    """Common words that are tool names ("search", "shell") and unknown MCP-like names leave
    the tour as it was: only a name in backticks, or an offered ``server__tool``, is a call."""
    (workspace / "README.md").write_text("# A project\n")
    runtime = await Runtime.open(
        db_path=db_path, workspace=workspace, config=Config(), model="demo:instant"
    )
    try:
        run = await runtime.start("search the shell scripts, and github__issues")
        await runtime.wait(run.id, timeout=30)
        [first, *_] = await runtime.tool_calls(run.id)
    finally:
        await runtime.close()
    assert first.name == "list_dir"


async def test_files_attached_with_at_are_the_ones_the_demo_reads_in_a_job_and_a_follow_up(
    db_path: Path, workspace: Path
) -> None:
    """Found by a new-user trial: "explain @src/app.py" read README.md and notes.txt, never
    the file attached; a follow-up attaching one searched the workspace for `read_file`, the
    last word of the attachment line. The demo reads what is attached, first."""
    from tui.file_index import with_attachments  # the line the TUI adds under the message

    (workspace / "src" / "main.py").write_text("# the entry point\nprint('hello')\n")
    runtime = await Runtime.open(
        db_path=db_path, workspace=workspace, config=Config(), model="demo:instant"
    )
    try:
        run = await runtime.start(with_attachments("explain @src/main.py", workspace))
        asked = await runtime.wait(run.id, timeout=30)
        assert asked.request is not None
        read = [
            c.arguments["path"] for c in await runtime.tool_calls(run.id) if c.name == "read_file"
        ]
        assert read[0] == "src/main.py", read
        await runtime.cancel(run.id)

        follow_up = await runtime.follow_up(
            run.job_id, with_attachments("and what is in @notes.txt ?", workspace)
        )
        await runtime.wait(follow_up.id, timeout=30)
        calls = await runtime.tool_calls(follow_up.id)
        messages = await runtime.all_messages(follow_up.id)
    finally:
        await runtime.close()
    assert [(c.name, c.arguments.get("path")) for c in calls] == [("read_file", "notes.txt")]
    answer = [m.text for m in messages if m.role is Role.ASSISTANT][-1]
    assert "- `notes.txt`: remember: the answer is 42" in answer
    assert "read_file" not in answer
