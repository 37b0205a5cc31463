"""The subcommands of DESIGN §11, each an async function of an open ``Runtime``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from runtime.api import Runtime, UnknownChoice, describe_call
from runtime.errors import AgentTuiError, ConflictError, InvalidInput, RunStateConflict
from runtime.models import InputRequest, Run, RunState
from runtime.rewind import apply_rewind, plan_rewind, plan_rewind_to_start
from runtime.transcript import inherited_history, kept_partials, partial_answer
from tui._cli import render
from tui._cli.listing import no_runs, shown_title
from tui._cli.parser import EXIT_OK
from tui._cli.render import runs_table, show_text, step_in_progress

if TYPE_CHECKING:
    from runtime.commands import SlashPrompt
    from runtime.config import Config
    from tui._cli.driver import Observer

# The queries (runs, show, cancel, export) stay light: what only the commands that run an agent
# need (the event printer, the terminal prompter, answer parsing with jsonschema) is imported by
# those commands when they run.

CLOSE_SECONDS = 10.0


@dataclass
class Context:
    """What every command needs, and what Ctrl+C needs to know to say how to resume."""

    db_path: Path | str
    """An SQLite file, or a PostgreSQL URL."""
    workspace: Path
    config: Config | None
    model: str | None
    out: TextIO = field(default_factory=lambda: sys.stdout)
    err: TextIO = field(default_factory=lambda: sys.stderr)
    interactive: bool = False
    current_run_id: str | None = None
    prompting: InputRequest | None = None
    """The request being asked at the terminal right now (for the Ctrl+C message)."""
    watching: bool = False
    """The current run is a worker's: this command only watches it (attach mode)."""
    creates: bool = True
    """The command may create the database where there is none yet (``run``, ``worker``, a
    consumer); the others find nothing there (PostgreSQL: its schema not set up)."""

    def set_prompting(self, request: InputRequest | None) -> None:
        self.prompting = request

    def resume_hint(self) -> str | None:
        if self.prompting is not None:
            run_id = self.prompting.run_id
            return (
                f"Run {run_id} is still waiting for your answer; give it later with: "
                f"{render.COMMAND} respond {run_id} ANSWER"
            )
        if self.current_run_id is not None and self.watching:
            return (
                f"Run {self.current_run_id} goes on in a worker; watch it with: "
                f"{render.COMMAND} show {self.current_run_id}"
            )
        if self.current_run_id is not None:
            return (
                f"Run {self.current_run_id} stays recoverable; resume it with: "
                f"{render.COMMAND} retry {self.current_run_id}"
            )
        return None

    def say(self, text: str) -> None:
        self.err.write(text + "\n")
        self.err.flush()

    def print(self, text: str = "") -> None:
        self.out.write(text + "\n")
        self.out.flush()


@contextlib.asynccontextmanager
async def open_runtime(ctx: Context, *, read_only: bool = False) -> AsyncIterator[Runtime]:
    from runtime.compose import open_store

    store = open_store(ctx.db_path, read_only=read_only, create=ctx.creates)
    runtime = await Runtime.open(
        db_path=ctx.db_path,
        workspace=ctx.workspace,
        config=ctx.config,
        model=ctx.model,
        store=store,
        read_only=read_only,
    )
    try:
        yield runtime
    finally:
        # Closing stops executions (their runs stay recoverable) and releases the lease; it must
        # happen even when Ctrl+C cancelled the command.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(CLOSE_SECONDS):
                await runtime.close()


async def event_cursor(runtime: Runtime) -> int:
    """The sequence number of the newest durable event: observing from it misses nothing that
    the command is about to cause."""
    return await runtime.last_seq()


def _show_model_notice(ctx: Context, runtime: Runtime, run: Run) -> None:
    """The demo model's notice, once the run it concerns exists (a command refused before
    prints its one-line error alone) and only when that run uses the demo model."""
    notice = runtime.model_notice
    if notice and run.model.startswith("demo"):
        ctx.say(notice)


# --- commands that run an agent ---------------------------------------------------------------


