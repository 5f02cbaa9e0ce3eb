"""The rules of a sequence of messages: every tool call answered, in order.

A tool turn answers an unanswered call of the nearest preceding assistant turn
with calls, and every call is answered before the next system, user or
assistant turn. The store applies them to every append
(:mod:`llm_conversations.conversations.store`); no Django, no httpx.
"""

from __future__ import annotations

from collections.abc import Sequence

from llm_conversations.core.messages import ChatMessage, Role
from llm_conversations.exceptions import InvalidMessage

__all__ = ["check_sequence", "unanswered_tool_call_ids"]


def unanswered_tool_call_ids(messages: Sequence[ChatMessage]) -> tuple[str, ...]:
    """Ids of the calls of the last assistant turn not answered by a later tool turn.

    Only the tail from the last assistant turn on matters, so callers may pass
    just that tail instead of the whole history.
    """
    pending: tuple[str, ...] = ()
    for message in messages:
        if message.role is Role.ASSISTANT:
            pending = tuple(c.id for c in message.tool_calls or ())
        elif message.role is Role.TOOL:
            pending = tuple(i for i in pending if i != message.tool_call_id)
    return pending


def check_sequence(
    messages: Sequence[ChatMessage], *, pending: Sequence[str] = ()
) -> tuple[str, ...]:
    """Check that ``messages`` may follow a history whose unanswered calls are ``pending``.

    A tool turn must answer an unanswered call of the nearest preceding
    assistant tool-call turn, and every call must be answered before the next
    system, user or assistant turn. Returns the calls still unanswered after
    ``messages``; raises :class:`InvalidMessage` naming the message index.
    """
    open_ids = list(pending)
    for index, message in enumerate(messages):
        if message.role is Role.TOOL:
            if message.tool_call_id not in open_ids:
                detail = (
                    f"; unanswered calls: {', '.join(open_ids)}"
                    if open_ids
                    else "; no tool call is waiting for a result"
                )
                raise InvalidMessage(
                    "unexpected_tool_result",
                    f"tool result for {message.tool_call_id!r} answers no unanswered call "
                    f"of the preceding assistant turn{detail}.",
                    field=f"messages[{index}].tool_call_id",
                )
            open_ids.remove(message.tool_call_id)
            continue
        if open_ids:
            raise InvalidMessage(
                "unanswered_tool_calls",
                f"a {message.role} message cannot follow while tool calls are unanswered: "
                f"{', '.join(open_ids)}.",
                field=f"messages[{index}]",
            )
        if message.tool_calls:
            open_ids = [call.id for call in message.tool_calls]
    return tuple(open_ids)
