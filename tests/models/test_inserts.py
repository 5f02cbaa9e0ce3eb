"""``insert_rows``: the rows ``bulk_create`` writes, in one composed statement."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from llm_conversations.conversations import create_conversation
from llm_conversations.models import Message, Run, RunEvent, RunEventType
from llm_conversations.models.inserts import insert_rows

pytestmark = pytest.mark.django_db

CALL = {"id": "a", "type": "function", "function": {"name": "f", "arguments": {"q": "é"}}}
REASONING = [{"provider": "anthropic", "kind": "thinking", "text": "t", "data": "sig"}]


def _message_fields(conversation: Any, run: Run, position: int) -> dict[str, Any]:
    """An assistant turn using every kind of column: JSON, decimals, foreign keys, nulls."""
    return {
        "conversation": conversation,
        "position": position,
        "role": "assistant",
        "content": "plain ünïcode \u2028 text",
        "tool_calls": [CALL],
        "reasoning": REASONING,
        "run": run,
        "provider": "anthropic",
        "model": "m",
        "finish_reason": "tool_calls",
        "input_tokens": 7,
        "output_tokens": 3,
        "total_tokens": 10,
        "cost": Decimal("0.0000012345"),
        "metadata": {"nested": {"list": [1, None, True]}},
    }


def _stored(rows: list[Message]) -> list[dict[str, Any]]:
    values = Message.objects.filter(pk__in=[r.pk for r in rows]).values()
    return [
        {k: v for k, v in row.items() if k not in ("id", "position", "created_at")}
        for row in values
    ]


def test_messages_are_stored_as_bulk_create_stores_them() -> None:
    conversation = create_conversation()
    run = Run.objects.create(conversation=conversation)
    ours = insert_rows([Message(**_message_fields(conversation, run, 0))])
    django = Message.objects.bulk_create([Message(**_message_fields(conversation, run, 1))])
    assert _stored(ours) == _stored(django)
    assert ours[0]._state.adding is False
    assert ours[0]._state.db == "default"
    assert Message.objects.get(pk=ours[0].pk).created_at is not None


def test_events_get_the_ids_the_database_gave_them_in_one_statement() -> None:
    run = Run.objects.create(conversation=create_conversation())
    events = [
        RunEvent(run=run, type=RunEventType.TEXT_DELTA, data={"delta": str(n)}) for n in range(3)
    ]
    with CaptureQueriesContext(connection) as queries:
        insert_rows(events)
    assert len(queries) == 1
    stored = list(RunEvent.objects.filter(run=run).order_by("id").values_list("id", "data"))
    assert stored == [(e.id, e.data) for e in events]
    assert [e.data["delta"] for e in events] == ["0", "1", "2"]


def test_a_refused_row_stores_none_of_them() -> None:
    conversation = create_conversation()
    rows = [
        Message(conversation=conversation, position=0, role="user", content="a"),
        Message(conversation=conversation, position=0, role="user", content="b"),
    ]
    with pytest.raises(IntegrityError), transaction.atomic():
        insert_rows(rows)
    assert not Message.objects.filter(conversation=conversation).exists()


def test_nothing_to_insert_sends_nothing() -> None:
    with CaptureQueriesContext(connection) as queries:
        assert insert_rows([]) == []
    assert not queries