async def _follow(
    ctx: Context,
    runtime: Runtime,
    run: Run,
    *,
    json_mode: bool,
    after: int,
    observer: Observer | None = None,
    seeded_note: str | None = None,
) -> int:
    """Print the run's events from ``after`` on and follow it to its final boundary
    (``seeded_note``: see ``EventPrinter.seeded_note``)."""
    from tui._cli.driver import EventPrinter, Observer, drive
    from tui._cli.prompt import Prompter, StdinLines

    ctx.current_run_id = run.id
    if observer is None:
        printer = EventPrinter(ctx.out, ctx.err, json_mode=json_mode, main_run_id=run.id)
        printer.seeded_note = seeded_note
        observer = Observer(runtime, run.job_id, after=after, printer=printer)
        observer.start()
    else:
        observer.printer.main_run_id = run.id
    prompter = Prompter(StdinLines(), ctx.err) if ctx.interactive else None
    try:
        return await drive(runtime, run.id, observer, prompter, on_prompt=ctx.set_prompting)
    finally:
        await observer.stop()


def _expanded(ctx: Context, prompt: SlashPrompt) -> str:
    """The text a ``/name args`` prompt sends, saying on stderr when a shadowed skill or command
    of that name was not used (``/help me`` goes to the model as typed, where the TUI would
    open its built-in ``/help``)."""
    if prompt.shadowed is not None:
        ctx.say(prompt.shadowed)
    return prompt.text


async def cmd_run(ctx: Context, runtime: Runtime, args: Any) -> int:
    from runtime.commands import expand_slash_prompt

    prompt = _expanded(ctx, expand_slash_prompt(args.prompt, ctx.workspace))
    detached = args.detach or args.attach
    run = await runtime.start(
        prompt, agent=args.agent, model=args.model or ctx.model, detached=detached
    )
    _show_model_notice(ctx, runtime, run)
    if detached:
        return await _queued_for_a_worker(ctx, runtime, run, args, after=0)
    # A new job: every event of it belongs to this command.
    return await _follow(ctx, runtime, run, json_mode=args.json, after=0)


async def cmd_follow_up(ctx: Context, runtime: Runtime, args: Any) -> int:
    from runtime.commands import expand_slash_prompt

    job = await runtime.get_job(args.job_id)
    cursor = await event_cursor(runtime)
    prompt = _expanded(ctx, expand_slash_prompt(args.prompt, Path(job.workspace)))
    run = await runtime.follow_up(args.job_id, prompt, model=ctx.model)
    _show_model_notice(ctx, runtime, run)
    if run.detached:  # a job of the workers stays theirs: watch it
        ctx.watching = True
        ctx.say(f"Queued run {run.id} for a worker; watching it here.")
    return await _follow(ctx, runtime, run, json_mode=args.json, after=cursor)


async def _queued_for_a_worker(
    ctx: Context, runtime: Runtime, run: Run, args: Any, *, after: int
) -> int:
    """``--detach``: say where the run is and return; ``--attach``: watch it (and answer
    its questions at a terminal) while a worker executes it."""
    if args.detach:
        if args.json:
            ctx.print(
                json.dumps(
                    {"kind": "queued", "run_id": run.id, "job_id": run.job_id, "state": "queued"}
                )
            )
        else:
            ctx.print(run.id)
        ctx.say(
            f"Queued run {run.id} for a worker (start one with: {render.COMMAND} worker); "
            f"watch it with: {render.COMMAND} show {run.id}"
        )
        return EXIT_OK
    ctx.watching = True
    ctx.say(
        f"Queued run {run.id} for a worker; watching it here (Ctrl+C stops watching, the run "
        "goes on)."
    )
    return await _follow(ctx, runtime, run, json_mode=args.json, after=after)


async def cmd_fork(ctx: Context, runtime: Runtime, args: Any) -> int:
    run = await runtime.fork(args.checkpoint_id, args.prompt)
    _show_model_notice(ctx, runtime, run)
    return await _follow(ctx, runtime, run, json_mode=args.json, after=0)


