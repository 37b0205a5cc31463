"""The ``agent-tui`` command (DESIGN §11).

Without a command it opens the TUI; with one it runs headless. Headless commands never import
Textual, so they start fast. Errors are one line on stderr, never a traceback: runtime errors
exit 2 (usage, configuration, database, not found, conflicts) or 1; anything unexpected is
logged with its traceback to ``agent-tui.log`` next to the database and exits 1.

Exit status of commands that run an agent: 0 completed, 1 failed, 2 usage or configuration
error, 3 stopped at input_required with nobody to answer, 4 cancelled, 130 interrupted (Ctrl+C;
the run stays recoverable), 143 terminated (SIGTERM), 129 hung up (SIGHUP: the terminal closed).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

from runtime.errors import (
    AgentTuiError,
    ConfigError,
    ConflictError,
    DatabaseError,
    DatabaseNotCreated,
    InvalidInput,
    NotFoundError,
)
from runtime.version import VERSION
from tui._cli.parser import (
    EXIT_FAILED,
    EXIT_HUNG_UP,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    EXIT_USAGE,
    parse_arguments,
)

TYPE_CHECKING = False  # not typing's: importing typing costs a tenth of ``--version``
if TYPE_CHECKING:
    import asyncio
    from collections.abc import Iterator, Sequence
    from io import TextIOWrapper
    from typing import Any

    from runtime.config import Config

# Start-up cost (DESIGN §13): ``--version`` alone is answered before argparse is even used (its
# version action imports shutil and textwrap), and each command imports what it uses when it runs
# (asyncio, logging, pydantic, the runtime, Textual for the TUI), so the imports below are
# deliberately few; tests/test_imports.py checks it in a fresh interpreter.

__all__ = ["main"]

USAGE_ERRORS = (ConfigError, DatabaseError, InvalidInput, NotFoundError, ConflictError)


def _say(text: str) -> None:
    from runtime.textsafe import terminal_safe

    sys.stderr.write(terminal_safe(text) + "\n")
    sys.stderr.flush()


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


@contextlib.contextmanager
def _logging_to(path: Path, *, own_folder: bool = False) -> Iterator[None]:
    """Log warnings and errors to ``path``; the file is only created when something is logged,
    and a broken log never breaks a command. ``own_folder``: the log's folder is not the
    database's (PostgreSQL): it is made when the first line is logged."""
    import logging

    logging.raiseExceptions = False
    handler: logging.Handler
    if path.parent.is_dir() or own_folder:

        class LogFile(logging.FileHandler):
            def _open(self) -> TextIOWrapper:
                Path(self.baseFilename).parent.mkdir(parents=True, exist_ok=True)
                return super()._open()

        handler = LogFile(path, delay=True, encoding="utf-8")
    else:  # no database folder (``doctor`` before the first run): it is not made for a log
        handler = logging.NullHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    previous_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(previous_level)
        handler.close()


def _error_message(exc: AgentTuiError, db_path: Path | str | None) -> str:
    from tui._cli.settings import naming_the_database, shown

    message = _one_line(exc.message or exc.code)
    if db_path is None:
        return message
    message = naming_the_database(message, db_path)  # its commands open this database
    db_path = shown(db_path)
    if isinstance(exc, DatabaseError) and str(db_path) not in message:
        message = f"{db_path}: {message}"
    elif isinstance(exc, NotFoundError) and str(db_path) not in message:
        message = f"{message} (looked in {db_path})"
    return message


class _Interrupt:
    """First Ctrl+C (or SIGTERM, or SIGHUP) cancels the command (the runtime closes cleanly); a
    second one exits now. SIGTERM (``kill PID``, ``timeout``) was left to its default action,
    which ended the process on the spot: its run read "running (its process is gone)" until
    another agent-tui recovered it, and nothing said how to resume it (a trial); SIGHUP (the
    terminal closed) did the same."""

    def __init__(self, task: asyncio.Task[Any]) -> None:
        self.task = task
        self.requested = False
        self.ended = "interrupted"
        self.exit_status = EXIT_INTERRUPTED
        """What a shell reports for a process the signal ended: 130 for Ctrl+C, 143 for
        SIGTERM, 129 for SIGHUP."""

    def __call__(self, ended: str = "interrupted", exit_status: int = EXIT_INTERRUPTED) -> None:
        if self.requested:
            _say(f"agent-tui: {self.ended} again, exiting now")
            os._exit(self.exit_status)
        self.requested = True
        self.ended, self.exit_status = ended, exit_status
        self.task.cancel()


