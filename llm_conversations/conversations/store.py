"""The conversation store: the one place that turns messages into rows and
appends them, and an imported history; a rolled-back run's turns and a
changed last turn are :mod:`~llm_conversations.conversations.tail`'s, making
and deleting a conversation
:mod:`~llm_conversations.conversations.lifecycle`'s.

Every append applies the conversation-level rules of what is stored:
call/result pairing and what the columns can hold
(:mod:`~llm_conversations.conversations.storable`). Appending locks the
conversation row (:mod:`~llm_conversations.conversations.locks`, which says who
may append or delete while a run is active), reads only the tail that the
pairing rules need (from the last assistant turn on,
:mod:`~llm_conversations.conversations.history`), and inserts the new rows in
one statement, so an append costs the same at any history length and
concurrent appenders get gap-free positions. Forks are made in
:mod:`~llm_conversations.conversations.forks`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from functools import partial
from typing import Any

from django.db import transaction
from django.utils import timezone

from llm_conversations.conversations.attachments import check_references, link_attachments
from llm_conversations.conversations.history import ConversationRef, conversation_pk, tail_messages
from llm_conversations.conversations.locks import (
    RunStopped,
    count_after,
    holds_lease,
    lock_by_counting,
    lock_for_change,
)
from llm_conversations.conversations.storable import check_storable_items
from llm_conversations.core.completions import CompletionResponse, FinishReason, Usage
from llm_conversations.core.messages import (
    ChatMessage,
    InvalidMessage,
    MessageInput,
    Role,
    as_chat_messages,
)
from llm_conversations.core.sequence import check_sequence, unanswered_tool_call_ids
from llm_conversations.models import Conversation, Message, Run
from llm_conversations.models.inserts import insert_rows
from llm_conversations.signals import message_appended

__all__ = [
    "Turn",
    "append_cancelled_reply",
    "append_completion",
    "append_for_run",
    "append_locked",
    "append_messages",
    "append_turns",
    "insert_history",
    "usage_columns",
]


def _append(
    conversation: ConversationRef,
    items: Sequence[tuple[ChatMessage, dict[str, Any]]],
    run: Run | None,
    history: Sequence[ChatMessage] | None = None,
    locked: int | None = None,
    run_locked: bool = False,
    held: bool = False,
    counted: bool = False,
) -> list[Message]:
    """The one append: ``locked``, under the caller's lock (:func:`append_locked`);
    with ``history``, the run's own (:func:`_append_known`), else the general path.
    ``counted``: the caller's lock counted the messages in (:func:`count_in`).
    ``held``: ``RunStopped`` (nothing stored) once ``run`` is not the
    conversation's active run under the lease this instance holds."""
    conversation_id = conversation_pk(conversation)
    messages = [message for message, _ in items]
    check_storable_items(items)
    check_references(conversation_id, messages)
    rows = None
    if locked is not None:
        count = locked
        rows = _insert_after_tail(conversation_id, count, items, history)
        if not counted:
            Conversation.objects.filter(pk=conversation_id).update(
                message_count=count + len(rows), updated_at=timezone.now()
            )
    elif history is not None and run is not None:
        count = len(history)
        rows = _append_known(conversation_id, items, run, history, run_locked=run_locked)
    if rows is None:
        with transaction.atomic():
            count = lock_by_counting(conversation_id, run, len(items))
            # Read under the lock: a cancel committed meanwhile is seen.
            if held and run is not None and not holds_lease(run):
                raise RunStopped  # undoes the count
            rows = _insert_after_tail(conversation_id, count, items)
    if isinstance(conversation, Conversation):
        conversation.message_count = count + len(rows)
    # Receivers hear of rows only once they are committed.
    transaction.on_commit(
        partial(
            message_appended.send, sender=Message, conversation_id=conversation_id, messages=rows
        )
    )
    return rows


def _insert_after_tail(
    conversation_id: uuid.UUID,
    count: int,
    items: Sequence[tuple[ChatMessage, dict[str, Any]]],
    history: Sequence[ChatMessage] | None = None,
) -> list[Message]:
    """Under the conversation's lock (``count`` messages): check the new turns
    against the stored tail and insert them. ``history``: those ``count``
    messages, read under the same lock, so the tail is not read again (nor for
    an empty conversation)."""
    if history is None or len(history) != count:
        history = tail_messages(conversation_id) if count else []
    check_sequence([message for message, _ in items], pending=unanswered_tool_call_ids(history))
    return _insert(conversation_id, count, items)


def _insert(
    conversation_id: uuid.UUID, count: int, items: Sequence[tuple[ChatMessage, dict[str, Any]]]
) -> list[Message]:
    rows = [
        Message(
            conversation_id=conversation_id,
            position=count + offset,
            **Message.fields_from_chat_message(message),
            **extra,
        )
        for offset, (message, extra) in enumerate(items)
    ]
    rows = insert_rows(rows)
    link_attachments(rows)
    return rows


