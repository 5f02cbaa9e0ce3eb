"""An OpenAI Agents SDK ``Session`` on this app's tables (the ``agents`` extra).

``ConversationSession(session_id, owner=user)`` is a session of the SDK's
protocol (``get_items``, ``add_items``, ``pop_item``, ``clear_session``) whose
items are a conversation's typed turns (:mod:`.agents_items` says how), stored
through the store's rules: what an agent says shows in the admin, the API,
shares and exports, and the app's own loop can continue it, and the SDK what
the loop said. Which conversation a session id names, and what clearing one
does: :mod:`.sessions`.

The protocol's methods are coroutines; each runs its database work through
``sync_to_async`` (thread-sensitive), so call ``Runner.run`` from async code, or
``async_to_sync(Runner.run)`` from sync code, as Django's async guide says.
The ``*_sync`` methods are the same for sync code that uses the session itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Self, cast

from agents.memory import SessionSettings
from asgiref.sync import sync_to_async
from django.db import transaction

from llm_conversations.conversations.attachments import load_attachment_data
from llm_conversations.conversations.history import load_history
from llm_conversations.conversations.store import append_messages
from llm_conversations.conversations.tail import change_last_turn
from llm_conversations.conversations.transfer.import_attachments import (
    discard_files,
    store_attachments,
)
from llm_conversations.core.messages import ChatMessage, Role
from llm_conversations.frameworks.agents_items import (
    BACKEND,
    Item,
    items_of,
    turns_of,
    without_last_item,
)
from llm_conversations.frameworks.sessions import SessionConversation
from llm_conversations.models import Conversation
from llm_conversations.users import User

if TYPE_CHECKING:
    from agents.items import TResponseInputItem

__all__ = ["ConversationSession"]


class ConversationSession:
    """The Agents SDK session ``session_id`` of ``owner``, kept as a conversation.

    ``title`` names the conversation its first write creates. ``reasoning_provider``
    tags the reasoning of the agent's model (``openai_responses``, the backend
    that made it, for a Responses model): only that backend is sent it again.
    ``session_settings`` are the SDK's (``limit``: how many items ``get_items``
    returns when given none).
    """

    def __init__(
        self,
        session_id: str,
        *,
        owner: User | None = None,
        title: str = "",
        reasoning_provider: str = BACKEND,
        session_settings: SessionSettings | None = None,
    ) -> None:
        self.conversation = SessionConversation(session_id, owner, title=title)
        self.session_id = session_id
        self.reasoning_provider = reasoning_provider
        self.session_settings = session_settings or SessionSettings()

    @classmethod
    def of(cls, conversation: Conversation, **options: Any) -> Self:
        """The session of a conversation (its id is the session id), for its owner."""
        return cls(str(conversation.pk), owner=conversation.owner, **options)

    # Sync -----------------------------------------------------------------

    def get_items_sync(self, limit: int | None = None) -> list[Item]:
        """The items the model is shown, oldest first; the latest ``limit`` when given
        (else ``session_settings.limit``). Hidden messages are left out."""
        if limit is None:
            limit = self.session_settings.limit
        found = self.conversation.find()
        if found is None or limit == 0:
            return []
        messages, hidden = load_history(found)
        shown = [message for index, message in enumerate(messages) if index not in hidden]
        items = items_of(load_attachment_data(shown), self.reasoning_provider)
        return items[-limit:] if limit is not None and limit > 0 else items

    def add_items_sync(self, items: Sequence[Mapping[str, Any]]) -> None:
        """Store ``items`` as turns, in one transaction; nothing is stored when one is
        refused (``InvalidMessage``, naming the item).

        Assistant items right after the conversation's last turn, an assistant
        turn, go on that turn (what a popped call or text put back does).
        """
        if not items:
            return
        turns: list[ChatMessage] = []

        def extend(last: ChatMessage) -> ChatMessage:
            continuing = last if last.role is Role.ASSISTANT else None
            turns.extend(turns_of(items, self.reasoning_provider, continuing))
            if continuing is None:
                return last
            extended = turns.pop(0)
            return last if extended == last else extended

        with transaction.atomic():
            conversation = self.conversation.for_writing()
            if change_last_turn(conversation, extend) is None:
                turns.extend(turns_of(items, self.reasoning_provider))
            stored, created = store_attachments(self.conversation.owner, turns, {})
            try:
                append_messages(conversation, stored)
            except BaseException:
                discard_files(created)
                raise

    def pop_item_sync(self) -> Item | None:
        """Take back the latest item and return it (``None`` when there is none).

        The last turn loses that item: a call, its text or a reasoning item go from
        it in its row; a turn left with no item is removed, as a rolled-back run's
        turns are. ``ConversationBusy`` while a run of the conversation is active.
        """
        found = self.conversation.find()
        while found is not None:
            popped: list[Item] = []
            if change_last_turn(found, partial(self._without_last, popped)) is None:
                return None
            if popped:
                return popped[0]
            # A turn that made no item (reasoning shown only) went with it; on to the next.
        return None

    def _without_last(self, popped: list[Item], turn: ChatMessage) -> ChatMessage | None:
        """What remains of ``turn`` less its last item, which goes into ``popped``."""
        popped.extend(items_of(load_attachment_data([turn]), self.reasoning_provider)[-1:])
        return without_last_item(turn, self.reasoning_provider) if popped else None

    def clear_session_sync(self) -> None:
        """Move the conversation to the trash; the next item starts a new one."""
        self.conversation.clear()

    # The Session protocol -------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """See :meth:`get_items_sync`."""
        items = await sync_to_async(self.get_items_sync)(limit)
        return cast("list[TResponseInputItem]", items)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """See :meth:`add_items_sync`."""
        await sync_to_async(self.add_items_sync)(cast("list[Mapping[str, Any]]", items))

    async def pop_item(self) -> TResponseInputItem | None:
        """See :meth:`pop_item_sync`."""
        return cast("TResponseInputItem | None", await sync_to_async(self.pop_item_sync)())

    async def clear_session(self) -> None:
        """See :meth:`clear_session_sync`."""
        await sync_to_async(self.clear_session_sync)()