async def _run_command(args: argparse.Namespace, db_path: Path | str, workspace: Path) -> int:
    import asyncio
    import signal

    from tui._cli.commands import (
        COMMANDS,
        RUNS_AN_AGENT,
        Context,
        open_runtime,
    )
    from tui._cli.parser import opens_read_only
    from tui._cli.render import TerminalSafeWriter
    from tui._cli.settings import model_override
    from tui.hangup import hangup_ignored, let_go_of_a_closed_terminal

    # Plain text is made terminal-safe on its way out; JSON stays exact.
    exact = bool(getattr(args, "json", False)) or getattr(args, "format", None) == "json"
    ctx = Context(
        db_path=db_path,
        workspace=workspace,
        config=None if args.command == "doctor" else _config_for(args, workspace),
        model=model_override(getattr(args, "model", None)),
        interactive=_stdin_is_terminal(),
        # TerminalSafeWriter is a proxy of a TextIO (write, flush, isatty, fileno; the rest is
        # forwarded), not a subclass: mypy cannot see it is one.
        out=sys.stdout if exact else TerminalSafeWriter(sys.stdout),  # type: ignore[arg-type]
        err=TerminalSafeWriter(sys.stderr),  # type: ignore[arg-type]
        creates=_creates_the_database(args),
    )
    task = asyncio.current_task()
    assert task is not None
    interrupt = _Interrupt(task)
    loop = asyncio.get_running_loop()

    def hung_up(signum: int, frame: object) -> None:
        # At once, not from the event loop: what is written to the closed terminal meanwhile
        # would fail (``tui.hangup``).
        let_go_of_a_closed_terminal()
        loop.call_soon_threadsafe(interrupt, "hung up", EXIT_HUNG_UP)

    before_hangup = None if hangup_ignored() else signal.signal(signal.SIGHUP, hung_up)
    try:
        loop.add_signal_handler(signal.SIGINT, interrupt)
        loop.add_signal_handler(signal.SIGTERM, interrupt, "terminated", EXIT_TERMINATED)
    except (NotImplementedError, RuntimeError):  # pragma: no cover - not on Unix
        pass
    try:
        if args.command == "doctor":
            from tui._cli.doctor import cmd_doctor

            return await cmd_doctor(ctx)
        async with open_runtime(ctx, read_only=opens_read_only(args)) as runtime:
            from tui._cli.ids import resolve_arguments

            await resolve_arguments(runtime.store, args, db_path=db_path, note=ctx.say)
            return await COMMANDS[args.command](ctx, runtime, args)
    except asyncio.CancelledError:
        if not interrupt.requested:
            raise
        task.uncancel()
        hint = ctx.resume_hint() if args.command in RUNS_AN_AGENT else None
        _say(f"\nagent-tui: {interrupt.ended}." + (f" {hint}" if hint else ""))
        return interrupt.exit_status
    finally:
        if before_hangup is not None:
            signal.signal(signal.SIGHUP, before_hangup)
        try:
            loop.remove_signal_handler(signal.SIGINT)
            loop.remove_signal_handler(signal.SIGTERM)
        except (NotImplementedError, RuntimeError):  # pragma: no cover
            pass


def _stdin_is_terminal() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (AttributeError, ValueError):
        return False


UI_FPS = 120
"""Screen updates a second at most (Textual's default is 60). A screen is drawn only when
something on it changed, and a changed screen waits for the next tick of this clock: at 60 a key
typed just after a frame waited up to 17 ms before its echo was even drawn. Measured with 10 runs
streaming flat out (``bench/pty_bench.py keys``, four sections each): the worst echo 57-59 ms at
60, 46-54 ms at 120; the median and the 1 MB stream (``stream``) did not change."""


def _textual_frame_rate(fps: int = UI_FPS) -> None:
    """Import Textual's constants with ``fps`` as its frame rate (read once, at import), unless
    the person set ``TEXTUAL_FPS`` themselves; the environment the agent's commands inherit is
    left as it was."""
    if "TEXTUAL_FPS" in os.environ or "textual.constants" in sys.modules:
        return
    os.environ["TEXTUAL_FPS"] = str(fps)
    try:
        import textual.constants  # noqa: F401
    finally:
        del os.environ["TEXTUAL_FPS"]