async def cmd_retry(ctx: Context, runtime: Runtime, args: Any) -> int:
    old = await runtime.get_run(args.run_id)
    if old.state is RunState.INPUT_REQUIRED:
        raise RunStateConflict(
            f"run {old.id} is waiting for input, not interrupted: answer it with "
            f"{render.COMMAND} respond {old.id} ANSWER"
        )
    from runtime.interrupted import superseded_error

    # Before the choice about a call in doubt: no choice makes a retry of such a run right.
    refusal = superseded_error(
        old, await runtime.job_runs(old.job_id), await runtime.checkpoints(old.id)
    )
    if refusal is not None:
        raise refusal
    unknown: UnknownChoice | None = "rerun" if args.rerun else "skip" if args.skip_unknown else None
    doubtful = await runtime.unknown_calls(old.id)
    if doubtful and unknown is None:
        raise InvalidInput(
            f"the outcome of {'; '.join(describe_call(c) for c in doubtful)} is unknown (it may "
            "have acted): retry with --rerun to run it again or --skip-unknown to continue "
            "without it"
        )
    ctx.current_run_id = old.id
    cursor = await event_cursor(runtime)
    run = await runtime.retry(args.run_id, unknown=unknown)
    _show_model_notice(ctx, runtime, run)
    seeded_note = None
    if doubtful and run.id != old.id:
        calls = "call" if len(doubtful) == 1 else "calls"
        done = "running" if unknown == "rerun" else "without running"
        seeded_note = (
            f"retried from the step whose {calls} had an unknown outcome, {done} the {calls} again"
        )
    return await _follow(
        ctx, runtime, run, json_mode=args.json, after=cursor, seeded_note=seeded_note
    )


async def cmd_respond(ctx: Context, runtime: Runtime, args: Any) -> int:
    from runtime.answers import parse_cli_answer
    from tui._cli.driver import EventPrinter, Observer

    run = await runtime.get_run(args.run_id)
    request: InputRequest | None
    if args.request is not None:
        # A named request is answered or refused by the runtime: a second answer to it is
        # "already answered", whatever the run does now.
        request = await runtime.get_request(args.request)
    else:
        request = await runtime.open_request(run.id)
    if request is None:
        from runtime.interrupted import not_waiting_for_input

        raise RunStateConflict(not_waiting_for_input(run))
    value = parse_cli_answer(request, args.answer)
    root = run
    while root.parent_run_id is not None:
        root = await runtime.get_run(root.parent_run_id)
    ctx.current_run_id = root.id
    ctx.watching = run.detached
    cursor = await event_cursor(runtime)
    if args.detach:
        answered = await runtime.respond(request.run_id, request.id, value, detach=True)
        if args.json:
            ctx.print(
                json.dumps(
                    {"kind": "answered", "run_id": answered.id, "state": answered.state.value}
                )
            )
        ctx.say(_answered_and_left(answered))
        return EXIT_OK
    printer = EventPrinter(ctx.out, ctx.err, json_mode=args.json, main_run_id=root.id)
    observer = Observer(runtime, root.job_id, after=cursor, printer=printer)
    observer.start()
    try:
        await runtime.respond(request.run_id, request.id, value)
    except BaseException:
        await observer.stop()
        raise
    if run.detached:
        ctx.say(f"Answered; a worker goes on with run {request.run_id}; watching it here.")
    return await _follow(ctx, runtime, root, json_mode=args.json, after=cursor, observer=observer)


def _answered_and_left(run: Run) -> str:
    """What ``respond --detach`` did with ``run``, just answered: who goes on with it. A trial
    read "(queued)" for a run an open TUI was running as waiting for someone to pick it up."""
    watch = f"watch it with: {render.COMMAND} show {run.id}"
    if run.detached:
        return (
            f"Answered run {run.id}; it is queued for the workers again, and the next free one "
            f"goes on with it (start one with: {render.COMMAND} worker); {watch}"
        )
    from runtime.owners import owner_process

    process = owner_process(run.owner_id) if run.owner_id is not None else None
    which = f" ({process})" if process is not None else ""
    return (
        f"Answered run {run.id}; it goes back to the agent-tui that was running it{which}, "
        f"which goes on with it now; {watch}"
    )


# --- queries -----------------------------------------------------------------------------------


