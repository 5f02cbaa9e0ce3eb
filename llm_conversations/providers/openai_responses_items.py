"""The Responses API's input items: how a stored conversation goes out.

System messages are joined into ``instructions``; user turns are input
messages; an assistant turn is its ``reasoning`` items, verbatim and only those
this backend made, then its text, then one ``function_call`` item per call,
the items that followed a reasoning item with the ids they came with (kept as
``signature`` parts); a tool result is a ``function_call_output`` item.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from llm_conversations.core.content_parts import ContentPart, ImagePart, TextPart
from llm_conversations.core.messages import ChatMessage, Role
from llm_conversations.core.reasoning import Reasoning, ReasoningKind

from ._wire import check_supported_parts

__all__ = [
    "BACKEND",
    "SUPPORTED_PARTS",
    "compaction_items",
    "input_part",
    "reasoning_items",
    "to_responses_input",
]

BACKEND = "openai_responses"

# Images and PDFs in user turns and in tool results.
SUPPORTED_PARTS = {
    "user": frozenset({"text", "image", "file"}),
    "tool": frozenset({"text", "image", "file"}),
}


def input_part(part: ContentPart) -> dict[str, Any]:
    """A content part as a Responses input part: ``input_text``, ``input_image``, ``input_file``."""
    if isinstance(part, TextPart):
        return {"type": "input_text", "text": part.text}
    if isinstance(part, ImagePart):
        return {"type": "input_image", "image_url": part.data_url()}
    return {
        "type": "input_file",
        "filename": part.filename or "file",
        "file_data": part.data_url(),
    }


def _mine(reasoning: Sequence[Reasoning] | None) -> list[Reasoning]:
    return [part for part in reasoning or () if part.provider == BACKEND]


def reasoning_items(reasoning: Sequence[Reasoning] | None) -> list[dict[str, Any]]:
    """The ``reasoning`` input items of a turn this backend answered, as they came.

    Parts another provider made are never sent, nor summaries alone: without
    its encrypted content a stateless request cannot use an item.
    """
    return _stored_items(reasoning, ReasoningKind.ENCRYPTED, "reasoning")


def compaction_items(reasoning: Sequence[Reasoning] | None) -> list[dict[str, Any]]:
    """The ``compaction`` items of a turn this backend answered, as they came: the
    provider reads each in place of every item before it."""
    return _stored_items(reasoning, ReasoningKind.COMPACTION, "compaction")


def _stored_items(
    reasoning: Sequence[Reasoning] | None, kind: ReasoningKind, item_type: str
) -> list[dict[str, Any]]:
    """The items of type ``item_type`` kept as the JSON ``data`` of this backend's ``kind`` parts."""
    items: list[dict[str, Any]] = []
    for part in _mine(reasoning):
        if part.kind is not kind:
            continue
        try:
            stored = json.loads(part.data or "")
        except ValueError:
            continue  # not an item this adapter stored
        if isinstance(stored, dict):
            items.append({"type": item_type, **stored})
    return items


def to_responses_input(messages: Sequence[ChatMessage]) -> tuple[str, list[dict[str, Any]]]:
    """The ``instructions`` (system messages joined) and ``input`` items of a conversation.

    An assistant turn is its reasoning items (:func:`reasoning_items`), then
    its text as an assistant message, then one ``function_call`` item per
    call, then its compaction items (:func:`compaction_items`: the provider
    compacts after answering); a tool turn is a ``function_call_output`` item.
    """
    check_supported_parts(messages, BACKEND, SUPPORTED_PARTS)
    system = [m.content for m in messages if m.role is Role.SYSTEM]
    items: list[dict[str, Any]] = []
    for message in messages:
        if message.role is Role.SYSTEM:
            continue
        if message.role is Role.TOOL:
            output: str | list[dict[str, Any]] = (
                [input_part(part) for part in message.parts]
                if message.parts is not None
                else message.content
            )
            items.append(
                {"type": "function_call_output", "call_id": message.tool_call_id, "output": output}
            )
            continue
        if message.role is Role.USER:
            content: str | list[dict[str, Any]] = (
                [input_part(part) for part in message.parts]
                if message.parts is not None
                else message.content
            )
            items.append({"role": "user", "content": content})
            continue
        items.extend(reasoning_items(message.reasoning))
        # The ids of the items that followed a reasoning item, by call id (None: the text).
        item_ids = {
            part.call_id: part.data
            for part in _mine(message.reasoning)
            if part.kind is ReasoningKind.SIGNATURE
        }
        if message.content:
            items.append(_assistant_text(message.content, item_ids.get(None)))
        for call in message.tool_calls or ():
            item: dict[str, Any] = {"type": "function_call", "call_id": call.id}
            item.update(name=call.name, arguments=call.arguments_json)
            if item_ids.get(call.id):
                item["id"] = item_ids[call.id]
            items.append(item)
        items.extend(compaction_items(message.reasoning))
    return "\n\n".join(system), items


def _assistant_text(text: str, item_id: str | None) -> dict[str, Any]:
    """An assistant turn's text: the output message it came as when its id was kept."""
    if item_id is None:
        return {"role": "assistant", "content": text}
    part = {"type": "output_text", "text": text, "annotations": []}
    return {
        "type": "message",
        "id": item_id,
        "role": "assistant",
        "status": "completed",
        "content": [part],
    }