def _open_tui(args: argparse.Namespace, db_path: Path | str, workspace: Path) -> int:
    # No garbage collection until the app has drawn its first frame and opened the runtime
    # (``tui.app._tune_gc`` freezes what is alive by then and turns it back on): start-up makes
    # few cycles, but its young collections each scanned the piles of new module objects, and a
    # full one (14 ms here) fell inside the first frame's render.
    import gc

    gc.disable()
    try:
        _textual_frame_rate()
        from tui.app import Launch, run_app  # imports Textual: only here
    except ImportError as exc:
        if exc.name in ("tui.app", "tui"):
            _say(
                "agent-tui: the TUI is not available in this build yet; "
                "use `agent-tui run PROMPT` (see agent-tui --help)"
            )
            return EXIT_USAGE
        raise
    from tui._cli.settings import model_override

    launch = Launch(
        model=model_override(args.model),
        agent=args.agent,
        resume=args.resume,
        continue_last=args.continue_last,
        attach=args.attach,
    )
    result = run_app(db_path=db_path, workspace=workspace, launch=launch)
    return int(result or 0)


def _check_utf8(argv: Sequence[str]) -> None:
    """Arguments that are not valid UTF-8 reach Python as lone surrogates; refuse them before
    anything is parsed or written."""
    for number, argument in enumerate(argv, start=1):
        try:
            argument.encode("utf-8")
        except UnicodeEncodeError:
            shown = argument.encode("utf-8", "surrogateescape").decode("ascii", "backslashreplace")
            raise InvalidInput(f"argument {number} is not valid UTF-8: {shown}") from None


def _config_for(args: argparse.Namespace, workspace: Path) -> Config:
    """The workspace's configuration. A command that only looks (``show``, ``export``, …)
    reads the database without it when it is broken, and says so: the person may be on the way
    to fixing it, and nothing of it is needed to show what is stored."""
    from runtime.config import Config
    from tui._cli.parser import opens_read_only
    from tui._cli.settings import load_config

    try:
        return load_config(workspace)
    except ConfigError as exc:
        if not opens_read_only(args):
            raise
        _say(f"agent-tui: warning: {exc.message} (read without the configuration)")
        return Config()


def _has_a_terminal() -> bool:
    """Whether stdin and stdout are both a terminal, as the TUI needs (the headless test mode,
    ``App.run_test``, does not come through here)."""
    try:
        return (
            sys.stdin is not None
            and sys.stdout is not None
            and sys.stdin.isatty()
            and sys.stdout.isatty()
        )
    except (AttributeError, ValueError):
        return False


def _creates_the_database(args: argparse.Namespace) -> bool:
    """Whether the command may create the database where there is none yet: the TUI, ``run``,
    ``worker`` and a durable consumer (it saves its cursor). Anything else only finds nothing
    there, so it creates nothing, not even the folder (DESIGN: looking never writes)."""
    from tui._cli.parser import CREATE_THE_DATABASE

    if args.command == "events":
        return args.consumer is not None
    return args.command is None or args.command in CREATE_THE_DATABASE


def _needs_a_database(args: argparse.Namespace) -> bool:
    """Whether the command has nothing to do where there is no database (``doctor`` has: it
    says the database is not created yet, and checks the rest)."""
    return not _creates_the_database(args) and args.command != "doctor"


def _without_a_database(args: argparse.Namespace, db_path: Path | str) -> int:
    """What a command that creates nothing does on ``db_path``, a file that does not exist (or
    a PostgreSQL database agent-tui never set up): a listing says there is nothing yet (exit 0),
    anything else is an error naming the database."""
    from tui._cli.settings import absolute, shown

    where = shown(absolute(db_path))
    # A PostgreSQL database is there (someone made it); agent-tui's tables are not, yet.
    nothing = "are no agent-tui tables" if isinstance(db_path, str) else "is no database"
    if args.command == "runs" or (args.command == "events" and not args.follow):
        what = "No agent-tui tables" if isinstance(db_path, str) else "No database"
        _say(f"{what} yet at {where}.")  # nothing to list is not an error
        return EXIT_OK
    _say(f"agent-tui: error: there {nothing} at {where} (check --db or AGENT_TUI_DB)")
    return EXIT_USAGE