async def cmd_runs(ctx: Context, runtime: Runtime, args: Any) -> int:
    from runtime.interrupted import gone_owners_of, owner_gone

    archived = getattr(args, "archived", False)
    state = RunState(args.state) if args.state and args.state != "interrupted" else None
    if args.state == "interrupted":
        if archived:
            raise InvalidInput("--state interrupted lists the runs of jobs not archived only")
        from runtime.interrupted import interrupted_runs
        from runtime.owners import gone_owners

        # Runs a killed process left count: nothing runs them, and only a process that may
        # execute (not this one) recovers them.
        gone = frozenset(await gone_owners(runtime.store))
        runs = await interrupted_runs(runtime, limit=args.limit, gone=gone)
    else:
        runs = await _runs_page(runtime, state, limit=args.limit, archived=archived)
        gone = await gone_owners_of(runtime.store, runs)
    titles: dict[str, str] = {}
    archived_jobs: set[str] = set()
    for run in runs:
        if run.job_id not in titles:
            job = await runtime.get_job(run.job_id)
            titles[run.job_id] = job.title
            if job.archived:
                archived_jobs.add(job.id)
    if args.json:
        for run in runs:
            data = run.model_dump(mode="json")
            data["job_title"] = titles[run.job_id]
            data["owner_gone"] = owner_gone(run, gone)
            ctx.print(json.dumps(data, ensure_ascii=False))
        return EXIT_OK
    if not runs:
        ctx.say(no_runs(args.state))
        return EXIT_OK
    now = _now()
    shown = {
        job_id: shown_title(title, job_id in archived_jobs) for job_id, title in titles.items()
    }
    for line in runs_table(runs, shown, now=now, gone=gone):
        ctx.print(line)
    return EXIT_OK


async def _runs_page(
    runtime: Runtime, state: RunState | None, *, limit: int, archived: bool
) -> list[Run]:
    """The newest ``limit`` runs in ``state`` (of archived jobs too, with ``archived``). Queued
    ones are those about to start: one put back in the queue by a crash or a quit waits for a
    retry instead, and reads "interrupted" everywhere (``--state interrupted`` lists it)."""
    from runtime.interrupted import waits_for_retry

    found: list[Run] = []
    cursor: str | None = None
    while True:
        if archived:
            page = await runtime.store.list_runs(
                cursor=cursor, limit=limit, state=state, archived=None
            )
        else:
            page = await runtime.list_runs(cursor=cursor, limit=limit, state=state)
        if state is not RunState.QUEUED:
            return page.items
        found.extend(run for run in page.items if not waits_for_retry(run))
        cursor = page.next_cursor
        if len(found) >= limit or cursor is None:
            return found[:limit]


def _now() -> float:
    import time

    return time.time()


async def cmd_show(ctx: Context, runtime: Runtime, args: Any) -> int:
    from runtime.interrupted import gone_owners_of, owner_gone

    run = await runtime.get_run(args.run_id)
    job = await runtime.get_job(run.job_id)
    messages = await runtime.all_messages(run.id)
    tool_calls = await runtime.tool_calls(run.id)
    request = await runtime.open_request(run.id)
    if request is not None:
        request = await runtime.current_request(request)  # a write's diff as of now
    checkpoints = await runtime.checkpoints(run.id)
    origin, inherited = await inherited_history(runtime.store, run)
    gone = owner_gone(run, await gone_owners_of(runtime.store, [run]))
    # A run whose process is gone is not streaming: its draft is what it had shown.
    partial = await partial_answer(runtime.store, run, live=True, owner_gone=gone)
    kept = await kept_partials(runtime.store, run)  # of attempts a crash or a close cut short
    if args.json:
        data = {
            "run": run.model_dump(mode="json"),
            "owner_gone": gone,
            "step_in_progress": step_in_progress(run, tool_calls, owner_gone=gone),
            "job": job.model_dump(mode="json"),
            "inherited": None
            if origin is None
            else {
                "label": origin.label(),
                "messages": [item.message.model_dump(mode="json") for item in inherited],
            },
            "messages": [m.model_dump(mode="json") for m in messages],
            "partial_answer": None if partial is None else partial.as_json(),
            "kept_partial_answers": [item.as_json() for item in kept],
            "tool_calls": [c.model_dump(mode="json") for c in tool_calls],
            "request": request.model_dump(mode="json", by_alias=True) if request else None,
            "checkpoints": [c.model_dump(mode="json") for c in checkpoints],
        }
        ctx.print(json.dumps(data, ensure_ascii=False))
        return EXIT_OK
    try:
        window: int | None = runtime.context_window(run.model, workspace=job.workspace)
    except AgentTuiError:  # e.g. a Claude run shown on a machine with no key
        window = None
    for line in show_text(
        run,
        job,
        messages,
        tool_calls,
        request,
        checkpoints,
        window,
        inherited=[item.message for item in inherited],
        inherited_label=origin.label() if origin else None,
        partial=partial,
        kept=kept,
        owner_gone=gone,
        unwritable=_unwritable_folder(ctx.db_path),
    ):
        ctx.print(line)
    return EXIT_OK


