"""Create, archive, trash, restore and delete conversations; hide messages from
the model.

- **Archived** (``archived_at``): left out of the default list, otherwise as
  before (runs, appends, edits).
- **Trashed** (``trashed_at``): read-only until restored. The store refuses
  appends and run starts with ``ConversationTrashed`` (409
  ``conversation_trashed``); :func:`trash_conversation` is refused while a run
  is active (``ConversationBusy``), as a delete is. The purge
  (:func:`llm_conversations.conversations.retention.purge_trashed_conversations`)
  deletes it ``TRASH_RETENTION_DAYS`` after it was trashed.
- **Deleted** (:func:`delete_conversation`): gone for good with its messages
  and runs, from the trash or not; refused while a run is active.
- **Hidden** messages (``hidden_at``, ``hidden_reason``) stay stored for audit
  and are left out of what the model is sent
  (:func:`~llm_conversations.conversations.history.load_history`). A tool group,
  the assistant turn that made calls and the tool turns that answer them, is
  hidden and shown whole, so what the model sees keeps every call paired with
  its result; a group whose calls are not all answered cannot be hidden.

Every change is one conditional ``UPDATE`` (or, where a run might start at the
same moment, done under the conversation's row lock), so two clients racing
leave one outcome; none moves ``updated_at``, the last activity.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from llm_conversations.conversations.history import (
    ConversationRef,
    conversation_pk,
    unanswered_call_ids,
)
from llm_conversations.conversations.locks import lock_for_change, lock_idle_conversation
from llm_conversations.conversations.store import append_messages
from llm_conversations.core.messages import (
    ChatMessage,
    InvalidMessage,
    MessageInput,
    Role,
    as_chat_messages,
)
from llm_conversations.exceptions import ConversationTrashed
from llm_conversations.models import Conversation, ConversationSummary, Message
from llm_conversations.users import User

__all__ = [
    "HIDDEN_REASON_CHARS",
    "archive_conversation",
    "check_not_trashed",
    "create_conversation",
    "delete_conversation",
    "hide_message",
    "in_state",
    "restore_conversation",
    "tool_group_positions",
    "tool_groups",
    "trash_conversation",
    "unarchive_conversation",
    "unhide_message",
]

HIDDEN_REASON_CHARS = 500
"""The longest reason a hidden message keeps (the ``hidden_reason`` column)."""


def in_state(
    conversations: QuerySet[Conversation], *, archived: bool | None, trashed: bool
) -> QuerySet[Conversation]:
    """``conversations`` in the trash (``trashed``) or not, archived or not
    (``archived``; ``None``: either)."""
    conversations = conversations.filter(trashed_at__isnull=not trashed)
    if archived is None:
        return conversations
    return conversations.filter(archived_at__isnull=not archived)


def check_not_trashed(conversation: Conversation) -> None:
    """Raise ``ConversationTrashed`` for a conversation in the trash (an edit of its
    title or metadata; the store checks appends and run starts under its lock)."""
    if conversation.trashed_at is not None:
        raise ConversationTrashed()


def archive_conversation(conversation: ConversationRef) -> None:
    """Archive a conversation (one already archived keeps its first ``archived_at``).
    Raises ``ConversationTrashed`` from the trash."""
    _set_archived(conversation_pk(conversation), timezone.now())


def unarchive_conversation(conversation: ConversationRef) -> None:
    """Bring an archived conversation back to the list (a no-op for one that is not).
    Raises ``ConversationTrashed`` from the trash."""
    _set_archived(conversation_pk(conversation), None)


def _set_archived(pk: uuid.UUID, when: datetime | None) -> None:
    rows = Conversation.objects.filter(pk=pk, trashed_at__isnull=True)
    if rows.filter(archived_at__isnull=when is not None).update(archived_at=when):
        return
    # Nothing changed: already so, or in the trash.
    if Conversation.objects.filter(pk=pk, trashed_at__isnull=False).exists():
        raise ConversationTrashed()


def trash_conversation(conversation: ConversationRef) -> None:
    """Move a conversation to the trash (one already there keeps its first
    ``trashed_at``). Raises ``ConversationBusy`` while a run is active.

    Under the conversation's row lock, as a run start takes it: a run that
    started first makes this wait and then refuse, and a start after it finds
    the conversation trashed.
    """
    pk = conversation_pk(conversation)
    with transaction.atomic():
        lock_idle_conversation(pk, trashed=True)
        Conversation.objects.filter(pk=pk, trashed_at__isnull=True).update(
            trashed_at=timezone.now()
        )


def restore_conversation(conversation: ConversationRef) -> bool:
    """Take a conversation out of the trash (archived, it stays archived);
    ``False`` when it was not in the trash."""
    pk = conversation_pk(conversation)
    return bool(
        Conversation.objects.filter(pk=pk, trashed_at__isnull=False).update(trashed_at=None)
    )


def tool_groups(messages: Sequence[ChatMessage]) -> Iterator[range]:
    """The indexes of each tool group of ``messages``: an assistant turn with
    calls and the tool turns right after it, hidden or shown together."""
    index = 0
    while index < len(messages):
        end = index + 1
        if messages[index].role == Role.ASSISTANT and messages[index].tool_calls:
            while end < len(messages) and messages[end].role == Role.TOOL:
                end += 1
            yield range(index, end)
        index = end


def tool_group_positions(conversation: ConversationRef, position: int) -> range:
    """The positions hidden or shown with the message at ``position``: its tool
    group (the assistant turn with calls and the tool turns after it) if it
    belongs to one, else itself."""
    pk = conversation_pk(conversation)
    rows = Message.objects.filter(conversation_id=pk)
    role, calls = rows.values_list("role", "tool_calls").get(position=position)
    start = position
    if role == Role.TOOL:
        start = (
            rows.filter(role=Role.ASSISTANT, position__lt=position)
            .order_by("-position")
            .values_list("position", flat=True)
            .first()
        ) or 0
    elif role != Role.ASSISTANT or calls is None:
        return range(position, position + 1)
    end = (
        rows.filter(position__gt=start)
        .exclude(role=Role.TOOL)
        .order_by("position")
        .values_list("position", flat=True)
        .first()
    )
    if end is None:
        end = Conversation.objects.values_list("message_count", flat=True).get(pk=pk)
    return range(start, end)


def hide_message(
    conversation: ConversationRef, message: Message, reason: str = ""
) -> list[Message]:
    """Hide ``message`` (with its tool group) from the transcript the model sees;
    return the group's rows. Messages already hidden keep their time and reason.

    Refused in the trash (``ConversationTrashed``), while a run is active
    (``ConversationBusy``: the run would see a different conversation from one
    round to the next), and for a group whose calls are not all answered
    (``InvalidMessage`` ``unanswered_tool_calls``: the results to come would
    answer a call the model was never shown). The stored summaries that cover
    the group are deleted, so none carries its text to the model.
    """
    return _change_hidden(conversation, message, reason[:HIDDEN_REASON_CHARS], hide=True)


def unhide_message(conversation: ConversationRef, message: Message) -> list[Message]:
    """Show ``message`` (with its tool group) to the model again; the rules of
    :func:`hide_message`."""
    return _change_hidden(conversation, message, "", hide=False)


def _change_hidden(
    conversation: ConversationRef, message: Message, reason: str, *, hide: bool
) -> list[Message]:
    pk = conversation_pk(conversation)
    with transaction.atomic():
        count = lock_idle_conversation(pk)
        group = tool_group_positions(pk, message.position)
        if hide and group.stop == count and unanswered_call_ids(pk):
            raise InvalidMessage(
                "unanswered_tool_calls",
                "these tool calls are not all answered yet; answer them before hiding them.",
                field="message_id",
            )
        rows = Message.objects.filter(conversation_id=pk, position__in=group)
        if hide:
            rows.filter(hidden_at__isnull=True).update(
                hidden_at=timezone.now(), hidden_reason=reason
            )
        else:
            rows.update(hidden_at=None, hidden_reason="")
        # A summary made before (or while) the group was hidden would tell the
        # model what it should (or should no longer) leave out.
        ConversationSummary.objects.filter(
            conversation_id=pk, end_position__gt=group.start
        ).delete()
        return list(rows.order_by("position"))


def create_conversation(
    *,
    owner: User | None = None,
    title: str = "",
    metadata: dict[str, Any] | None = None,
    messages: Iterable[MessageInput] = (),
) -> Conversation:
    """Create a conversation, optionally with its first messages, atomically."""
    initial = as_chat_messages(messages)
    with transaction.atomic():
        conversation = Conversation.objects.create(
            owner=owner, title=title, metadata=metadata or {}
        )
        if initial:
            append_messages(conversation, initial)
            conversation.refresh_from_db(fields=["message_count", "updated_at"])
    return conversation


def delete_conversation(conversation: ConversationRef) -> None:
    """Delete a conversation for good with its messages and runs, from the trash
    or not; refused while a run is active.

    Raises ``ConversationBusy`` or ``Conversation.DoesNotExist``.
    """
    conversation_id = conversation_pk(conversation)
    with transaction.atomic():
        lock_for_change(conversation_id, None, trashed=True)
        Conversation.objects.filter(pk=conversation_id).delete()
