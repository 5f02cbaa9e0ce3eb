"""Which conversation a framework's session id names, and clearing one.

A session id names a conversation of one owner (``None``: conversations without
one): the owner's newest conversation outside the trash whose ``metadata`` has
``session_id`` set to it, else the conversation whose id it is (so a
conversation this app made is continued by passing its id). A session's first
write creates its conversation, tagged with the id; first writes of one owner
are serialised on the owner's row, so two at once make one conversation
(sessions without an owner have no row to serialise on: give them one where two
first writes may meet).

Clearing a session moves its conversation to the trash, as a user's delete
does: kept ``TRASH_RETENTION_DAYS`` and restorable, every turn in it; the next
write starts a new conversation under the same id.
"""

from __future__ import annotations

import uuid

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q

from llm_conversations.conversations.lifecycle import create_conversation, trash_conversation
from llm_conversations.core.text import json_problem
from llm_conversations.models import Conversation
from llm_conversations.users import User

__all__ = ["MAX_SESSION_ID_CHARS", "SESSION_KEY", "SessionConversation"]

SESSION_KEY = "session_id"
"""The key of ``Conversation.metadata`` that holds the session id."""
MAX_SESSION_ID_CHARS = 255


class SessionConversation:
    """The conversation of ``session_id`` for ``owner`` (see the module)."""

    def __init__(self, session_id: str, owner: User | None = None, *, title: str = "") -> None:
        if not isinstance(session_id, str) or not session_id:
            raise ValueError("a session id is a non-empty string.")
        if len(session_id) > MAX_SESSION_ID_CHARS or json_problem(session_id) is not None:
            raise ValueError(
                f"a session id holds at most {MAX_SESSION_ID_CHARS} storable characters."
            )
        self.session_id = session_id
        self.owner = owner
        self.title = title

    def _candidates(self) -> Q:
        named = Q(**{f"metadata__{SESSION_KEY}": self.session_id})
        try:
            return named | Q(pk=uuid.UUID(self.session_id))
        except ValueError:
            return named

    def find(self) -> uuid.UUID | None:
        """The conversation's id, ``None`` while the session has none (one query)."""
        owned = (
            Conversation.objects.filter(owner=self.owner)
            if self.owner is not None
            else Conversation.objects.filter(owner__isnull=True)
        )
        found: uuid.UUID | None = (
            owned.filter(self._candidates(), trashed_at__isnull=True)
            .order_by("-created_at")
            .values_list("pk", flat=True)
            .first()
        )
        return found

    def for_writing(self) -> uuid.UUID:
        """The conversation's id, created (tagged with the session id) if there is none."""
        found = self.find()
        if found is not None:
            return found
        with transaction.atomic():
            if self.owner is not None:
                users = get_user_model()._default_manager
                list(users.select_for_update().filter(pk=self.owner.pk).values_list("pk"))
                found = self.find()
                if found is not None:
                    return found
            conversation = create_conversation(
                owner=self.owner, title=self.title, metadata={SESSION_KEY: self.session_id}
            )
        return conversation.pk

    def clear(self) -> None:
        """Move the conversation to the trash; nothing to do while there is none.
        Raises ``ConversationBusy`` while a run of it is active."""
        found = self.find()
        if found is not None:
            trash_conversation(found)