def main(argv: Sequence[str] | None = None) -> int:
    if list(sys.argv[1:] if argv is None else argv) == ["--version"]:
        sys.stdout.write(f"agent-tui {VERSION}\n")  # what argparse's version action prints
        return EXIT_OK
    try:
        _check_utf8(sys.argv[1:] if argv is None else argv)
    except AgentTuiError as exc:
        _say(f"agent-tui: error: {_one_line(exc.message)}")
        return EXIT_USAGE
    # Usage errors exit 2, --help and --version exit 0.
    args = parse_arguments(sys.argv[1:] if argv is None else argv)
    if args.command is None and not _has_a_terminal():
        # Textual can neither draw into a pipe nor read keys from one (it spins at full CPU):
        # refuse before anything is opened or created.
        _say(
            "agent-tui: error: the TUI needs a terminal (stdin and stdout); "
            "for headless use: agent-tui run PROMPT"
        )
        return EXIT_USAGE
    from tui._cli.parser import opens_read_only
    from tui._cli.settings import check_writable, prepare_db_path, resolve_db_path

    db_path: Path | str | None = None
    try:
        db_path = resolve_db_path(args.db)
        if args.command is None:
            _check_launch(args, db_path)
        missing = isinstance(db_path, Path) and not db_path.exists()
        if not missing or _creates_the_database(args):
            prepare_db_path(db_path)
            if not (opens_read_only(args) or args.command == "doctor"):
                # Looking needs no writing: a copy in a read-only folder can be read (and
                # ``doctor`` says what would stop a run there).
                check_writable(db_path)
    except AgentTuiError as exc:
        _say(f"agent-tui: error: {_error_message(exc, db_path)}")
        return EXIT_USAGE
    return _main(args, db_path)


def _check_launch(args: argparse.Namespace, db_path: Path | str) -> None:
    """The TUI's flags that can be checked before anything is drawn, opened or created: a
    mistyped ``--model``, ``--agent``, or ``--resume`` on a database that does not exist ends
    here in one line (they drew the whole screen first, and a ``--db`` typo got its folder and
    an empty database). An unknown ``--resume`` id in a database that exists is found once the
    database is open, behind the first frame. The configuration is read only for ``--agent``,
    whose own ``model`` (what its new jobs use, whatever ``--model`` says) is checked too,
    the error naming file, line and key (a trial: the TUI opened and refused each task). The
    agent ``[defaults] agent`` names is checked the same way by the app, behind its first
    frame (``tui.app.program_app``), and said there without ending it."""
    from runtime.model_refs import check_reference
    from tui._cli.settings import model_override

    model = model_override(args.model)
    if model is not None:
        check_reference(model)
    if args.agent is not None:
        from tui._cli.settings import load_config, resolve_workspace

        workspace = resolve_workspace(args.workspace)
        config = load_config(workspace)
        config.check_agent(args.agent)
        config.check_agent_model(args.agent, workspace)
    if args.resume is not None and isinstance(db_path, Path) and not db_path.exists():
        raise NotFoundError(
            f"no job id starts with {args.resume!r}: there is no database at {db_path} yet"
        )


def _name_the_database(db_path: Path | str) -> None:
    """Hints printed for a later command ("Answer with: agent-tui respond …") carry ``--db``
    when this database is not the one a bare ``agent-tui`` would open."""
    from tui._cli import render
    from tui._cli.settings import command_line

    render.COMMAND = command_line(db_path)


def _main(args: argparse.Namespace, db_path: Path | str) -> int:
    from tui._cli.settings import log_path, resolve_workspace

    try:
        workspace = resolve_workspace(args.workspace)
        if isinstance(db_path, Path) and not db_path.exists() and _needs_a_database(args):
            return _without_a_database(args, db_path)
        if args.command == "runs" and isinstance(db_path, Path):
            from tui._cli.fast_runs import fast_runs  # no runtime, no pydantic: see there

            listed = fast_runs(args, db_path)
            if listed is not None:
                return listed
        # Warnings and errors go to the log from here on (the read-only ``runs`` above logs
        # only an unexpected error, below: importing logging is a tenth of its time).
        with _logging_to(log_path(db_path), own_folder=isinstance(db_path, str)):
            if args.command is None:
                return _open_tui(args, db_path, workspace)
            _name_the_database(db_path)  # for the hints commands print (the TUI prints none)
            import asyncio

            return asyncio.run(_run_command(args, db_path, workspace))
    except DatabaseNotCreated:
        return _without_a_database(args, db_path)
    except AgentTuiError as exc:
        _say(f"agent-tui: error: {_error_message(exc, db_path)}")
        return EXIT_USAGE if isinstance(exc, USAGE_ERRORS) else EXIT_FAILED
    except KeyboardInterrupt:
        _say("\nagent-tui: interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # stdout was closed early (e.g. piped into head): not an error worth a message. Point
        # stdout at /dev/null so the interpreter's final flush does not fail again.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except Exception as exc:
        import logging

        with _logging_to(log_path(db_path), own_folder=isinstance(db_path, str)):
            logging.getLogger("agent_tui.cli").exception(
                "unexpected error in agent-tui %s", args.command or "(tui)"
            )
        _say(
            f"agent-tui: unexpected error: {_one_line(str(exc)) or type(exc).__name__} "
            f"(see {log_path(db_path)})"
        )
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