def _unwritable_folder(db_path: Path | str) -> str | None:
    """The database's folder when this process cannot write the database (its folder or the
    file: a backup, another user's folder), else None."""
    from runtime.store.checks import database_writable

    if isinstance(db_path, Path) and not database_writable(db_path):
        return str(db_path.parent)
    return None


async def cmd_cancel(ctx: Context, runtime: Runtime, args: Any) -> int:
    run = await runtime.get_run(args.run_id)
    if run.state.is_terminal:
        raise RunStateConflict(f"run {run.id} is already {run.state.value}: nothing to cancel")
    run = await runtime.cancel(run.id, reason="cancelled from the command line")
    ctx.print(f"{run.id} {run.state.value}")
    return EXIT_OK


async def cmd_export(ctx: Context, runtime: Runtime, args: Any) -> int:
    text = await runtime.export_job(args.job_id, format=args.format)
    write_output(ctx, text if text.endswith("\n") else text + "\n", what="the export")
    return EXIT_OK


def write_output(ctx: Context, text: str, *, what: str) -> None:
    """``text`` to stdout, flushed. A write that fails (a full disk, ``> /dev/full``, an I/O
    error) is an error naming ``what`` and why, in one line: it was "unexpected error:
    [Errno 28] …" (exit 1 still). A closed pipe (``| head``) goes on to the quiet exit
    ``tui.cli`` gives it."""
    try:
        ctx.out.write(text)
        ctx.out.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        why = exc.strerror or str(exc) or type(exc).__name__
        raise AgentTuiError(f"cannot write {what} to stdout: {why}", code="output_failed") from exc


# --- archive and delete (DESIGN §5) -------------------------------------------------------------


async def cmd_archive(ctx: Context, runtime: Runtime, args: Any) -> int:
    if (job := await runtime.get_job(args.job_id)).archived:
        ctx.print(f"Job {job.id} ({job.title}) is already archived: nothing changed.")
        return EXIT_OK
    job = await runtime.store.set_job_archived(args.job_id, True)
    ctx.print(
        f"Archived job {job.id} ({job.title}); {render.COMMAND} unarchive {job.id} brings it back."
    )
    return EXIT_OK


async def cmd_unarchive(ctx: Context, runtime: Runtime, args: Any) -> int:
    # A trial's unarchive of a job never archived said "Unarchived job …".
    if not (job := await runtime.get_job(args.job_id)).archived:
        ctx.print(f"Job {job.id} ({job.title}) is not archived: nothing changed.")
        return EXIT_OK
    job = await runtime.store.set_job_archived(args.job_id, False)
    ctx.print(f"Unarchived job {job.id} ({job.title}).")
    return EXIT_OK


_REMOVED_NAMES = (
    ("runs", "run", "runs"),
    ("messages", "message", "messages"),
    ("tool_calls", "tool call", "tool calls"),
    ("input_requests", "request", "requests"),
    ("checkpoints", "checkpoint", "checkpoints"),
    ("drafts", "draft", "drafts"),
    ("events", "event", "events"),
    ("file_snapshots", "file snapshot", "file snapshots"),
    ("blobs", "stored file content", "stored file contents"),
)


def removed_summary(removed: dict[str, int]) -> str:
    parts = [
        f"{removed[key]} {one if removed[key] == 1 else many}"
        for key, one, many in _REMOVED_NAMES
        if removed.get(key)
    ]
    return ", ".join(parts) if parts else "no other rows"


async def cmd_delete(ctx: Context, runtime: Runtime, args: Any) -> int:
    job = await runtime.get_job(args.job_id)
    if not job.archived:
        raise ConflictError(
            f"job {job.id} is not archived; only archived jobs can be deleted "
            f"(agent-tui archive {job.id} first)"
        )
    if not args.yes:
        if not ctx.interactive:
            raise InvalidInput(
                f"deleting job {job.id} cannot be undone: pass --yes to confirm "
                "(stdin is not a terminal, so agent-tui cannot ask)"
            )
        runs = await runtime.store.job_runs(job.id)
        ctx.err.write(
            f"Delete job {job.id} ({job.title}) with its {len(runs)} run"
            f"{'' if len(runs) == 1 else 's'}, for good? [y/N] "
        )
        ctx.err.flush()
        from tui._cli.prompt import StdinLines

        line = await StdinLines().readline()
        if (line or "").strip().lower() not in ("y", "yes"):
            ctx.say("Nothing deleted.")
            return EXIT_OK
    removed = await runtime.store.delete_job(job.id)
    ctx.print(f"Deleted job {job.id} ({job.title}): {removed_summary(removed)}.")
    return EXIT_OK


