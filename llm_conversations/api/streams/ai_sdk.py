"""The AI SDK's UI message stream protocol (``x-vercel-ai-ui-message-stream: v1``).

A rendering of a run's log (:mod:`llm_conversations.api.streams`), asked for
with ``?format=ai-sdk`` or the protocol's header. Each event becomes zero or more chunks,
one SSE ``data:`` line each (JSON), and the stream ends with ``data: [DONE]``.
The whole run is one UI message whose id is the run's id:

- ``run.running`` (first one of a response): ``start`` with ``messageId`` and
  ``messageMetadata`` ``{"run_id", "conversation_id"}``;
- a model round (its ``reasoning.delta`` and ``text.delta`` events and the
  ``message.stored`` of its assistant turn) opens a step: ``reasoning-start``
  / ``reasoning-delta`` / ``reasoning-end`` as the reasoning text streams
  (with ``SHOW_REASONING``), ``text-start`` / ``text-delta`` / ``text-end``
  as the text does (the stored text when no delta was logged), the turn's
  reasoning text whole when none streamed (with ``SHOW_REASONING``, one part
  each, before the whole text, or after text that streamed), then per call ``tool-input-start`` and ``tool-input-available`` (or
  ``tool-input-error`` for arguments that were not a JSON object);
- ``tool_result.stored``: ``tool-output-available`` (the stored text),
  ``tool-output-error`` (``is_error``) or ``tool-output-denied`` (a call a
  person denied), in the step of its call (results of
  calls decided after a pause come first, outside any step);
- ``run.requires_action``: ``tool-approval-request`` per call waiting for
  approval (``approvalId`` is the call's id), then the end below with
  ``finishReason: "tool-calls"``;
- ``run.running`` of an attempt that answers again after a lost one
  (``superseded_after``): the lost attempt's open text or reasoning part, if
  this response sent it, ends with ``providerMetadata`` ``{"llm_conversations": {"superseded":
  true}}`` and its step is finished; the answer follows in a new step. A
  response that reads the log after the fact never sends that text;
- the end: ``finish-step``, ``error`` (failed runs; the run's error message) or
  ``abort`` (cancelled runs), ``finish`` with a finish reason and
  ``messageMetadata`` (:func:`run_metadata`: the run's id, conversation, status,
  termination reason, model and token usage).

The last chunk an event produced carries its ``id:``, so ``Last-Event-ID``
resumes as with the default format; a resumed response first replays the
types of the earlier events (one query) to know which step and text part are
open, and starts with ``start`` again.
"""

from __future__ import annotations

import uuid
from typing import Any

from llm_conversations.api.representations import shown_reasoning
from llm_conversations.api.streams.base import LogRenderer, denied, shown, sse_message
from llm_conversations.conversations.history import stored_message
from llm_conversations.core.messages import Role
from llm_conversations.core.reasoning import reasoning_from_list
from llm_conversations.models import (
    Message,
    Run,
    RunEvent,
    RunEventType,
    TerminationReason,
    WaitReason,
)
from llm_conversations.runs.log.reader import SUPERSEDING, Page

__all__ = [
    "AI_SDK_FORMAT",
    "PROTOCOL_HEADER",
    "PROTOCOL_VERSION",
    "SUPERSEDED",
    "AiSdkStream",
    "reasoning_part_id",
    "run_metadata",
]

AI_SDK_FORMAT = "ai-sdk"
PROTOCOL_HEADER = "x-vercel-ai-ui-message-stream"
PROTOCOL_VERSION = "v1"
DONE = b"data: [DONE]\n\n"

# What marks the text part of a lost attempt that a later one answered again.
SUPERSEDED = {"llm_conversations": {"superseded": True}}

# The finish reason of a run that ended, by why it ended; failures are "error".
_FINISH_REASONS = {
    TerminationReason.COMPLETED: "stop",
    TerminationReason.LENGTH: "length",
    TerminationReason.CONTENT_FILTER: "content-filter",
    TerminationReason.MAX_ITERATIONS: "other",
    TerminationReason.CANCELLED: "other",
    TerminationReason.IMPORTED_UNFINISHED: "other",
}


def _tool_inputs(message: Message) -> list[dict[str, Any]]:
    """The chunks announcing an assistant turn's calls, with their decoded arguments."""
    chat = stored_message(message)
    chunks: list[dict[str, Any]] = []
    for call in chat.tool_calls or ():
        ids = {"toolCallId": call.id, "toolName": call.name}
        chunks.append({"type": "tool-input-start", **ids})
        if call.malformed:
            chunks.append(
                {
                    "type": "tool-input-error",
                    **ids,
                    "input": call.raw_arguments,
                    "errorText": "The arguments are not a JSON object.",
                }
            )
        else:
            chunks.append({"type": "tool-input-available", **ids, "input": call.arguments})
    return chunks


