"""The runtime's one error hierarchy. Every error has a stable ``code`` clients can match on.

AgentTuiError
├── NotFoundError            run_not_found, job_not_found, checkpoint_not_found,
│   │                        request_not_found, tool_call_not_found
│   └── DatabaseNotCreated   database_not_created (nothing of agent-tui's there yet, and the
│                            store was opened not to create it)
├── ConflictError
│   ├── IllegalTransition    illegal_transition (a state machine refused the change)
│   ├── RunStateConflict     run_state_conflict (the run is not in a state that allows this)
│   │   └── RunSuperseded    run_superseded (later runs of its job went on past it: a retry
│   │                        would leave their turns out; fork it instead)
│   ├── RevisionConflict     revision_conflict (another writer changed the run first)
│   ├── OwnershipLost        ownership_lost (the execution token is no longer current)
│   ├── ConsumerAlreadyActive consumer_already_active (a durable consumer id is held)
│   ├── IdempotencyConflict  idempotency_conflict (same key, different input)
│   ├── JobRunOpen           job_run_open (a job cannot be archived while one of its runs
│   │                        is queued, running or waiting: which one, and its state)
│   └── AlreadyAnswered      already_answered
├── InvalidInput             invalid_input (a public argument failed validation)
│   └── InvalidResponse      invalid_response (an answer that does not fit its request)
├── DatabaseError            database_error
│   ├── NotADatabase         not_a_database
│   ├── SchemaTooNew         schema_too_new
│   ├── SchemaDamaged        schema_damaged (a table, column, index or trigger is missing)
│   ├── DatabaseCorrupt      database_corrupt (a page of the file is damaged: found when it
│   │                        is read; the store writes nothing more, clients stop)
│   ├── DatabaseReadOnly     database_read_only (SQLite refuses this process's writes: it
│   │                        opened the file read-only; waiting does not change that)
│   ├── DatabaseUnreachable  database_unreachable (the server is away or ended the session:
│   │                        waiting helps; workers and `events --follow` wait)
│   ├── DatabaseFull         database_full (the disk or the database's size limit is full:
│   │                        freeing space helps while the process lives)
│   └── CursorOutOfRange     cursor_out_of_range
├── ConfigError              config_error (names the file, line and key)
├── ModelError               model_error (``retryable`` says whether to try again)
└── ToolError                tool_error (a failed tool call; the model sees the message)
    ├── PathOutsideWorkspace path_outside_workspace
    └── ToolOutcomeUnknown   tool_indeterminate (it may have acted: the call becomes
                             indeterminate and the run fails; a person decides)
"""

from __future__ import annotations


class AgentTuiError(Exception):
    code: str = "agent_tui_error"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return self.message


class NotFoundError(AgentTuiError):
    code = "not_found"


class DatabaseNotCreated(NotFoundError):
    code = "database_not_created"


class RunNotFound(NotFoundError):
    code = "run_not_found"


class JobNotFound(NotFoundError):
    code = "job_not_found"


class CheckpointNotFound(NotFoundError):
    code = "checkpoint_not_found"


class RequestNotFound(NotFoundError):
    code = "request_not_found"


class ToolCallNotFound(NotFoundError):
    code = "tool_call_not_found"


class ConflictError(AgentTuiError):
    code = "conflict"


class IllegalTransition(ConflictError):
    code = "illegal_transition"

    def __init__(self, machine: str, from_state: str | None, to_state: str) -> None:
        super().__init__(f"{machine}: illegal transition {from_state or '∅'} → {to_state}")
        self.machine = machine
        self.from_state = from_state
        self.to_state = to_state


class RunStateConflict(ConflictError):
    code = "run_state_conflict"


class RunSuperseded(RunStateConflict):
    """Retrying the run would branch its job: later root runs went on past it, and a retry
    continues from the run's own checkpoint, without their turns (``runtime.interrupted``)."""

    code = "run_superseded"