def _append_known(
    conversation_id: uuid.UUID,
    items: Sequence[tuple[ChatMessage, dict[str, Any]]],
    run: Run,
    history: Sequence[ChatMessage],
    *,
    run_locked: bool = False,
) -> list[Message] | None:
    """Append after ``history``, the conversation as the appending run last saw it.

    Two statements instead of five: one conditional ``UPDATE`` locks the
    conversation row and confirms at once that ``history`` is still all of
    it (the count matches) and that ``run`` is its active run, under the lease
    this instance holds (``locks.holds_lease``), so the tail
    need not be read again. ``None`` when either does not hold: the caller
    then takes the general path, which reads what it needs. It runs in the
    caller's transaction (the loop's, which also changes the run) without a
    savepoint, so a refused append rolls that transaction back.
    ``run_locked``: that transaction has just updated ``run``'s row on the
    condition that it was running under this process's lease (it may have
    ended it since), which stands for the active-run check.
    """
    count = len(history)
    with transaction.atomic(savepoint=False):
        if not count_after(conversation_id, count, len(items), held=None if run_locked else run):
            return None
        check_sequence([message for message, _ in items], pending=unanswered_tool_call_ids(history))
        return _insert(conversation_id, count, items)


def append_for_run(
    run: Run,
    messages: Iterable[MessageInput],
    *,
    history: Sequence[ChatMessage] | None,
    metadata: Sequence[Mapping[str, Any]],
) -> list[Message] | None:
    """Append turns of ``run`` (its tools' results), the conversation's active run
    under the lease this instance holds, after ``history`` (as for
    :func:`append_messages`; ``metadata``: one dict per message); ``None``, and
    nothing stored, once the run is no longer so: cancelled, ended or taken over
    meanwhile. The conditional ``UPDATE`` that locks the conversation checks it,
    so the run's row is not written."""
    chat = as_chat_messages(messages)
    items = [
        (message, {"run": run, "metadata": dict(data)})
        for message, data in zip(chat, metadata, strict=True)
    ]
    try:
        return _append(run.conversation_id, items, run, history, held=True)
    except RunStopped:
        return None


def append_messages(
    conversation: ConversationRef,
    messages: Iterable[MessageInput],
    *,
    run: Run | None = None,
    metadata: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
    history: Sequence[ChatMessage] | None = None,
) -> list[Message]:
    """Append messages atomically after checking the conversation-level rules.

    Dicts are read with ``ChatMessage.from_dict``. ``metadata`` is one dict for
    every message or a list with one dict per message. Only ``run`` may append
    while it is active. ``history`` is for that run, appending in a
    transaction of its own: the conversation as it last saw it, which spares
    the append re-reading it (checked, never trusted: a stale one is ignored).
    Raises ``InvalidMessage`` (nothing is stored), ``ConversationBusy`` or
    ``Conversation.DoesNotExist``.
    """
    chat = as_chat_messages(messages)
    if metadata is None or isinstance(metadata, Mapping):
        per_message: Sequence[Mapping[str, Any]] = [metadata or {}] * len(chat)
    else:
        per_message = metadata
        if len(per_message) != len(chat):
            raise ValueError("metadata needs one dict per message.")
    items = [
        (message, {"run": run, "metadata": dict(data)})
        for message, data in zip(chat, per_message, strict=True)
    ]
    return _append(conversation, items, run, history)


def append_locked(
    conversation: ConversationRef,
    count: int,
    messages: Iterable[MessageInput],
    *,
    run: Run,
    metadata: Mapping[str, Any] | None = None,
    history: Sequence[ChatMessage] | None = None,
    counted: bool = False,
) -> list[Message]:
    """:func:`append_messages` in the caller's transaction, which holds the
    conversation's lock: ``count`` is what :func:`lock_conversation` or
    :func:`count_in` returned (``counted``: the latter, which counted these
    messages in already). ``ToolLoopService.start`` stores its run's user turn
    so, without locking and checking for an active run a second time;
    ``metadata`` goes on every message; ``history``, the conversation read
    under that lock, spares reading its tail."""
    items = [
        (message, {"run": run, "metadata": dict(metadata or {})})
        for message in as_chat_messages(messages)
    ]
    return _append(conversation, items, run, history, locked=count, counted=counted)


