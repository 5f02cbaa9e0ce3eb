"""AG-UI events (the Agent-User Interaction protocol, ``?format=ag-ui``).

A rendering of a run's log (:mod:`llm_conversations.api.streams`). Each logged
event becomes zero or more
AG-UI events, one SSE ``data:`` line each (JSON, as AG-UI's HTTP transport
reads them). A response is one AG-UI run: ``threadId`` is the conversation's
id, ``runId`` the run's.

- the start of a response: ``RUN_STARTED``;
- ``run.running``: ``STATE_SNAPSHOT`` of the run (``{"run_id", "status":
  "running", "attempt"}``);
- ``text.delta``: ``TEXT_MESSAGE_START`` (role ``assistant``) on the first,
  then ``TEXT_MESSAGE_CONTENT``. A streamed message's id is
  ``<run id>:<id of its first delta>`` (the turn is not stored yet); its
  ``TEXT_MESSAGE_END``, sent when the turn is stored, carries the stored id in
  ``metadata.llm_conversations.message_id``. A turn stored without streamed
  text is sent whole under its stored id;
- ``reasoning.delta`` (with ``SHOW_REASONING``): ``REASONING_START`` and
  ``REASONING_MESSAGE_START`` (role ``reasoning``) on the first, then
  ``REASONING_MESSAGE_CONTENT``; ``REASONING_MESSAGE_END`` and
  ``REASONING_END`` when the text begins or the turn is stored. Its id is
  ``<run id>:<id of its first delta>`` as a streamed text message's;
- ``message.stored`` of an assistant turn: per call ``TOOL_CALL_START``
  (``parentMessageId``: the turn's message), ``TOOL_CALL_ARGS`` (the
  arguments as the model wrote them) and ``TOOL_CALL_END``;
- ``tool_call.progress``: ``CUSTOM`` named ``llm_conversations.tool_call.progress``;
- ``tool_result.stored``: ``TOOL_CALL_RESULT`` (``messageId``: the stored
  result's id; ``metadata.llm_conversations`` says ``is_error`` or ``denied``);
- ``run.requires_action``: ``STATE_SNAPSHOT`` then ``RUN_FINISHED`` with an
  ``interrupt`` outcome, one interrupt per waiting call (``id`` and
  ``toolCallId``: the call's id, ``reason``: ``requires_approval`` or
  ``client_side``). Answering them is an ordinary approve, deny or submit;
- ``run.completed``: ``STATE_SNAPSHOT``, ``RUN_FINISHED`` (``success``, and
  ``result`` ``{"status", "termination_reason"}``); ``run.cancelled``: the
  same with a ``cancelled`` outcome; ``run.failed``: ``STATE_SNAPSHOT`` then
  ``RUN_ERROR`` with the run's error message;
- ``run.running`` of an attempt that answers again after a lost one: the lost
  attempt's open text message ends with ``metadata.llm_conversations.superseded``.

The last event an entry produced carries its ``id:``, so ``Last-Event-ID``
resumes as with the other formats. A resumed response replays the types of
the earlier entries (one query) to know which text message is open, starts
with ``RUN_STARTED`` again, and opens that message again (same id) before
continuing it.
"""

from __future__ import annotations

import uuid
from typing import Any

from llm_conversations.api.streams.base import LogRenderer, denied, shown, sse_message
from llm_conversations.conversations.history import stored_message
from llm_conversations.core.messages import Role
from llm_conversations.models import (
    Message,
    Run,
    RunEvent,
    RunEventType,
    RunStatus,
)
from llm_conversations.runs.log.reader import Page

__all__ = ["AG_UI_FORMAT", "AG_UI_STREAM_NOTE", "NAMESPACE", "AgUiStream"]

AG_UI_FORMAT = "ag-ui"
# What the OpenAPI schema says of the format, beside the default events.
AG_UI_STREAM_NOTE = (
    f"With `?format={AG_UI_FORMAT}` the stream is AG-UI events instead: each `data:` is one "
    "event (JSON) from `RUN_STARTED` to `RUN_FINISHED` or `RUN_ERROR`. See docs/ag-ui.md."
)
# The key of this app's own data in an event's ``metadata`` (``ag-ui`` is the protocol's).
NAMESPACE = "llm_conversations"
PROGRESS_EVENT = f"{NAMESPACE}.tool_call.progress"


def _ours(**data: Any) -> dict[str, Any]:
    return {NAMESPACE: data}