class RevisionConflict(ConflictError):
    code = "revision_conflict"


class OwnershipLost(ConflictError):
    code = "ownership_lost"


class ConsumerAlreadyActive(ConflictError):
    """A durable consumer id is held by another live process (``Runtime.consume``)."""

    code = "consumer_already_active"

    def __init__(self, message: str, *, holder: str | None = None) -> None:
        super().__init__(message)
        self.holder = holder
        """The process holding it (an owner-style ``host:pid:start-nonce`` id), when known."""


class IdempotencyConflict(ConflictError):
    code = "idempotency_conflict"


class JobRunOpen(ConflictError):
    """The job cannot be archived: one of its runs has not ended. The message says what to do
    as commands to type (the CLI shows it as it is); the fields let another client say it in
    its own terms."""

    code = "job_run_open"

    def __init__(
        self, message: str, *, job_id: str, run_id: str, run_state: str, waits_for_retry: bool
    ) -> None:
        super().__init__(message)
        self.job_id = job_id
        self.run_id = run_id
        self.run_state = run_state
        """The run's state: ``queued``, ``running`` or ``input_required``."""
        self.waits_for_retry = waits_for_retry
        """Queued by a recovery or a quit: nothing runs it until a person retries it."""


class AlreadyAnswered(ConflictError):
    code = "already_answered"


class InvalidInput(AgentTuiError):
    code = "invalid_input"


class InvalidResponse(InvalidInput):
    code = "invalid_response"


class DatabaseError(AgentTuiError):
    code = "database_error"


class NotADatabase(DatabaseError):
    code = "not_a_database"


class SchemaTooNew(DatabaseError):
    code = "schema_too_new"


class SchemaDamaged(DatabaseError):
    """The database's schema is not what its version promises (a table or index missing)."""

    code = "schema_damaged"


class DatabaseCorrupt(DatabaseError):
    """The database file is damaged (SQLite: "database disk image is malformed"). SQLite only
    finds out when it reads a damaged page, so this can come from any operation, long after
    open; the store that raised it refuses every write from then on, and a client should stop
    (the TUI leaves with this one line and exit status 2, as the CLI does)."""

    code = "database_corrupt"


class DatabaseUnreachable(DatabaseError):
    """The database server cannot be reached or ended the session (PostgreSQL restarting or
    shutting down, the network, a connection it closed), or has no connection free for this
    client: waiting and trying again helps, as a worker and ``events --follow`` do. Not a
    refusal that would be the same next time."""

    code = "database_unreachable"


class DatabaseFull(DatabaseError):
    """The database cannot grow: its disk is full (SQLite's "database or disk is full",
    PostgreSQL's disk_full). Unlike a refusal, freeing space mends it while the process
    lives; an engine that cannot record a run's failure waits for it."""

    code = "database_full"


class DatabaseReadOnly(DatabaseError):
    """SQLite refuses to write ("attempt to write a readonly database"): it opened the file
    read-only (its mode, a read-only mount), and a connection stays so until it is opened
    again. Unlike a server that went away, waiting does not help."""

    code = "database_read_only"


class CursorOutOfRange(DatabaseError):
    code = "cursor_out_of_range"


class ConfigError(AgentTuiError):
    code = "config_error"

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        key: str | None = None,
    ) -> None:
        where = ":".join(str(p) for p in (file, line) if p is not None)
        text = message
        if key:
            text = f"{key}: {text}"
        if where:
            text = f"{where}: {text}"
        super().__init__(text)
        self.file = file
        self.line = line
        self.key = key


class ModelError(AgentTuiError):
    code = "model_error"

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        code: str | None = None,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, code=code)
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after


class ToolError(AgentTuiError):
    code = "tool_error"


class PathOutsideWorkspace(ToolError):
    code = "path_outside_workspace"


class ToolOutcomeUnknown(ToolError):
    code = "tool_indeterminate"