def append_completion(
    conversation: ConversationRef,
    response: CompletionResponse,
    *,
    run: Run | None = None,
    metadata: dict[str, Any] | None = None,
    parsed: Any = None,
    history: Sequence[ChatMessage] | None = None,
    cost: Decimal | None = None,
    run_locked: bool = False,
) -> Message:
    """Append the assistant turn of a provider reply with its provider, model, usage,
    cost and finish reason; a reply the adapter had to make storable is flagged
    ``sanitized``, one whose reasoning a turn could not hold whole records how
    many parts were left out (``reasoning_omitted``).

    ``parsed`` is a structured answer, read and validated (``Message.parsed``);
    ``run`` and ``history`` as for :func:`append_messages`. ``cost`` is the
    dollars the call cost (``model_info.call_cost()``), ``None`` if unknown.
    ``run_locked``: the caller's transaction updated ``run``'s row on the condition
    that it ran under the caller's lease (see :func:`_append_known`).
    """
    extra = {
        "parsed": parsed,
        "provider": response.provider,
        "model": response.model,
        "finish_reason": response.finish_reason.value,
        **usage_columns(response.usage),
        "cost": cost,
        "run": run,
        "metadata": {**(metadata or {}), **_reply_notes(response)},
    }
    message = response.to_message()
    return _append(conversation, [(message, extra)], run, history, run_locked=run_locked)[0]


def usage_columns(usage: Usage) -> dict[str, Any]:
    """The token columns of an assistant turn's row that hold ``usage`` (its fields' names)."""
    return asdict(usage)


@dataclass(frozen=True, slots=True)
class Turn:
    """A turn another framework's agent made, with what its row keeps beside the
    message: ``metadata``, and for an assistant turn the model, the provider, the
    usage and the finish reason it reported (the cost stays unknown)."""

    message: ChatMessage
    metadata: Mapping[str, Any] = field(default_factory=dict)
    model: str = ""
    provider: str = ""
    usage: Usage | None = None
    finish_reason: FinishReason | None = None


def append_turns(
    conversation: ConversationRef, turns: Sequence[Turn], *, run: Run | None = None
) -> list[Message]:
    """Append turns, as :func:`append_messages` appends (the same rules, the same
    lock), each row with the columns its :class:`Turn` holds; a model, usage or
    finish reason on another turn than an assistant one is refused
    (``usage_not_allowed``)."""
    items = []
    for index, turn in enumerate(turns):
        if turn.message.role is not Role.ASSISTANT and (
            turn.model or turn.provider or turn.usage or turn.finish_reason
        ):
            raise InvalidMessage(
                "usage_not_allowed",
                "a model, usage and finish reason belong to assistant turns only.",
                field=f"messages[{index}]",
            )
        extra = {"run": run, "metadata": dict(turn.metadata), "model": turn.model}
        extra["provider"] = turn.provider
        if turn.usage is not None:
            extra.update(usage_columns(turn.usage))
        if turn.finish_reason is not None:
            extra["finish_reason"] = turn.finish_reason.value
        items.append((turn.message, extra))
    return _append(conversation, items, run)


def _reply_notes(response: CompletionResponse) -> dict[str, Any]:
    """What the stored turn records of the reply's changes: ``sanitized``, ``reasoning_omitted``."""
    notes: dict[str, Any] = {"sanitized": True} if response.sanitized else {}
    if response.reasoning_omitted:
        notes["reasoning_omitted"] = response.reasoning_omitted
    return notes


def append_cancelled_reply(conversation: ConversationRef, text: str, *, run: Run) -> Message:
    """Append what a cancelled run's model had streamed as its assistant turn.

    Its finish reason is ``cancelled``; usage is unknown (the provider never
    finished), so it is left empty, as is the cost.
    """
    reply = Turn(
        ChatMessage.assistant(text),
        model=run.model,
        provider=run.provider,
        finish_reason=FinishReason.CANCELLED,
    )
    return append_turns(conversation, [reply], run=run)[0]


def insert_history(
    conversation: ConversationRef, items: Sequence[tuple[ChatMessage, dict[str, Any]]]
) -> list[Message]:
    """Store the whole history of an empty conversation in one statement (an import).

    The same rules as an append: the sequence is checked from the start
    (every call answered before the next turn), the columns must hold every
    value, and the conversation must be empty and without an active run.
    ``items`` pairs each message with the other column values of its row
    (``id``, ``run_id``, usage, ``metadata``, ...). No ``message_appended``
    signal: nothing new was said. Raises ``InvalidMessage`` (nothing is stored).
    """
    conversation_id = conversation_pk(conversation)
    check_storable_items(items)
    with transaction.atomic():
        if lock_for_change(conversation_id, None):
            raise InvalidMessage("not_empty", "history goes only into an empty conversation.")
        check_sequence([message for message, _ in items], pending=())
        check_references(conversation_id, [message for message, _ in items])
        rows = _insert(conversation_id, 0, items)
        Conversation.objects.filter(pk=conversation_id).update(message_count=len(rows))
    return rows
