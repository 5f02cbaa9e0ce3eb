"""The checks a stored conversation passes, whoever wrote it: the app's own loop or
another framework through ``llm_conversations.frameworks``.

- every row passes ``Message.full_clean()`` (the message rules, as the admin applies them);
- read back through the store's loader, the whole history keeps the sequence rules
  from its first turn (``check_sequence``), every call answered exactly once;
- positions are gap-free and the conversation's ``message_count`` is their number;
- the full-fidelity export of it reads back into the same messages (the importer
  applies the store's rules once more).
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction

from llm_conversations.conversations import load_messages
from llm_conversations.conversations.transfer.export import full_records, select_conversations
from llm_conversations.conversations.transfer.importing import Importer
from llm_conversations.core.messages import ChatMessage, Role
from llm_conversations.core.sequence import check_sequence
from llm_conversations.models import Conversation, Message

__all__ = ["assert_holds_together"]


class _RolledBack(Exception):
    pass


def assert_holds_together(conversation_id: Any) -> list[ChatMessage]:
    """Assert the checks of the module; the conversation's messages."""
    conversation = Conversation.objects.get(pk=conversation_id)
    rows = list(Message.objects.filter(conversation=conversation).order_by("position"))
    for row in rows:
        row.full_clean()
    assert [row.position for row in rows] == list(range(len(rows)))
    assert conversation.message_count == len(rows)
    history = load_messages(conversation)
    assert check_sequence(history) == ()
    calls = [call.id for message in history for call in message.tool_calls or ()]
    results = [message.tool_call_id for message in history if message.role is Role.TOOL]
    assert sorted(calls) == sorted(results), "every call has exactly one result"
    assert _exported_and_imported(conversation) == history
    return history


def _exported_and_imported(conversation: Conversation) -> list[ChatMessage]:
    """The messages of the conversation's full export imported as a new conversation
    (in a transaction rolled back after)."""
    (record,) = full_records(select_conversations().filter(pk=conversation.pk))
    # A copy under new ids, without the runs and ratings whose ids the original holds.
    record = {**record, "id": str(uuid.uuid4()), "runs": []}
    for message in record["messages"]:
        message.update(id=str(uuid.uuid4()), run=None, feedback=[])
    imported: list[ChatMessage] = []
    try:
        with transaction.atomic():
            importer = Importer(default_owner=conversation.owner, strict=True)
            copy = importer.import_record(record)
            assert copy is not None
            imported = load_messages(copy)
            raise _RolledBack
    except _RolledBack:
        pass
    return imported