def run_metadata(run: Run) -> dict[str, Any]:
    """The metadata of a run's UI message where it stands: the ``finish`` chunk's, and the
    history endpoint's (with the ``start`` chunk's ``conversation_id``)."""
    return {
        "run_id": str(run.pk),
        "conversation_id": str(run.conversation_id),
        "status": run.status,
        "termination_reason": run.termination_reason or None,
        "model": run.model or None,
        "usage": {
            "input_tokens": run.input_tokens,
            "output_tokens": run.output_tokens,
            "total_tokens": run.total_tokens,
            "cached_tokens": run.cached_tokens,
        },
    }


def reasoning_part_id(message_id: Any, index: int) -> str:
    """The id of a stored turn's reasoning part: in the history, and in a stream that
    sends it whole (reasoning that streamed is named by its first event)."""
    return f"reasoning-{message_id}-{index}"


def _reasoning_chunks(message: Message) -> list[dict[str, Any]]:
    """The turn's reasoning text an end user may see (``SHOW_REASONING``), one part each,
    whole: for a turn whose reasoning did not stream as it was written."""
    chunks: list[dict[str, Any]] = []
    parts = shown_reasoning(reasoning_from_list(message.reasoning or ()))
    for index, part in enumerate(parts or ()):
        part_id = reasoning_part_id(message.pk, index)
        chunks += [
            {"type": "reasoning-start", "id": part_id},
            {"type": "reasoning-delta", "id": part_id, "delta": part["text"]},
            {"type": "reasoning-end", "id": part_id},
        ]
    return chunks


def _tool_output(message: Message, logged: dict[str, Any], run: Run | None) -> dict[str, Any]:
    call_id = message.tool_call_id or ""
    if denied(message, logged, run):
        # The SDK's own state for a call a person denied (its result says so to the model).
        return {"type": "tool-output-denied", "toolCallId": call_id}
    if message.is_error:
        return {"type": "tool-output-error", "toolCallId": call_id, "errorText": message.content}
    return {"type": "tool-output-available", "toolCallId": call_id, "output": message.content}


