"""Forks of a conversation, and the edits and regenerations made with them.

A fork is a new conversation holding copies of the start of another one (the
rows are copied by :func:`~llm_conversations.conversations.forks.fork_conversation`);
the original is never changed. An edit forks before a user turn and starts a
run with the new text; a regeneration forks before the user turn an answer
replies to and starts a run with that same turn, so the answer (with any tool
rounds it took) is made again, by the same or another provider. Fork and run
start are one transaction: a refused start leaves no fork behind.
"""

from __future__ import annotations

import uuid
from typing import Unpack

from django.db import transaction

from llm_conversations.conversations.forks import fork_conversation
from llm_conversations.conversations.history import ConversationRef, conversation_pk
from llm_conversations.core.messages import ChatMessage, MessageInput, Role
from llm_conversations.exceptions import ForkError
from llm_conversations.models import Conversation, Message, Run
from llm_conversations.runs.options import RunOptions
from llm_conversations.runs.service import ToolLoopService

__all__ = ["edit_message", "fork", "regenerate"]


def _source(conversation: ConversationRef) -> Conversation:
    if isinstance(conversation, Conversation):
        return conversation
    return Conversation.objects.get(pk=conversation_pk(conversation))


def _message(source: Conversation, message_id: uuid.UUID | str) -> tuple[int, str]:
    """The position and role of a message of ``source``; ``ForkError`` when it has none."""
    try:
        found = (
            Message.objects.filter(conversation_id=source.pk, pk=uuid.UUID(str(message_id)))
            .values_list("position", "role")
            .first()
        )
    except ValueError:
        found = None
    if found is None:
        raise ForkError(
            "unknown_message", "not a message of this conversation.", field="message_id"
        )
    return found


def fork(
    conversation: ConversationRef,
    message_id: uuid.UUID | str | None = None,
    *,
    title: str | None = None,
) -> Conversation:
    """Fork ``conversation`` through the message ``message_id`` (included), or whole.

    A fork that would separate tool calls from their results is refused
    (``ForkError`` ``inside_tool_group``), never moved: the caller said
    where, and either edge of the group is a history the caller did not ask
    for. ``title`` is the fork's (as the user's); without it the fork is named
    after its source (``conversations/forks.fork_title``).
    """
    source = _source(conversation)
    count = source.message_count if message_id is None else _message(source, message_id)[0] + 1
    return fork_conversation(source, count, title=title)


def edit_message(
    service: ToolLoopService,
    conversation: ConversationRef,
    message_id: uuid.UUID | str,
    message: MessageInput | str,
    **options: Unpack[RunOptions],
) -> Run:
    """Fork before the user turn ``message_id`` and start a run with ``message``
    instead; ``options`` go to :meth:`ToolLoopService.start` (``provider``,
    ``tools``, ``max_iterations``, ``background``, ...). Returns the queued run,
    whose ``conversation`` is the fork.
    """
    source = _source(conversation)
    position, role = _message(source, message_id)
    if role != Role.USER:
        raise ForkError("not_a_user_message", "only user turns can be edited.", field="message_id")
    with transaction.atomic():
        return service.start(fork_conversation(source, position), message, **options)


def regenerate(
    service: ToolLoopService,
    conversation: ConversationRef,
    message_id: uuid.UUID | str,
    **options: Unpack[RunOptions],
) -> Run:
    """Answer again the user turn that the assistant turn ``message_id`` replies to.

    The fork holds the history before that user turn, and the run stores the
    same turn again and answers it: every turn the first answer took (tool
    rounds included) is made anew. ``options`` as for :func:`edit_message`.
    """
    source = _source(conversation)
    position, role = _message(source, message_id)
    if role != Role.ASSISTANT:
        raise ForkError(
            "not_an_assistant_message",
            "only assistant turns can be regenerated.",
            field="message_id",
        )
    asked = (
        Message.objects.filter(conversation_id=source.pk, role=Role.USER, position__lt=position)
        .order_by("-position")
        .values_list("position", "content")
        .first()
    )
    if asked is None:
        raise ForkError(
            "nothing_to_regenerate",
            "no user turn comes before this answer.",
            field="message_id",
        )
    with transaction.atomic():
        copy = fork_conversation(source, asked[0])
        return service.start(copy, ChatMessage.user(asked[1]), **options)
