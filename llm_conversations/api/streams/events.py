"""The default format: each logged event as one Server-Sent Event of its own type.

``id: <RunEvent id>``, ``event: <type>`` and one ``data:`` line holding a JSON
object that always includes ``run_id``: the text of a ``text.delta`` (and of a
``reasoning.delta``, the model's reasoning text, with ``SHOW_REASONING``), the call
of a ``tool_call.started``, the report of a ``tool_call.progress``, the stored
turn of a ``message.stored`` or ``tool_result.stored``, and the run as it
stands with every ``run.*`` event. A client that loses a stream reattaches
with ``GET runs/{id}/events/`` and ``Last-Event-ID``: it gets exactly the
events after that id.
"""

from __future__ import annotations

from typing import Any

from llm_conversations.api.representations import message_data, message_row
from llm_conversations.api.serializers import RunSerializer
from llm_conversations.api.streams.base import LogRenderer, sse_message
from llm_conversations.models import Run, RunEventType
from llm_conversations.runs.log.reader import Page

__all__ = ["EVENTS_FORMAT", "EventsStream"]

EVENTS_FORMAT = "events"
# What a tool_call.progress event carries (runs/tool_contexts.py).
PROGRESS_KEYS = ("tool_call_id", "text", "fraction")
# What a run.* event may say beside the run: its attempt, the text it
# supersedes, and for a run.fallback the entries left and taken, why, the HTTP status.
RUN_EVENT_KEYS = ("attempt", "superseded_after", "from_entry", "to_entry", "reason", "status_code")


class EventsStream(LogRenderer):
    """The log as this app's own events; it keeps no state between pages."""

    format = EVENTS_FORMAT

    def render(self, page: Page) -> bytes:
        chunks = []
        run_data: Any = None
        for event in self.rendered(page):
            name = RunEventType(event.type)
            data: dict[str, Any] = {"run_id": self.run_id}
            logged = event.data if isinstance(event.data, dict) else {}
            if name.is_delta:
                data["delta"] = logged.get("delta", "")
            elif name is RunEventType.TOOL_CALL_STARTED:
                data["tool_call"] = logged.get("tool_call")
            elif name is RunEventType.TOOL_CALL_PROGRESS:
                data["progress"] = {key: logged.get(key) for key in PROGRESS_KEYS}
            elif name in (RunEventType.TOOL_RESULT_STORED, RunEventType.MESSAGE_STORED):
                row = page.messages.get(str(logged.get("message")))
                if row is not None:
                    data["message"] = message_data(message_row(row))
            else:
                data.update((key, logged[key]) for key in RUN_EVENT_KEYS if key in logged)
                if page.run is not None:
                    run_data = run_data or RunSerializer(page.run).data
                    data["run"] = run_data
            chunks.append(sse_message(data, event_id=event.id, name=name))
        return b"".join(chunks)

    def ended(self, kind: RunEventType, run: Run) -> bytes:
        data = {"run_id": self.run_id, "run": RunSerializer(run).data}
        return sse_message(data, name=kind)