class AiSdkStream(LogRenderer):
    """The chunks of one response, with the state of the open step and text part."""

    format = AI_SDK_FORMAT
    headers = {PROTOCOL_HEADER: PROTOCOL_VERSION}

    def __init__(self, run_id: uuid.UUID | str) -> None:
        super().__init__(run_id)
        self.started = False
        self.finished = False
        self.step_open = False
        # The open step's model turn is stored: the next model output opens another step.
        self.turn_stored = False
        # The open text or reasoning part (one at a time), and what the step streamed.
        self.text_id: str | None = None
        self.reasoning_id: str | None = None
        self.text_sent = False
        self.reasoning_sent = False

    def prime(self, after_id: int) -> None:
        """Take the state left by the events up to ``after_id``, which were sent before."""
        if after_id <= 0:
            return
        logged = RunEvent.objects.filter(run_id=self.run_id, id__lte=after_id).order_by("id")
        for event_id, kind, data in logged.values_list("id", "type", "data"):
            if not shown(RunEventType(kind)):
                continue
            # The chunks were sent before; only the state they left is wanted.
            self._advance(
                event_id, RunEventType(kind), None, data if isinstance(data, dict) else {}
            )
        # This response still owes its own start, and its end.
        self.started = self.finished = False

    def render(self, page: Page) -> bytes:
        out: list[bytes] = []
        for event in self.rendered(page):
            logged = event.data if isinstance(event.data, dict) else {}
            row = page.messages.get(str(logged.get("message")))
            kind = RunEventType(event.type)
            chunks = self._advance(event.id, kind, row, logged, page.run)
            for index, item in enumerate(chunks):
                last = index == len(chunks) - 1
                out.append(sse_message(item, event_id=event.id if last else None))
        return b"".join(out)

    def ended(self, kind: RunEventType, run: Run) -> bytes:
        return b"".join(sse_message(item) for item in self._advance(None, kind, None, {}, run))

    def end(self) -> bytes:
        """An unfinished message is finished, then ``[DONE]``."""
        closing = [] if self.finished else [*self._close(), {"type": "finish"}]
        self.finished = True
        return b"".join(sse_message(item) for item in closing) + DONE

    # State ------------------------------------------------------------------------

    def _start(self, run: Run | None) -> list[dict[str, Any]]:
        if self.started:
            return []
        self.started = True
        metadata = {"run_id": self.run_id}
        if run is not None:
            metadata["conversation_id"] = str(run.conversation_id)
        return [{"type": "start", "messageId": self.run_id, "messageMetadata": metadata}]

    def _step(self) -> list[dict[str, Any]]:
        """Open a step for a model round's output (a new one when a turn is stored)."""
        if self.step_open and not self.turn_stored:
            return []
        chunks = self._close()
        self.step_open, self.turn_stored = True, False
        self.text_sent = self.reasoning_sent = False
        return [*chunks, {"type": "start-step"}]

    def _close_parts(self, metadata: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """End the open text or reasoning part (``metadata``: its ``providerMetadata``)."""
        chunks = []
        for kind, part_id in (("text-end", self.text_id), ("reasoning-end", self.reasoning_id)):
            if part_id is not None:
                end = {"type": kind, "id": part_id}
                chunks.append({**end, "providerMetadata": metadata} if metadata else end)
        self.text_id = self.reasoning_id = None
        return chunks

    def _delta(self, event_id: int | None, kind: RunEventType, delta: str) -> list[dict[str, Any]]:
        """A piece of text or reasoning text, in the part of its kind (opened here)."""
        chunks = self._step()
        if kind is RunEventType.REASONING_DELTA:
            if self.reasoning_id is None:
                chunks += self._close_parts()
                self.reasoning_id = f"reasoning-{event_id}"
                chunks.append({"type": "reasoning-start", "id": self.reasoning_id})
            self.reasoning_sent = True
            return [*chunks, {"type": "reasoning-delta", "id": self.reasoning_id, "delta": delta}]
        if self.text_id is None:
            chunks += self._close_parts()
            self.text_id = f"text-{event_id}"
            chunks.append({"type": "text-start", "id": self.text_id})
        self.text_sent = True
        return [*chunks, {"type": "text-delta", "id": self.text_id, "delta": delta}]

    def _close(self) -> list[dict[str, Any]]:
        chunks = self._close_parts()
        if self.step_open:
            self.step_open = False
            chunks.append({"type": "finish-step"})
        return chunks

    def _advance(
        self,
        event_id: int | None,
        kind: RunEventType,
        row: Message | None,
        logged: dict[str, Any],
        run: Run | None = None,
    ) -> list[dict[str, Any]]:
        """The chunks of one event (``logged``: its data), advancing the state."""
        chunks = self._start(run)
        if kind in SUPERSEDING and "superseded_after" in logged:
            chunks += self._supersede()
        elif kind.is_delta:
            chunks += self._delta(event_id, kind, str(logged.get("delta", "")))
        elif kind is RunEventType.MESSAGE_STORED:
            chunks += self._stored_turn(event_id, row)
        elif kind is RunEventType.TOOL_RESULT_STORED:
            # In the step of its call; results of calls decided after a pause
            # come before the next step, outside any (as the AI SDK sends them).
            if row is not None:
                chunks.append(_tool_output(row, logged, run))
        elif kind.ends_stream:
            chunks += self._finish(kind, run)
        return chunks

    def _supersede(self) -> list[dict[str, Any]]:
        """A new attempt answers again: the text sent of the lost one is marked and closed."""
        chunks = [] if self.turn_stored else self._close_parts(SUPERSEDED)
        chunks += self._close()
        self.text_sent = self.reasoning_sent = False
        return chunks

    def _stored_turn(self, event_id: int | None, row: Message | None) -> list[dict[str, Any]]:
        if row is not None and row.role != Role.ASSISTANT:
            return []
        chunks = self._step() + self._close_parts()
        # Reasoning that did not stream comes whole, before the text as the history
        # has it (after it, when the text streamed already).
        whole = [] if row is None or self.reasoning_sent else _reasoning_chunks(row)
        if row is not None and row.content and not self.text_sent:
            # No text was streamed for this turn: its stored text, whole.
            text_id = f"text-{event_id}"
            chunks += whole
            whole = []
            chunks += [
                {"type": "text-start", "id": text_id},
                {"type": "text-delta", "id": text_id, "delta": row.content},
                {"type": "text-end", "id": text_id},
            ]
        self.turn_stored = True
        if row is not None:
            chunks += whole
            chunks += _tool_inputs(row)
        return chunks

    def _finish(self, kind: RunEventType, run: Run | None) -> list[dict[str, Any]]:
        self.finished = True
        chunks = self._close_parts()
        reason = "other"
        if kind is RunEventType.RUN_REQUIRES_ACTION:
            reason = "tool-calls"
            waiting = run.waiting_calls if run is not None else []
            chunks += [
                {"type": "tool-approval-request", "approvalId": p.call.id, "toolCallId": p.call.id}
                for p in waiting
                if p.reason == WaitReason.REQUIRES_APPROVAL
            ]
        chunks += self._close()
        if kind is RunEventType.RUN_FAILED:
            reason = "error"
            message = (run.error_message if run is not None else "") or "The run failed."
            chunks.append({"type": "error", "errorText": message})
        elif kind is RunEventType.RUN_CANCELLED:
            chunks.append({"type": "abort", "reason": "cancelled"})
        elif kind is RunEventType.RUN_COMPLETED and run is not None:
            reason = _FINISH_REASONS.get(TerminationReason(run.termination_reason), "other")
        metadata = run_metadata(run) if run is not None else {"run_id": self.run_id}
        chunks.append({"type": "finish", "finishReason": reason, "messageMetadata": metadata})
        return chunks
