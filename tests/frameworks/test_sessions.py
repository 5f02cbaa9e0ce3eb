"""Session ids and their conversations, shared by the Agents SDK session and the LangChain
history: concurrent first writes of one owner make one conversation."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from llm_conversations.conversations import create_conversation
from llm_conversations.frameworks import sessions
from llm_conversations.frameworks.sessions import MAX_SESSION_ID_CHARS, SessionConversation
from llm_conversations.models import Conversation
from tests.conftest import requires_postgresql, run_together


@requires_postgresql
@pytest.mark.django_db(transaction=True)
def test_first_writes_at_once_make_one_conversation(monkeypatch: pytest.MonkeyPatch) -> None:
    owner = get_user_model().objects.create_user("alice")

    def slow_create(**fields: Any) -> Conversation:
        time.sleep(0.2)  # every writer has looked before the first one creates
        return create_conversation(**fields)

    monkeypatch.setattr(sessions, "create_conversation", slow_create)
    made = run_together(4, lambda n: SessionConversation("s", owner).for_writing())
    assert len(set(made)) == 1, made
    assert Conversation.objects.filter(owner=owner).count() == 1


@pytest.mark.parametrize("session_id", ["", "x" * (MAX_SESSION_ID_CHARS + 1), "nul\x00"])
def test_a_session_id_that_no_conversation_could_hold_is_refused(session_id: str) -> None:
    with pytest.raises(ValueError, match="session id"):
        SessionConversation(session_id)