# --- rewinding files ------------------------------------------------------------------------------


async def _confirm(ctx: Context, question: str) -> bool:
    ctx.err.write(question + " [y/N] ")
    ctx.err.flush()
    from tui._cli.prompt import StdinLines

    line = await StdinLines().readline()
    return (line or "").strip().lower() in ("y", "yes")


async def cmd_rewind(ctx: Context, runtime: Runtime, args: Any) -> int:
    if (args.checkpoint_id is None) == (args.job_id is None):
        raise InvalidInput(
            "name a checkpoint (rewind CHECKPOINT_ID) or a job's start (rewind --start JOB_ID)"
        )
    if args.job_id is not None:
        plan = await plan_rewind_to_start(runtime.store, args.job_id)
        target, since = f"--start {plan.job_id}", "since its start"
    else:
        plan = await plan_rewind(runtime.store, args.checkpoint_id)
        target, since = str(plan.checkpoint_id), f"after checkpoint {plan.checkpoint_id}"
    if not plan.changes:
        ctx.print(
            f"Nothing to rewind: no file agent-tui wrote in job {plan.job_id} {since} differs "
            "from its content then."
        )
        return EXIT_OK
    for change in plan.changes:
        outside = (
            "  (changed since this job last wrote it: left alone)" if change.changed_outside else ""
        )
        ctx.print(f"{change.action} {change.path}{outside}")
    ctx.print()
    for change in plan.changes:
        ctx.out.write(change.diff())
    ctx.out.flush()
    if not args.files:
        # A file changed since this job wrote it (by hand, another program, another job) is
        # only restored with --force: a hint of --files alone would restore none of them.
        if not plan.safe:
            restore = f"To restore them anyway: {render.COMMAND} rewind {target} --files --force"
        else:
            restore = f"To restore these files: {render.COMMAND} rewind {target} --files"
            if plan.changed_outside:
                restore += " (add --force to overwrite those changed since too)"
        if plan.checkpoint_id is not None:
            restore += (
                f"; to start over from there: {render.COMMAND} fork {plan.checkpoint_id} PROMPT"
            )
        ctx.say(f"Nothing changed. {restore}")
        return EXIT_OK
    include_outside = bool(args.force)
    if not args.yes:
        if not ctx.interactive:
            raise InvalidInput(
                "restoring files overwrites them: pass --yes to confirm "
                "(stdin is not a terminal, so agent-tui cannot ask)"
            )
        if not await _confirm(ctx, f"Restore {len(plan.safe)} file(s) as shown?"):
            ctx.say("Nothing changed.")
            return EXIT_OK
        if plan.changed_outside and not include_outside:
            names = ", ".join(change.path for change in plan.changed_outside)
            include_outside = await _confirm(
                ctx, f"Also overwrite {names}, changed since this job last wrote it?"
            )
    done = apply_rewind(plan, include_changed_outside=include_outside)
    for change in done:
        ctx.print(f"{'removed' if change.target is None else 'restored'} {change.path}")
    skipped = [change for change in plan.changes if change not in done]
    for change in skipped:
        why = (
            "changed since this job wrote it" if change.changed_outside else "changed while asking"
        )
        ctx.say(f"left alone: {change.path} ({why}; --force overwrites it)")
    return EXIT_OK


async def cmd_worker(ctx: Context, runtime: Runtime, args: Any) -> int:
    from tui._cli.workers import run_worker

    return await run_worker(ctx, runtime, args)


async def cmd_events(ctx: Context, runtime: Runtime, args: Any) -> int:
    from tui._cli.workers import print_events

    return await print_events(ctx, runtime, args)


COMMANDS = {
    "run": cmd_run,
    "runs": cmd_runs,
    "show": cmd_show,
    "respond": cmd_respond,
    "follow-up": cmd_follow_up,
    "retry": cmd_retry,
    "fork": cmd_fork,
    "cancel": cmd_cancel,
    "export": cmd_export,
    "archive": cmd_archive,
    "unarchive": cmd_unarchive,
    "delete": cmd_delete,
    "rewind": cmd_rewind,
    "worker": cmd_worker,
    "events": cmd_events,
}
RUNS_AN_AGENT = frozenset({"run", "respond", "follow-up", "retry", "fork"})
