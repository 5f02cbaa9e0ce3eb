"""A stored conversation as the AI SDK's ``UIMessage[]``, for ``useChat({messages})``.

The same message a client rebuilt from the run's UI message stream
(:mod:`llm_conversations.api.streams.ai_sdk`): a run is one assistant message whose id
is the run's id, with per assistant turn a ``step-start``, its text and a tool
part per call (``tool-{name}``, in the state its result, the run's decision or
its wait leaves it). User and system turns are one message each, with the id
the client gave them (``chat/`` keeps it in the turn's metadata) or else their
stored id; images and files are ``file`` parts whose ``url`` is the
attachment's ``content/`` endpoint. Reasoning text an end user may see
(``SHOW_REASONING``) is a ``reasoning`` part before the turn's text, where
the model wrote it and the stream sends it as it streams (a streamed part's id
is the stream's own: ``reasoning-<id of its first event>``).

Of the run executing now, the turns of its current stretch (stored after its
last pause) are left out: the reconnect stream (``chat/{id}/stream``) sends
them from the start of that stretch, continuing the last message as
``useChat``'s ``resume`` does, so nothing appears twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django.urls import reverse

from llm_conversations.api.representations import shown_reasoning
from llm_conversations.api.streams.ai_sdk import reasoning_part_id, run_metadata
from llm_conversations.conversations.history import stored_message
from llm_conversations.core.messages import Role
from llm_conversations.models import (
    Attachment,
    Conversation,
    Decision,
    Run,
    RunEvent,
    RunEventType,
    RunStatus,
    WaitReason,
)

__all__ = ["UI_MESSAGE_ID", "active_stretch", "ui_messages"]

# The key of a user turn's metadata holding the id its client gave it (chat/):
# the history answers with that id, so the client's message keeps it.
UI_MESSAGE_ID = "ui_message_id"

_COLUMNS = (
    "id",
    "role",
    "content",
    "content_parts",
    "tool_calls",
    "tool_call_id",
    "is_error",
    "run_id",
    "model",
    "finish_reason",
    "reasoning",
    "metadata",
)
_ENDINGS = [kind for kind in RunEventType if kind.ends_stream]
# The run columns a run's message reads (its parts, and ai_sdk.run_metadata).
_RUN_FIELDS = (
    "id",
    "conversation_id",
    "status",
    "termination_reason",
    "model",
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "cached_tokens",
    "waiting_calls",
    "decisions",
)


def active_stretch(conversation: Conversation) -> tuple[Run, int] | None:
    """The conversation's executing run and the id of its log's last pause (0: none).

    Two queries; ``None`` (one query) when no run is queued or running.
    """
    run = Run.objects.filter(
        conversation=conversation, status__in=(RunStatus.QUEUED, RunStatus.RUNNING)
    ).first()
    if run is None:
        return None
    paused = (
        RunEvent.objects.filter(run_id=run.pk, type__in=_ENDINGS)
        .order_by("-id")
        .values_list("id", flat=True)
        .first()
    )
    return run, paused or 0


def ui_messages(
    conversation: Conversation, content_url: Callable[[str], str] | None = None
) -> list[dict[str, Any]]:
    """The conversation's turns as UI messages, in order, less the hidden ones;
    at most five queries.

    ``content_url(attachment_id)`` makes a file part's ``url`` absolute (a
    request's ``build_absolute_uri`` applied to the path); the path otherwise.
    """
    # Hidden messages are left out, as they are of what the model sees (a tool
    # group is hidden whole, so no call loses its result here).
    rows = list(
        conversation.messages.filter(hidden_at__isnull=True).order_by("position").values(*_COLUMNS)
    )
    # Only what the messages show: not the offered tools' schemas or the parameters.
    runs = {run.pk: run for run in Run.objects.filter(conversation=conversation).only(*_RUN_FIELDS)}
    hidden = _current_stretch(conversation)
    files = _files(rows, content_url)
    out: list[dict[str, Any]] = []
    results = {
        row["tool_call_id"]: row
        for row in rows
        if row["role"] == Role.TOOL and str(row["id"]) not in hidden
    }
    for row in rows:
        if str(row["id"]) in hidden or row["role"] == Role.TOOL:
            continue
        if row["role"] != Role.ASSISTANT:
            out.append(_plain(row, files))
            continue
        answering = runs.get(row["run_id"])
        message_id = str(answering.pk) if answering is not None else str(row["id"])
        if not out or out[-1]["id"] != message_id:
            out.append(_assistant(message_id, answering))
        out[-1]["parts"] += _turn_parts(row, results, answering)
    return out


def _current_stretch(conversation: Conversation) -> set[str]:
    """Ids of the turns the executing run stored since its last pause (its resumed stream's)."""
    executing = active_stretch(conversation)
    if executing is None:
        return set()
    run, paused = executing
    logged = RunEvent.objects.filter(
        run_id=run.pk,
        id__gt=paused,
        type__in=(RunEventType.MESSAGE_STORED, RunEventType.TOOL_RESULT_STORED),
    ).values_list("data", flat=True)
    return {str(data["message"]) for data in logged if isinstance(data, dict) and "message" in data}


def _files(
    rows: Iterable[dict[str, Any]], content_url: Callable[[str], str] | None
) -> dict[str, dict[str, Any]]:
    """The ``file`` part of each attachment the rows show, by id (one query, none if none)."""
    ids = {
        part["attachment_id"]
        for row in rows
        for part in row["content_parts"] or ()
        if part.get("attachment_id")
    }
    if not ids:
        return {}
    parts: dict[str, dict[str, Any]] = {}
    for pk, mime_type, filename in Attachment.objects.filter(pk__in=ids).values_list(
        "pk", "mime_type", "filename"
    ):
        path = reverse("llm_conversations:attachment-content", args=[pk])
        part = {
            "type": "file",
            "mediaType": mime_type,
            "url": content_url(path) if content_url else path,
        }
        if filename:
            part["filename"] = filename
        parts[str(pk)] = part
    return parts


def _plain(row: dict[str, Any], files: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A user or system turn: its text, or its parts (text and files) in order."""
    if not row["content_parts"]:
        parts = [{"type": "text", "text": row["content"]}]
    else:
        parts = [
            {"type": "text", "text": part["text"]}
            if part["type"] == "text"
            else files.get(str(part.get("attachment_id")), {"type": "text", "text": ""})
            for part in row["content_parts"]
        ]
    client_id = (row["metadata"] or {}).get(UI_MESSAGE_ID)
    return {"id": str(client_id or row["id"]), "role": row["role"], "parts": parts}


def _assistant(message_id: str, run: Run | None) -> dict[str, Any]:
    """An assistant message; a run's carries the metadata its stream's ``finish`` set."""
    metadata = run_metadata(run) if run is not None else {}
    return {"id": message_id, "role": "assistant", "metadata": metadata, "parts": []}


def _turn_parts(
    row: dict[str, Any], results: dict[str | None, dict[str, Any]], run: Run | None
) -> list[dict[str, Any]]:
    message = stored_message(row)
    parts: list[dict[str, Any]] = [{"type": "step-start"}]
    for index, thought in enumerate(shown_reasoning(message.reasoning) or ()):
        part_id = reasoning_part_id(row["id"], index)
        parts.append({"type": "reasoning", "id": part_id, "text": thought["text"], "state": "done"})
    if message.content:
        parts.append({"type": "text", "text": message.content, "state": "done"})
    waiting: dict[str, WaitReason] = {}
    if run is not None and run.status == RunStatus.REQUIRES_ACTION:
        waiting = {w.call.id: w.reason for w in run.waiting_calls}
    for call in message.tool_calls or ():
        part: dict[str, Any] = {"type": f"tool-{call.name}", "toolCallId": call.id}
        result = results.get(call.id)
        decision = run.decisions.get(call.id) if run is not None else None
        if call.malformed:
            part.update(state="output-error", rawInput=call.raw_arguments)
            part["errorText"] = "The arguments are not a JSON object."
        else:
            part.update(state="input-available", input=call.arguments)
        if decision is not None:
            part.update(
                state="approval-responded",
                approval={"id": call.id, "approved": decision == Decision.APPROVED},
            )
        elif waiting.get(call.id) == WaitReason.REQUIRES_APPROVAL:
            part.update(state="approval-requested", approval={"id": call.id})
        if result is not None and decision == Decision.DENIED:
            part["state"] = "output-denied"
        elif result is not None and result["is_error"]:
            part.update(state="output-error", errorText=result["content"])
        elif result is not None:
            part.update(state="output-available", output=result["content"])
        parts.append(part)
    return parts
