"""The argument parser of DESIGN §11.

Global options (``--db``, ``--workspace``) are accepted before or after the subcommand: each
subparser repeats them with ``SUPPRESS`` defaults, so a value given after the subcommand wins and
an absent one does not overwrite a value given before it.
"""

from __future__ import annotations

import argparse

from runtime.version import VERSION

TYPE_CHECKING = False  # not typing's: ``--version`` imports this module (see tui.cli)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import NoReturn

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INPUT_REQUIRED = 3
EXIT_CANCELLED = 4
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143  # SIGTERM: 128 + 15, as a shell reports a process it ended
EXIT_HUNG_UP = 129  # SIGHUP (the terminal closed): 128 + 1

RUN_STATES = ["queued", "running", "input_required", "completed", "failed", "cancelled"]
"""The values of ``runtime.models.RunState``, spelled out so that building the parser (and so
``--version``) does not import pydantic; tests/test_imports.py checks they match."""


def _add_global_options(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    default = argparse.SUPPRESS if suppress else None
    parser.add_argument(
        "--db",
        metavar="PATH",
        default=default,
        help="database file (default: $AGENT_TUI_DB, else $XDG_DATA_HOME/agent-tui/agent-tui.db)",
    )
    parser.add_argument(
        "--workspace",
        metavar="DIR",
        default=default,
        help="the project folder agents work in (default: the current folder)",
    )


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return value


COMMAND_NAMES = frozenset(
    {
        "run",
        "runs",
        "show",
        "respond",
        "follow-up",
        "retry",
        "fork",
        "cancel",
        "export",
        "archive",
        "unarchive",
        "delete",
        "doctor",
        "worker",
        "events",
        "rewind",
    }
)
"""The commands ``build_parser`` adds (tests/cli checks they match)."""

READ_ONLY = frozenset({"runs", "show", "export"})
"""Commands that only look: they open the database read-only (no lease, no recovery)."""


def opens_read_only(args: argparse.Namespace) -> bool:
    """Whether the command only looks (no lease, no recovery, no writes); ``events`` writes
    only a consumer's cursor."""
    if args.command == "events":
        return not args.consumer
    return args.command in READ_ONLY


CREATE_THE_DATABASE = frozenset({"run", "worker"})
"""Commands that create the database when there is none yet (as the TUI and ``events
--consumer`` do). The others need one: ``doctor`` says it is not created yet, a listing
(``runs``, ``events``) finds nothing there and an id names nothing, so none of them creates it
(DESIGN: looking never writes)."""


class _NotTheTui(Exception):
    """The arguments are not the TUI's options alone."""


class _TuiOptionsParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _NotTheTui(message)


def parse_arguments(argv: Sequence[str]) -> argparse.Namespace:
    """``argv`` parsed as ``build_parser`` parses it (usage errors exit 2, ``--help`` exits 0).

    Opening the TUI takes options only, and building the commands' seventeen parsers took 6 ms
    of the first frame's time (argparse looks up a translation for every help string it
    makes). So arguments that name no command and ask for no help are parsed with the
    top-level options alone; anything else (a command, help, a mistake) goes to the whole
    parser, which answers as it always did."""
    if not any(argument in COMMAND_NAMES for argument in argv):
        tui_only = _TuiOptionsParser(prog="agent-tui", add_help=False)
        _add_top_level_options(tui_only)
        try:
            args, rest = tui_only.parse_known_args(argv)
        except _NotTheTui:
            pass
        else:
            if not rest:
                args.command = None
                return args
            if not rest[0].startswith("-") and any(char.isspace() for char in rest[0]):
                _refuse_a_task(rest[0])
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        # Said by the command's own parser (its usage, not the top level's), as argparse
        # does for a wrong value of one of its options.
        command = COMMAND_PARSERS.get(getattr(args, "command", None) or "", parser)
        command.error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


def _refuse_a_task(words: str) -> NoReturn:
    """Words given where a command goes, as one starts Claude Code or Codex with a task:
    argparse's "invalid choice" and the whole usage said nothing of where a task goes."""
    import sys

    sys.stderr.write(
        f"agent-tui: error: {words!r} is not a command: to give the agent a task, type it in"
        " agent-tui (opened without arguments), or run it headless with agent-tui run PROMPT\n"
    )  # repr: a line break or a control character typed in the words shows escaped
    raise SystemExit(EXIT_USAGE)


COMMAND_PARSERS: dict[str, argparse.ArgumentParser] = {}
"""Each command's parser, by name (filled by ``build_parser``)."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agent-tui",
        description="A terminal home for AI agents. Without a command, opens the TUI.",
    )
    parser.add_argument("--version", action="version", version=f"agent-tui {VERSION}")
    _add_top_level_options(parser)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    # The order of these calls is the order ``--help`` lists the commands in.
    _add_run_commands(commands)
    _add_continuing_commands(commands)
    _add_job_commands(commands)
    _add_service_commands(commands)
    COMMAND_PARSERS.update(commands.choices)
    return parser


_EVENTS_HELP = "print every event as one JSON object per line, then a boundary line"


def _command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], name: str, help_text: str
) -> argparse.ArgumentParser:
    sub = commands.add_parser(name, help=help_text, description=help_text)
    _add_global_options(sub, suppress=True)
    return sub


def _json_option(sub: argparse.ArgumentParser, what: str) -> None:
    sub.add_argument("--json", action="store_true", help=what)


def _add_run_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``run``, ``runs`` and ``show``: start a run, list runs, look at one."""
    run = _command(commands, "run", "run an agent headless in the workspace")
    run.add_argument("prompt", metavar="PROMPT")
    run.add_argument(
        "--agent",
        metavar="A",
        default=argparse.SUPPRESS,
        help="agent name (default: from config, else default)",
    )
    run.add_argument(
        "--model",
        metavar="M",
        default=argparse.SUPPRESS,
        help="model reference, e.g. demo or anthropic:NAME",
    )
    _json_option(run, _EVENTS_HELP)
    _where_it_runs(run)

    runs = _command(commands, "runs", "list runs, newest first")
    runs.add_argument(
        "--state",
        metavar="S",
        choices=[*RUN_STATES, "interrupted"],
        help=", ".join(RUN_STATES)
        + ", or interrupted (a crash or a quit stopped it; nobody retried it). queued: about to"
        " start (an interrupted run waits for a retry: it is listed as interrupted only)",
    )
    runs.add_argument(
        "--limit", metavar="N", type=_positive_int, default=20, help="at most N runs (default 20)"
    )
    _json_option(runs, "one JSON object per run")
    runs.add_argument("--archived", action="store_true", help="include the runs of archived jobs")

    show = _command(commands, "show", "one run: state, messages, tool calls, open request")
    show.add_argument("run_id", metavar="RUN_ID")
    _json_option(show, "one JSON object")


def _add_continuing_commands(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    """``respond``, ``follow-up``, ``retry``, ``fork`` and ``cancel``: act on an existing run."""
    respond = _command(commands, "respond", "answer a run's open request, then continue it")
    respond.add_argument("run_id", metavar="RUN_ID")
    respond.add_argument(
        "answer",
        metavar="ANSWER",
        help="approval: allow, allow-run, allow-always or deny[:reason]; question: the text or "
        "the option number; form: a JSON object (or decline, cancel)",
    )
    respond.add_argument(
        "--request",
        metavar="REQUEST_ID",
        help="answer only this request (refused if it was already answered)",
    )
    _json_option(respond, _EVENTS_HELP)
    respond.add_argument(
        "--detach",
        action="store_true",
        help="answer and return at once (a worker, or the process running it, goes on)",
    )

    follow_up = _command(commands, "follow-up", "continue a job with a new message")
    follow_up.add_argument("job_id", metavar="JOB_ID")
    follow_up.add_argument("prompt", metavar="PROMPT")
    follow_up.add_argument(
        "--model",
        metavar="M",
        default=argparse.SUPPRESS,
        help="model of the new run (default: the job's model)",
    )
    _json_option(follow_up, _EVENTS_HELP)

    retry = _command(commands, "retry", "resume a failed or interrupted run")
    retry.add_argument("run_id", metavar="RUN_ID")
    unknown = retry.add_mutually_exclusive_group()
    unknown.add_argument(
        "--rerun",
        action="store_true",
        help="a call whose outcome is unknown (it may have acted) runs again",
    )
    unknown.add_argument(
        "--skip-unknown",
        action="store_true",
        help="continue without a call whose outcome is unknown (the model is told so)",
    )
    _json_option(retry, _EVENTS_HELP)

    fork = _command(commands, "fork", "start a new job from a checkpoint")
    fork.add_argument("checkpoint_id", metavar="CHECKPOINT_ID")
    fork.add_argument("prompt", metavar="PROMPT", nargs="?")
    _json_option(fork, _EVENTS_HELP)

    cancel = _command(commands, "cancel", "cancel a run")
    cancel.add_argument("run_id", metavar="RUN_ID")


def _add_job_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``export``, ``archive``, ``unarchive``, ``delete`` and ``rewind``: a job and its files."""
    export = _command(commands, "export", "export a job to stdout")
    export.add_argument("job_id", metavar="JOB_ID")
    export.add_argument(
        "--format",
        choices=["md", "json"],
        default="md",
        help="md: Markdown to read (the default); json: every record, exact",
    )

    archive = _command(
        commands, "archive", "hide a job from the browser and `runs` (undo with unarchive)"
    )
    archive.add_argument("job_id", metavar="JOB_ID")

    unarchive = _command(commands, "unarchive", "bring an archived job back")
    unarchive.add_argument("job_id", metavar="JOB_ID")

    delete = _command(commands, "delete", "delete an archived job and everything of it, for good")
    delete.add_argument("job_id", metavar="JOB_ID")
    delete.add_argument("--yes", action="store_true", help="do not ask for confirmation")

    rewind = _command(
        commands,
        "rewind",
        "show what rewinding a checkpoint's files would change; --files restores them",
    )
    rewind.add_argument("checkpoint_id", metavar="CHECKPOINT_ID", nargs="?")
    rewind.add_argument(
        "--start",
        dest="job_id",
        metavar="JOB_ID",
        help="rewind to the job's start, before its first step (no checkpoint marks it)",
    )
    rewind.add_argument(
        "--files", action="store_true", help="restore the files (asks first on a terminal)"
    )
    rewind.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    rewind.add_argument(
        "--force",
        action="store_true",
        help="also overwrite files changed since the job last wrote them: by hand, by another"
        " program or by another job (listed otherwise)",
    )


def _add_service_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``doctor``, ``worker`` and ``events``: check the setup, execute queued runs, read events."""
    _command(commands, "doctor", "check the database, config, keys and MCP servers")

    worker = _command(
        commands, "worker", "execute the runs queued for workers (run --detach / --attach)"
    )
    worker.add_argument(
        "--concurrency",
        metavar="N",
        type=_positive_int,
        default=4,
        help="runs executed at the same time (default 4)",
    )
    worker.add_argument(
        "--root",
        metavar="PATH",
        action="append",
        default=[],
        help="execute only runs whose workspace is under PATH (repeatable; default: the "
        "workspace folder)",
    )
    worker.add_argument(
        "--drain-timeout",
        metavar="SECONDS",
        type=_positive_int,
        default=120,
        help="on SIGTERM, wait this long for runs to finish their step (default 120)",
    )
    _json_option(worker, "one JSON object per line for each run claimed, released or skipped")

    events = _command(
        commands, "events", "print durable events (with --consumer: at least once, resumable)"
    )
    events.add_argument("--follow", action="store_true", help="keep printing events as they commit")
    events.add_argument(
        "--consumer",
        metavar="NAME",
        help="a durable consumer: start after its last acknowledged event and save the cursor "
        "after each event printed (needs --follow; one process per NAME)",
    )
    events.add_argument(
        "--after",
        metavar="SEQ",
        type=_seq,
        help="start after this event (default: the consumer's cursor; without --consumer, "
        "the first event, or now with --follow)",
    )
    _json_option(events, "one JSON object per event")


def _add_top_level_options(parser: argparse.ArgumentParser) -> None:
    """The options of the program itself (the TUI's), not of a command."""
    _add_global_options(parser, suppress=False)
    parser.add_argument(
        "--model", metavar="M", help="model of new runs, e.g. demo or anthropic:NAME"
    )
    parser.add_argument("--agent", metavar="A", help="agent of new jobs opened in the TUI")
    parser.add_argument(
        "--attach",
        action="store_true",
        help="open the TUI as a client of workers: new jobs are queued for `agent-tui worker`",
    )
    opening = parser.add_mutually_exclusive_group()
    opening.add_argument(
        "--continue",
        dest="continue_last",
        action="store_true",
        help="open the TUI on the most recent job",
    )
    opening.add_argument(
        "--resume",
        metavar="ID",
        help="open the TUI on this job, or on this run given a run's id (a unique prefix of the"
        " id is enough)",
    )


def _seq(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def _where_it_runs(sub: argparse.ArgumentParser) -> None:
    mode = sub.add_mutually_exclusive_group()
    mode.add_argument(
        "--detach",
        action="store_true",
        help="queue the run for a worker (agent-tui worker) and print its id",
    )
    mode.add_argument(
        "--attach",
        action="store_true",
        help="queue the run for a worker and watch it here (answering its questions)",
    )