def _tool_calls(message: Message, parent_id: str) -> list[dict[str, Any]]:
    """Start, arguments and end of each call of an assistant turn."""
    chat = stored_message(message)
    events: list[dict[str, Any]] = []
    for call in chat.tool_calls or ():
        events += [
            {
                "type": "TOOL_CALL_START",
                "toolCallId": call.id,
                "toolCallName": call.name,
                "parentMessageId": parent_id,
            },
            {"type": "TOOL_CALL_ARGS", "toolCallId": call.id, "delta": call.arguments_json},
            {"type": "TOOL_CALL_END", "toolCallId": call.id},
        ]
    return events


def _tool_result(message: Message, logged: dict[str, Any], run: Run | None) -> dict[str, Any]:
    call_id = message.tool_call_id or ""
    event: dict[str, Any] = {
        "type": "TOOL_CALL_RESULT",
        "messageId": str(message.pk),
        "toolCallId": call_id,
        "content": message.content,
        "role": "tool",
    }
    if denied(message, logged, run):
        event["metadata"] = _ours(denied=True)
    elif message.is_error:
        event["metadata"] = _ours(is_error=True)
    return event


class AgUiStream(LogRenderer):
    """The AG-UI events of one response, with the state of the open text message."""

    format = AG_UI_FORMAT

    def __init__(self, run_id: uuid.UUID | str) -> None:
        super().__init__(run_id)
        self.thread_id: str | None = None
        self.started = False
        self.finished = False
        # The open text or reasoning message, and whether this response announced it.
        self.text_id: str | None = None
        self.reasoning = False
        self.text_announced = False

    def prime(self, after_id: int) -> None:
        """Take the state left by the events up to ``after_id``, which were sent before."""
        if after_id <= 0:
            return
        logged = RunEvent.objects.filter(run_id=self.run_id, id__lte=after_id).order_by("id")
        self.started = True  # the start was sent
        rows = logged.values_list("id", "type", "data", "run__conversation_id")
        for event_id, kind, data, conversation_id in rows:
            self.thread_id = str(conversation_id)
            if not shown(RunEventType(kind)):
                continue
            self._advance(
                event_id, RunEventType(kind), None, data if isinstance(data, dict) else {}
            )
        # This response owes its own start and end, and announces the open message again.
        self.started = self.finished = self.text_announced = False

    def render(self, page: Page) -> bytes:
        out: list[bytes] = []
        for event in self.rendered(page):
            logged = event.data if isinstance(event.data, dict) else {}
            row = page.messages.get(str(logged.get("message")))
            items = self._advance(event.id, RunEventType(event.type), row, logged, page.run)
            for index, item in enumerate(items):
                last = index == len(items) - 1
                out.append(sse_message(item, event_id=event.id if last else None))
        return b"".join(out)

    def ended(self, kind: RunEventType, run: Run) -> bytes:
        return b"".join(sse_message(item) for item in self._advance(None, kind, None, {}, run))

    def end(self) -> bytes:
        """A run left open (the stream stopped early) is finished."""
        if self.finished:
            return b""
        self.finished = True
        closing = [*self._close_text(), self._run_finished(None)]
        return b"".join(sse_message(item) for item in self._start(None) + closing)

    # State ------------------------------------------------------------------------

    def _start(self, run: Run | None) -> list[dict[str, Any]]:
        if self.started:
            return []
        self.started = True
        return [{"type": "RUN_STARTED", "threadId": self._thread(run), "runId": self.run_id}]

    def _thread(self, run: Run | None) -> str:
        """The conversation's id, from ``run`` or an earlier page; no query (``end`` may run
        on an event loop). Only a response that read nothing of a run that is gone has
        neither: its thread is then the run's id."""
        if run is not None:
            self.thread_id = str(run.conversation_id)
        return self.thread_id or self.run_id

    def _announce(self) -> list[dict[str, Any]]:
        """The open message's start, unless this response sent it."""
        if self.text_id is None or self.text_announced:
            return []
        self.text_announced = True
        message_id = self.text_id
        if self.reasoning:
            return [
                {"type": "REASONING_START", "messageId": message_id},
                {"type": "REASONING_MESSAGE_START", "messageId": message_id, "role": "reasoning"},
            ]
        return [{"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"}]

    def _close_text(self, metadata: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """End the open message (``metadata``: on its last event)."""
        if self.text_id is None:
            return []
        events = self._announce()
        message_id = self.text_id
        if self.reasoning:
            events.append({"type": "REASONING_MESSAGE_END", "messageId": message_id})
            end: dict[str, Any] = {"type": "REASONING_END", "messageId": message_id}
        else:
            end = {"type": "TEXT_MESSAGE_END", "messageId": message_id}
        if metadata:
            end["metadata"] = metadata
        self.text_id, self.reasoning = None, False
        return [*events, end]

    def _delta(self, event_id: int | None, kind: RunEventType, delta: str) -> list[dict[str, Any]]:
        """A piece of text or reasoning text, in the open message of its kind."""
        reasoning = kind is RunEventType.REASONING_DELTA
        events = self._close_text() if self.text_id and self.reasoning != reasoning else []
        if self.text_id is None:
            self.text_id, self.text_announced = f"{self.run_id}:{event_id}", False
            self.reasoning = reasoning
        events += self._announce()
        name = "REASONING_MESSAGE_CONTENT" if reasoning else "TEXT_MESSAGE_CONTENT"
        return [*events, {"type": name, "messageId": self.text_id, "delta": delta}]

    def _advance(
        self,
        event_id: int | None,
        kind: RunEventType,
        row: Message | None,
        logged: dict[str, Any],
        run: Run | None = None,
    ) -> list[dict[str, Any]]:
        """The AG-UI events of one logged event (``logged``: its data), advancing the state."""
        events = self._start(run)
        if kind is RunEventType.RUN_FALLBACK and "superseded_after" in logged:
            events += self._close_text(_ours(superseded=True))
        elif kind is RunEventType.RUN_RUNNING:
            if "superseded_after" in logged:
                events += self._close_text(_ours(superseded=True))
            snapshot = {
                "run_id": self.run_id,
                "status": RunStatus.RUNNING.value,
                "attempt": logged.get("attempt"),
            }
            events.append({"type": "STATE_SNAPSHOT", "snapshot": snapshot})
        elif kind.is_delta:
            events += self._delta(event_id, kind, str(logged.get("delta", "")))
        elif kind is RunEventType.MESSAGE_STORED:
            events += self._stored_turn(row)
        elif kind is RunEventType.TOOL_CALL_PROGRESS:
            # The log holds the report as the tool gave it: {tool_call_id, text, fraction}.
            events.append({"type": "CUSTOM", "name": PROGRESS_EVENT, "value": logged})
        elif kind is RunEventType.TOOL_RESULT_STORED:
            if row is not None:
                events.append(_tool_result(row, logged, run))
        elif kind.ends_stream:
            events += self._finish(kind, run)
        return events

    def _stored_turn(self, row: Message | None) -> list[dict[str, Any]]:
        if row is None:
            # Priming (no rows are read): a stored turn ends its text.
            self.text_id, self.reasoning = None, False
            return []
        if row.role != Role.ASSISTANT:
            return []
        message_id = str(row.pk)
        # Reasoning that streamed ends here; so does text, named by the stored id.
        events = self._close_text() if self.reasoning else []
        if self.text_id is not None:
            parent = self.text_id
            events += self._close_text(_ours(message_id=message_id))
        else:
            parent = message_id
            if row.content:
                # No text was streamed for this turn: its stored text, whole.
                events += [
                    {"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"},
                    {"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": row.content},
                    {"type": "TEXT_MESSAGE_END", "messageId": message_id},
                ]
        return events + _tool_calls(row, parent)

    def _finish(self, kind: RunEventType, run: Run | None) -> list[dict[str, Any]]:
        self.finished = True
        events = self._close_text()
        # The status after this event (the run read with a page may be later still:
        # approved and running again).
        status = RunStatus.ended_by(kind)
        reason = (run.termination_reason or None) if run is not None else None
        if kind is RunEventType.RUN_REQUIRES_ACTION:
            reason = None
        snapshot = {"run_id": self.run_id, "status": status.value, "termination_reason": reason}
        events.append({"type": "STATE_SNAPSHOT", "snapshot": snapshot})
        if kind is RunEventType.RUN_FAILED:
            message = (run.error_message if run is not None else "") or "The run failed."
            error: dict[str, Any] = {"type": "RUN_ERROR", "message": message}
            if run is not None and run.error_type:
                error["code"] = run.error_type
            events.append(error)
            return events
        finished = self._run_finished(run)
        if kind is RunEventType.RUN_REQUIRES_ACTION:
            interrupts = [
                {"id": p.call.id, "reason": str(p.reason), "toolCallId": p.call.id}
                for p in (run.waiting_calls if run is not None else [])
            ]
            if interrupts:
                finished["outcome"] = {"type": "interrupt", "interrupts": interrupts}
        elif kind is RunEventType.RUN_CANCELLED:
            finished["outcome"] = {"type": "cancelled"}
        else:
            finished["outcome"] = {"type": "success"}
            finished["result"] = {"status": status.value, "termination_reason": reason}
        events.append(finished)
        return events

    def _run_finished(self, run: Run | None) -> dict[str, Any]:
        return {"type": "RUN_FINISHED", "threadId": self._thread(run), "runId": self.run_id}
