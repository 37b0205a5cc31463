"""What an approval of a file write shows, as of now (DESIGN §4.3, §8).

An approval waits as long as the person takes (across restarts, for days), and the diff stored
with it was made against the file as it was when the agent asked. If the file changed since (a
hand edit, another job's write), that diff is no longer what allowing the write does: allowing
``write_file`` then replaces whatever the file holds now. ``current_detail`` makes the diff again
against the file as it is, and marks the detail when it differs from the stored one, so a client
shows the change the answer will really make (and says that the file changed)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime.kinds import InputKind
from runtime.models import InputRequest

if TYPE_CHECKING:
    from runtime.store.base import Store

CHANGED_SINCE_ASKED = "changed_since_asked"
"""Set in a detail whose diff was made again because the file changed after the request."""

_COMPARED = ("path", "new_file", "diff", "error")


def current_detail(request: InputRequest, workspace: Path) -> dict[str, Any]:
    """The request's detail with its diff made against the file as it is now (reads the file:
    call it off the event loop). The stored detail, unchanged, for anything but an approval of a
    built-in file write, or when the file reads the same as when the agent asked."""
    from runtime.rewind import FILE_WRITING_TOOLS

    detail = request.detail
    tool_name = detail.get("tool")
    arguments = detail.get("arguments")
    if (
        request.kind is not InputKind.APPROVAL
        or tool_name not in FILE_WRITING_TOOLS
        or not isinstance(arguments, dict)
    ):
        return detail
    from runtime.tools.base import ToolContext
    from runtime.tools.builtin import builtin_tools

    tool = builtin_tools()[str(tool_name)]
    ctx = ToolContext(workspace=workspace, run_id=request.run_id, job_id=request.job_id)
    now = tool.approval_detail(arguments, ctx)
    if all(now.get(key) == detail.get(key) for key in _COMPARED):
        return detail
    fresh = {key: value for key, value in detail.items() if key not in (*_COMPARED, "content")}
    fresh.update(now)
    fresh[CHANGED_SINCE_ASKED] = True
    return fresh


async def as_of_now(store: Store, request: InputRequest) -> InputRequest:
    """``request`` as a client should show it now: an approval of a file write with its diff
    made against the file as it is, marked when the file changed since the agent asked; any
    other request as it is."""
    if request.kind is not InputKind.APPROVAL:
        return request
    job = await store.get_job(request.job_id)
    detail = await asyncio.to_thread(current_detail, request, Path(job.workspace))
    if detail is request.detail:
        return request
    return request.model_copy(update={"detail": detail})
