"""The messages the main screen's workers post back to it (past tense: what happened).

Screens stay thin (see ``tui.screens.main``): every runtime call runs in a worker that posts one
of these; the screen's ``on_<name>`` handler updates the widgets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual.message import Message as TextualMessage

from runtime.errors import AgentTuiError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from runtime.events import RunNoted
    from runtime.models import Checkpoint, InputRequest, Job, Run, SearchHit, ToolCall
    from runtime.transcript_pages import ItemKey, Keyed, TranscriptPager

__all__ = [
    "AnswerFailed",
    "ApprovalOutdated",
    "CheckpointsLoaded",
    "JobsLoaded",
    "MessageQueued",
    "MessageRefused",
    "NotesLoaded",
    "RequestRouted",
    "RetryChoiceWanted",
    "RunInterrupted",
    "RunLoaded",
    "RunRefreshed",
    "RunStarted",
    "RunsLoaded",
    "SearchFinished",
]


class JobsLoaded(TextualMessage):
    def __init__(self, jobs: list[Job], next_cursor: str | None, *, first: bool) -> None:
        super().__init__()
        self.jobs = jobs
        self.next_cursor = next_cursor
        self.first = first


class RunsLoaded(TextualMessage):
    def __init__(self, job_id: str, runs: list[Run]) -> None:
        super().__init__()
        self.job_id = job_id
        self.runs = runs


class CheckpointsLoaded(TextualMessage):
    def __init__(self, run_id: str, checkpoints: list[Checkpoint]) -> None:
        super().__init__()
        self.run_id = run_id
        self.checkpoints = checkpoints


class NotesLoaded(TextualMessage):
    """The run notes (instructions, phase moves, compactions) of a run just shown."""

    def __init__(self, run_id: str, notes: list[RunNoted]) -> None:
        super().__init__()
        self.run_id = run_id
        self.notes = notes


class RunLoaded(TextualMessage):
    def __init__(
        self,
        run: Run,
        job: Job,
        items: list[Keyed],
        tool_calls: list[ToolCall],
        request: InputRequest | None,
        *,
        has_older: bool,
        pager: TranscriptPager,
        asker: Run | None = None,
        has_newer: bool = False,
        found: ItemKey | None = None,
        found_words: Sequence[str] = (),
        running_since: float | None = None,
    ) -> None:
        super().__init__()
        self.run = run
        self.job = job
        self.running_since = running_since
        """When the run, running, last went into running (its latest start, as the store
        says): its working time counts from there."""
        self.items = items
        """The tail of what the pane shows, or the items around ``found`` (``pager`` gives the
        rest as one scrolls)."""
        self.has_newer = has_newer
        self.found = found
        """The item to show and mark (a search hit); None: the tail, followed."""
        self.found_words = found_words
        """The words the search found there."""
        self.pager = pager
        self.tool_calls = tool_calls
        self.request = request
        self.has_older = has_older
        self.asker = asker
        """The sub-run that asks ``request`` when it is not ``run`` itself."""


class RunRefreshed(TextualMessage):
    def __init__(self, run: Run, job: Job, request: InputRequest | None = None) -> None:
        super().__init__()
        self.run = run
        self.job = job
        self.request = request
        """The run's open request, read after it, when it is the run on screen and waits: its
        prompt is docked with the state (``MainScreen.on_run_refreshed``)."""


class RunStarted(TextualMessage):
    """A run this screen started (new job, follow-up, retry or fork): show it."""

    def __init__(self, run: Run, job: Job) -> None:
        super().__init__()
        self.run = run
        self.job = job


class SearchFinished(TextualMessage):
    def __init__(self, query: str, hits: list[SearchHit], *, typed: bool = False) -> None:
        super().__init__()
        self.query = query
        self.hits = hits
        self.typed = typed
        """Searched while the words were typed (the focus stays in the field), not at Enter."""


class RequestRouted(TextualMessage):
    """Where a new input request goes: inline under the conversation showing ``shown_run_id``
    (the run itself or one of its ancestors), or to a notification."""

    def __init__(self, request: InputRequest, asker: Run, *, shown_run_id: str | None) -> None:
        super().__init__()
        self.request = request
        self.asker = asker
        self.shown_run_id = shown_run_id


class AnswerFailed(TextualMessage):
    def __init__(self, request: InputRequest, error: AgentTuiError, value: Any = None) -> None:
        super().__init__()
        self.request = request
        self.error = error
        self.value = value
        """The answer refused."""


class ApprovalOutdated(TextualMessage):
    """An approval was allowed, but the file it writes changed while it was on screen: not
    answered; ``request`` is it as of now, to be shown again."""

    def __init__(self, request: InputRequest) -> None:
        super().__init__()
        self.request = request


class MessageQueued(TextualMessage):
    """A message for a job whose run still works: it waits in the job's queue."""

    def __init__(self, job_id: str, text: str) -> None:
        super().__init__()
        self.job_id = job_id
        self.text = text


class MessageRefused(TextualMessage):
    def __init__(
        self,
        job_id: str | None,
        text: str,
        error: AgentTuiError,
        *,
        interrupted_run: Run | None = None,
    ) -> None:
        super().__init__()
        self.job_id = job_id
        self.text = text
        self.error = error
        self.interrupted_run = interrupted_run
        """The job's run a quit or a crash interrupted, which the message would wait for."""


class RetryChoiceWanted(TextualMessage):
    """A retry must first ask: the run's last step left calls whose outcome is unknown."""

    def __init__(self, run: Run, calls: list[ToolCall], checkpoint_id: str | None) -> None:
        super().__init__()
        self.run = run
        self.calls = calls
        self.checkpoint_id = checkpoint_id


class RunInterrupted(TextualMessage):
    def __init__(self, run: Run) -> None:
        super().__init__()
        self.run = run
