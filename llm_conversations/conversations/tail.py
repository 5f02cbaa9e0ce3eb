"""Changing a conversation's tail: removing a rolled-back run's turns, and changing
or removing its last turn.

Only the conversation's last turns change, under its row lock and never while
a run is active (``ConversationBusy``) or from the trash
(``ConversationTrashed``), so positions stay gap-free. A removed turn is gone
for good, its ratings with it; the summaries that covered a changed or removed
turn go too, and a share link made before no longer shows a removed one.
Appending is the store's (:mod:`~llm_conversations.conversations.store`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from django.db import transaction
from django.utils import timezone

from llm_conversations.conversations.history import (
    ConversationRef,
    conversation_pk,
    stored_message,
    tail_messages,
)
from llm_conversations.conversations.locks import lock_conversation, lock_for_change
from llm_conversations.conversations.storable import check_storable
from llm_conversations.core.messages import ChatMessage
from llm_conversations.core.sequence import check_sequence, unanswered_tool_call_ids
from llm_conversations.models import (
    MESSAGE_COLUMNS,
    Conversation,
    ConversationSummary,
    Message,
    Run,
)

__all__ = ["change_last_turn", "remove_run_turns"]


def _remove_from(conversation_id: uuid.UUID, first: int) -> None:
    """Remove the turns from position ``first`` on, the summaries over any of them,
    and count what remains (under the conversation's lock)."""
    Message.objects.filter(conversation_id=conversation_id, position__gte=first).delete()
    ConversationSummary.objects.filter(
        conversation_id=conversation_id, end_position__gt=first
    ).delete()
    Conversation.objects.filter(pk=conversation_id).update(
        message_count=first, updated_at=timezone.now()
    )


def remove_run_turns(conversation: ConversationRef, run: Run) -> int | None:
    """Remove the turns ``run`` stored (its user turn and all after it), in the caller's
    transaction, which ended the run; how many were removed, or ``None`` when a
    turn after its first is not its own (nothing is removed then).

    For a run that is no longer wanted (the busy strategy ``rollback``):
    positions stay gap-free, as the turns are the conversation's last, and the
    summaries that covered any of them go too.
    """
    conversation_id = conversation_pk(conversation)
    count = lock_conversation(conversation_id)
    first = (
        Message.objects.filter(conversation_id=conversation_id, run=run)
        .order_by("position")
        .values_list("position", flat=True)
        .first()
    )
    if first is None:
        return 0
    if (
        Message.objects.filter(conversation_id=conversation_id, position__gte=first)
        .exclude(run=run)
        .exists()
    ):
        return None
    _remove_from(conversation_id, first)
    return count - first


def change_last_turn(
    conversation: ConversationRef, change: Callable[[ChatMessage], ChatMessage | None]
) -> ChatMessage | None:
    """Change the conversation's last turn and return it as it was (``None`` for an
    empty conversation, where ``change`` is not called).

    ``change(turn)`` says what takes its place: ``None`` removes it, as a
    rolled-back run's turns are removed; ``turn`` itself keeps it as it is;
    another message takes its place in the same row, so its id, position,
    ratings and share links stay, checked as an append is (what the columns
    hold, the attachments it shows, the sequence rules after the turns before
    it). The summaries over a changed or removed turn go. In one transaction,
    under the lock; ``ConversationBusy`` while a run is active,
    ``ConversationTrashed`` in the trash.
    """
    conversation_id = conversation_pk(conversation)
    with transaction.atomic():
        count = lock_for_change(conversation_id, None)
        if not count:
            return None
        row = (
            Message.objects.filter(conversation_id=conversation_id, position=count - 1)
            .values("pk", *MESSAGE_COLUMNS)
            .get()
        )
        turn = stored_message(row)
        replacement = change(turn)
        if replacement is None:
            _remove_from(conversation_id, count - 1)
        elif replacement is not turn:
            check_storable(conversation_id, replacement)
            before = tail_messages(conversation_id, before=count - 1)
            check_sequence([replacement], pending=unanswered_tool_call_ids(before))
            Message.objects.filter(pk=row["pk"]).update(**_columns(replacement))
            ConversationSummary.objects.filter(
                conversation_id=conversation_id, end_position__gt=count - 1
            ).delete()
    return turn


def _columns(message: ChatMessage) -> dict[str, object]:
    """Every message column of a row holding ``message`` (``None`` where it has none)."""
    fields = Message.fields_from_chat_message(message)
    return {name: fields.get(name) for name in MESSAGE_COLUMNS}
