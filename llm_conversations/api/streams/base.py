"""What every rendering of a run's log shares: one renderer per response, over pages.

A response renders the log in one format: the default events
(:mod:`~llm_conversations.api.streams.events`), the AI SDK's UI message stream
(:mod:`~llm_conversations.api.streams.ai_sdk`) or AG-UI's events
(:mod:`~llm_conversations.api.streams.ag_ui`). Each is a :class:`LogRenderer`
with the state its format keeps between events (an open text part, a step):
:meth:`~LogRenderer.prime` it when the response resumes after an event id,
feed it pages (:meth:`~LogRenderer.render`), and close the response with
:meth:`~LogRenderer.state` (the run stopped without logging its end in this
response) or :meth:`~LogRenderer.end`. Rendering never queries: a page holds
what its events name.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any, ClassVar

from rest_framework.utils.encoders import JSONEncoder

from llm_conversations.conf import conf
from llm_conversations.models import Decision, Message, Run, RunEvent, RunEventType, RunStatus
from llm_conversations.runs.log.reader import Page

__all__ = ["LogRenderer", "denied", "shown", "sse_message"]


def sse_message(data: Any, *, event_id: int | None = None, name: str | None = None) -> bytes:
    """One Server-Sent Events message; JSON escapes newlines, so ``data`` fits on one line."""
    payload = json.dumps(data, cls=JSONEncoder, ensure_ascii=False, separators=(",", ":"))
    head = f"id: {event_id}\n" if event_id is not None else ""
    if name is not None:
        head += f"event: {name}\n"
    return f"{head}data: {payload}\n\n".encode()


def denied(message: Message, logged: dict[str, Any], run: Run | None) -> bool:
    """Whether a stored result answers a call a person denied: its event says so (in a
    log written before events said it, the run's decisions do)."""
    if logged.get("denied"):
        return True
    return run is not None and run.decisions.get(message.tool_call_id or "") == Decision.DENIED


def shown(kind: RunEventType) -> bool:
    """Whether end users see events of ``kind``: reasoning text only with
    ``SHOW_REASONING`` (a log written while it was on keeps its reasoning)."""
    return kind is not RunEventType.REASONING_DELTA or conf.SHOW_REASONING


class LogRenderer:
    """The rendering of a run's log in one format, for one response."""

    format: ClassVar[str]
    """The format's name, as ``?format=`` asks for it."""
    headers: ClassVar[dict[str, str]] = {}
    """Response headers the format's clients look for."""

    def __init__(self, run_id: uuid.UUID | str) -> None:
        self.run_id = str(run_id)

    def prime(self, after_id: int) -> None:
        """The response starts after ``after_id``: the events up to it were sent before."""

    def render(self, page: Page) -> bytes:
        """The messages of a page of logged events."""
        raise NotImplementedError

    @staticmethod
    def rendered(page: Page) -> Iterator[RunEvent]:
        """The events of ``page`` a response renders: not a lost attempt's text that a
        later one answered again, not what end users may not see (:func:`shown`)."""
        for event in page.events:
            if event.id not in page.superseded and shown(RunEventType(event.type)):
                yield event

    def state(self, run: Run) -> bytes:
        """The end of a response whose run stopped without logging its end in it: what
        the end event of the run's status renders as (a run that still executes
        elsewhere is told as waiting)."""
        kind = RunStatus(run.status).end_event or RunEventType.RUN_REQUIRES_ACTION
        return self.ended(kind, run)

    def ended(self, kind: RunEventType, run: Run) -> bytes:
        """The messages of the end event ``kind`` of ``run``, which the log did not hold."""
        raise NotImplementedError

    def end(self) -> bytes:
        """What closes the response (nothing, unless the format has a closing message)."""
        return b""
