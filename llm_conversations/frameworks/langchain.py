"""A LangChain ``BaseChatMessageHistory`` over a conversation (the ``langchain`` extra).

``ConversationChatMessageHistory(session_id, owner=user)`` keeps a LangChain
history (``RunnableWithMessageHistory``'s, an agent's) as a conversation: each
message is read as the ``langchain`` import format reads it
(:mod:`llm_conversations.conversations.transfer.import_formats.langchain`) and stored
through the store's rules; what no turn keeps is refused (``InvalidMessage``
with the import's code), never dropped. Which conversation a session id names,
and what ``clear()`` does: :mod:`.sessions`.

Messages come back as LangChain messages whose ``id`` is the row's: system,
human (images as ``image_url`` blocks), AI (text, ``tool_calls``, the thinking
blocks LangChain gave, the model as ``response_metadata["model_name"]``,
``usage_metadata``) and tool messages (``status`` ``error`` for an error result).
Messages the staff hid are left out, as the app's loop leaves them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Self

from asgiref.sync import sync_to_async
from django.db import transaction
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
)

from llm_conversations.conversations.attachments import load_attachment_data
from llm_conversations.conversations.history import load_turns
from llm_conversations.conversations.store import Turn, append_turns
from llm_conversations.conversations.transfer.import_attachments import (
    discard_files,
    store_attachments,
)
from llm_conversations.conversations.transfer.import_formats.foreign_conversations import Transcript
from llm_conversations.conversations.transfer.import_formats.langchain import (
    REASONING_PROVIDER,
    read_message,
)
from llm_conversations.core.messages import ChatMessage, InvalidMessage, Role
from llm_conversations.core.reasoning import ReasoningKind
from llm_conversations.frameworks.sessions import SessionConversation
from llm_conversations.models import USAGE_COLUMNS, Conversation
from llm_conversations.users import User

__all__ = ["ConversationChatMessageHistory"]

_ROW_FIELDS = ("id", "hidden_at", "model", *USAGE_COLUMNS)


class ConversationChatMessageHistory(BaseChatMessageHistory):
    """The chat history ``session_id`` of ``owner``, kept as a conversation."""

    def __init__(self, session_id: str, *, owner: User | None = None, title: str = "") -> None:
        self.conversation = SessionConversation(session_id, owner, title=title)
        self.session_id = session_id

    @classmethod
    def of(cls, conversation: Conversation) -> Self:
        """The history of a conversation (its id is the session id), for its owner."""
        return cls(str(conversation.pk), owner=conversation.owner)

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The conversation as LangChain messages, oldest first."""
        found = self.conversation.find()
        if found is None:
            return []
        rows = [(c, row) for c, row in load_turns(found, *_ROW_FIELDS) if row["hidden_at"] is None]
        loaded = load_attachment_data([chat for chat, _ in rows])
        return [_message(chat, row) for chat, (_, row) in zip(loaded, rows, strict=True)]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Store ``messages`` as turns, in one transaction; nothing is stored when one
        is refused."""
        transcript = Transcript(REASONING_PROVIDER)
        for index, message in enumerate(messages):
            read_message(transcript, message_to_dict(message), f"messages[{index}]")
        transcript.end_turn()
        if transcript.left_out:
            note = transcript.left_out[0]
            raise InvalidMessage(note.code, note.message, field=note.field)
        read = transcript.messages
        if not read:
            return
        with transaction.atomic():
            conversation = self.conversation.for_writing()
            owner = self.conversation.owner
            stored, created = store_attachments(owner, [m.message for m in read], {})
            try:
                append_turns(
                    conversation,
                    [
                        Turn(m, model=r.model, usage=r.usage)
                        for m, r in zip(stored, read, strict=True)
                    ],
                )
            except BaseException:
                discard_files(created)
                raise

    def clear(self) -> None:
        """Move the conversation to the trash; the next message starts a new one."""
        self.conversation.clear()

    async def aget_messages(self) -> list[BaseMessage]:
        """:attr:`messages` from async code."""
        return await sync_to_async(lambda: self.messages)()

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """:meth:`add_messages` from async code."""
        await sync_to_async(self.add_messages)(messages)

    async def aclear(self) -> None:
        """:meth:`clear` from async code."""
        await sync_to_async(self.clear)()


def _message(chat: ChatMessage, row: dict[str, Any]) -> BaseMessage:
    """A row's turn as the LangChain message it stands for (its id the row's)."""
    message_id = str(row["id"])
    if chat.role is Role.SYSTEM:
        return SystemMessage(content=chat.content, id=message_id)
    if chat.role is Role.USER:
        content: Any = chat.to_wire()["content"]
        return HumanMessage(content=content, id=message_id)
    if chat.role is Role.TOOL:
        return ToolMessage(
            content=chat.content,
            tool_call_id=chat.tool_call_id or "",
            status="error" if chat.is_error else "success",
            id=message_id,
        )
    thinking = [
        {
            "type": "thinking",
            "thinking": part.text,
            **({"signature": part.data} if part.data else {}),
        }
        for part in chat.reasoning or ()
        if part.provider == REASONING_PROVIDER and part.kind is ReasoningKind.THINKING
    ]
    text: Any = chat.content
    if thinking:
        text = [*thinking, *([{"type": "text", "text": chat.content}] if chat.content else [])]
    calls = [c for c in chat.tool_calls or () if not c.malformed]
    invalid = [c for c in chat.tool_calls or () if c.malformed]
    extra: dict[str, Any] = {}
    if row["model"]:
        extra["response_metadata"] = {"model_name": row["model"]}
    if row["input_tokens"] is not None:
        extra["usage_metadata"] = _usage(row)
    return AIMessage(
        content=text,
        tool_calls=[
            {"name": c.name, "args": c.arguments, "id": c.id, "type": "tool_call"} for c in calls
        ],
        invalid_tool_calls=[
            {
                "name": c.name,
                "args": c.raw_arguments,
                "id": c.id,
                "error": None,
                "type": "invalid_tool_call",
            }
            for c in invalid
        ],
        id=message_id,
        **extra,
    )


def _usage(row: dict[str, Any]) -> dict[str, Any]:
    """The row's token columns as ``usage_metadata``."""
    usage: dict[str, Any] = {
        "input_tokens": row["input_tokens"],
        "output_tokens": row["output_tokens"] or 0,
        "total_tokens": row["total_tokens"] or 0,
    }
    cache = {"cache_read": row["cached_tokens"], "cache_creation": row["cache_write_tokens"]}
    if any(value is not None for value in cache.values()):
        usage["input_token_details"] = {k: v for k, v in cache.items() if v is not None}
    if row["reasoning_tokens"] is not None:
        usage["output_token_details"] = {"reasoning": row["reasoning_tokens"]}
    return usage
