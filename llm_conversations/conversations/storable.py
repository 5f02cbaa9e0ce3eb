"""What a message row can hold, checked before anything is stored: call ids
within the ``tool_call_id`` column, and text and JSON that every supported
database stores (:mod:`llm_conversations.core.text`); a turn stored later is
checked now, its attachments included (:func:`check_storable`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llm_conversations.conversations.attachments import check_references
from llm_conversations.conversations.history import ConversationRef, conversation_pk
from llm_conversations.core.messages import ChatMessage, InvalidMessage
from llm_conversations.core.text import json_problem
from llm_conversations.models import MAX_ID_CHARS

__all__ = ["check_storable", "check_storable_items"]


def check_storable_items(items: Sequence[tuple[ChatMessage, dict[str, Any]]]) -> None:
    """Refuse what the columns cannot hold of ``items`` (messages beside the other
    values of their rows), naming the field.

    Call ids longer than the ``tool_call_id`` column, and text or JSON that no
    supported database stores (see :mod:`llm_conversations.core.text`).
    """
    for index, (message, extra) in enumerate(items):
        values: dict[str, Any] = {
            "content": message.content,
            "tool_call_id": message.tool_call_id,
            "metadata": extra.get("metadata"),
        }
        for i, call in enumerate(message.tool_calls or ()):
            values[f"tool_calls[{i}].id"] = call.id
            values[f"tool_calls[{i}].function.name"] = call.name
            values[f"tool_calls[{i}].function.arguments"] = (
                call.raw_arguments if call.malformed else call.arguments
            )
        for name, value in values.items():
            if name.endswith("id") and value is not None and len(value) > MAX_ID_CHARS:
                raise InvalidMessage(
                    "invalid_tool_call_id",
                    f"tool call ids may have at most {MAX_ID_CHARS} characters.",
                    field=f"messages[{index}].{name}",
                )
            problem = json_problem(value, name)
            if problem is not None:
                raise InvalidMessage(
                    problem.code,
                    f"{problem.why} cannot be stored.",
                    field=f"messages[{index}].{problem.path}",
                )


def check_storable(conversation: ConversationRef, message: ChatMessage) -> None:
    """Refuse a turn to be stored later (a waiting run's) as appending it now would,
    but for the sequence rules, which apply when it is appended: what the
    columns cannot hold, and attachments the conversation's owner does not own."""
    check_storable_items([(message, {})])
    check_references(conversation_pk(conversation), [message])
