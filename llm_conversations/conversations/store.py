"""The conversation store: the one place that turns rows into messages and back.

It owns the conversation-level rules: call/result pairing, what the columns
can hold (call id lengths, storable text), and who may append or delete while a run is active (only that run may
append; nobody may delete). It also copies histories into forks, in one
``INSERT ... SELECT`` whatever their length (the rows are valid already; the
database's constraints and triggers check the copies all the same). Appending locks the conversation row, reads only
the tail that the pairing rules need (from the last assistant turn on), and
inserts the new rows in one statement, so an append costs the same at any
history length and concurrent appenders get gap-free positions.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from functools import partial
from typing import Any

from django.db import transaction
from django.db.models import Exists, F, OuterRef, Subquery
from django.utils import timezone

from llm_conversations.conversations.attachments import check_references, link_attachments
from llm_conversations.conversations.copies import copy_attachment_links, copy_message_rows
from llm_conversations.core.completions import CompletionResponse, FinishReason
from llm_conversations.core.messages import (
    ChatMessage,
    InvalidMessage,
    MessageInput,
    Role,
    as_chat_messages,
    check_sequence,
    unanswered_tool_call_ids,
)
from llm_conversations.core.text import json_problem
from llm_conversations.exceptions import ConversationBusy, ConversationTrashed, ForkError
from llm_conversations.models import (
    ACTIVE_RUN_STATUSES,
    MAX_ID_CHARS,
    Conversation,
    ConversationSummary,
    Message,
    Run,
    TitleSource,
    chat_messages_of,
    conversation_history,
    conversation_messages,
)
from llm_conversations.signals import message_appended
from llm_conversations.users import User

__all__ = [
    "ConversationRef",
    "active_run_id",
    "append_cancelled_reply",
    "append_completion",
    "append_locked",
    "append_messages",
    "check_storable",
    "conversation_pk",
    "create_conversation",
    "cuts_tool_group",
    "delete_conversation",
    "fork_conversation",
    "fork_title",
    "insert_history",
    "load_history",
    "load_messages",
    "lock_conversation",
    "lock_idle_conversation",
    "pending_tool_call_ids",
    "remove_run_turns",
]

ConversationRef = Conversation | uuid.UUID | str
"""A conversation or its id."""


def conversation_pk(conversation: ConversationRef) -> uuid.UUID:
    """The id of a conversation given as an instance, a UUID or its text."""
    if isinstance(conversation, Conversation):
        return conversation.pk
    return conversation if isinstance(conversation, uuid.UUID) else uuid.UUID(str(conversation))


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


def load_messages(conversation: ConversationRef) -> list[ChatMessage]:
    """The whole conversation as value objects, in order, in one query."""
    return conversation_messages(conversation_pk(conversation))


def load_history(conversation: ConversationRef) -> tuple[list[ChatMessage], frozenset[int]]:
    """The whole conversation as value objects, in order, and the positions of
    its hidden messages (the model is not sent them), in one query."""
    return conversation_history(conversation_pk(conversation))


def _tail(conversation_id: uuid.UUID, before: int | None = None) -> list[ChatMessage]:
    """The messages from the last assistant turn on: all the sequence rules need.

    ``before``: of the first ``before`` messages only.
    """
    earlier = {} if before is None else {"position__lt": before}
    last_assistant = (
        Message.objects.filter(conversation_id=conversation_id, role=Role.ASSISTANT, **earlier)
        .order_by("-position")
        .values("position")[:1]
    )
    return chat_messages_of(
        Message.objects.filter(
            conversation_id=conversation_id, position__gte=Subquery(last_assistant), **earlier
        ).order_by("position")
    )


def pending_tool_call_ids(conversation: ConversationRef) -> tuple[str, ...]:
    """Ids of the calls of the last assistant turn that no tool turn answers yet."""
    return unanswered_tool_call_ids(_tail(conversation_pk(conversation)))


def cuts_tool_group(conversation: ConversationRef, count: int) -> bool:
    """Whether the first ``count`` messages end with tool calls their results do not
    follow (a fork or a shared snapshot there would not be a valid history)."""
    return bool(unanswered_tool_call_ids(_tail(conversation_pk(conversation), before=count)))


def _lock(conversation_id: uuid.UUID, run: Run | None, *, trashed: bool = False) -> int:
    """Lock the conversation row and return its message count.

    Raises ``ConversationTrashed`` for a conversation in the trash (unless
    ``trashed``), and ``ConversationBusy`` when a run is active, unless ``run``
    is that run.
    The row lock serialises appenders of one conversation (PostgreSQL); on
    SQLite the IMMEDIATE transaction mode does the same. The active run is
    read by a statement of its own, after the lock is held, so it sees a run
    committed while this one waited.
    """
    count = lock_conversation(conversation_id, trashed=trashed)
    active = active_run_id(conversation_id)
    _refuse_busy(active, run)
    return count


def _count_in(conversation_id: uuid.UUID, run: Run | None, adding: int) -> int:
    """Lock the conversation row by counting ``adding`` new messages, and return
    the count before them; the caller inserts them in the same transaction,
    which undoes the count if anything fails.

    What :func:`_lock` and a later count update do, in one statement fewer:
    the ``UPDATE`` takes the row lock, then one read, a statement of its own
    after the lock is held (so it sees a run committed while this one
    waited), returns the count and the active run together.
    Raises ``ConversationTrashed``, ``ConversationBusy`` and
    ``Conversation.DoesNotExist`` as ``_lock``.
    """
    if not Conversation.objects.filter(pk=conversation_id).update(
        message_count=F("message_count") + adding, updated_at=timezone.now()
    ):
        raise Conversation.DoesNotExist("Conversation matching query does not exist.")
    active_run = Run.objects.filter(
        conversation_id=OuterRef("pk"), status__in=ACTIVE_RUN_STATUSES
    ).values("pk")[:1]
    count, active, trashed_at = (
        Conversation.objects.filter(pk=conversation_id)
        .annotate(active=Subquery(active_run))
        .values_list("message_count", "active", "trashed_at")
        .get()
    )
    if trashed_at is not None:
        raise ConversationTrashed()
    _refuse_busy(active, run)
    return int(count) - adding


def _refuse_busy(active: uuid.UUID | None, run: Run | None) -> None:
    if active is not None and (run is None or run.pk != active):
        raise ConversationBusy(
            "another run of this conversation is still active; wait for it or cancel it."
        )


def lock_conversation(conversation: ConversationRef, *, trashed: bool = False) -> int:
    """In a transaction: lock the conversation row and return its message count;
    ``ConversationTrashed`` for one in the trash, unless ``trashed``.

    What a start that may find the conversation busy takes before reading
    :func:`active_run_id` (it chooses what to do then), and what queues a
    waiting run; :func:`lock_idle_conversation` refuses a busy one instead.
    """
    count, trashed_at = (
        Conversation.objects.select_for_update()
        .values_list("message_count", "trashed_at")
        .get(pk=conversation_pk(conversation))
    )
    if trashed_at is not None and not trashed:
        raise ConversationTrashed()
    return int(count)


def active_run_id(conversation: ConversationRef) -> uuid.UUID | None:
    """The id of the conversation's active run, ``None`` when it is idle; read under
    :func:`lock_conversation`, it sees a run committed while the lock was awaited."""
    return (
        Run.objects.filter(
            conversation_id=conversation_pk(conversation), status__in=ACTIVE_RUN_STATUSES
        )
        .values_list("pk", flat=True)
        .first()
    )


def lock_idle_conversation(conversation: ConversationRef, *, trashed: bool = False) -> int:
    """In a transaction: lock the conversation row, refusing it while a run is
    active or, unless ``trashed``, while it is in the trash
    (``ConversationTrashed``), and return its message count (for :func:`append_locked`).

    ``ToolLoopService.start`` takes this lock before inserting a run, so
    concurrent starts of one conversation are serialised and every one but
    the first sees the active run (``ConversationBusy``). Raises
    ``Conversation.DoesNotExist`` when the conversation is gone.
    """
    try:
        return _lock(conversation_pk(conversation), None, trashed=trashed)
    except ConversationBusy:
        # The message a refused start has always had.
        raise ConversationBusy() from None


def _check_storable(items: Sequence[tuple[ChatMessage, dict[str, Any]]]) -> None:
    """Refuse what the columns cannot hold, naming the field.

    Call ids longer than the ``tool_call_id`` column, and text or JSON that no
    supported database stores (see :mod:`llm_conversations.core.text`).
    """
    for index, (message, extra) in enumerate(items):
        values: dict[str, Any] = {
            "content": message.content,
            "tool_call_id": message.tool_call_id,
            "metadata": extra.get("metadata"),
        }
        for i, call in enumerate(message.tool_calls or ()):
            values[f"tool_calls[{i}].id"] = call.id
            values[f"tool_calls[{i}].function.name"] = call.name
            values[f"tool_calls[{i}].function.arguments"] = (
                call.raw_arguments if call.malformed else call.arguments
            )
        for name, value in values.items():
            if name.endswith("id") and value is not None and len(value) > MAX_ID_CHARS:
                raise InvalidMessage(
                    "invalid_tool_call_id",
                    f"tool call ids may have at most {MAX_ID_CHARS} characters.",
                    field=f"messages[{index}].{name}",
                )
            problem = json_problem(value, name)
            if problem is not None:
                raise InvalidMessage(
                    problem.code,
                    f"{problem.why} cannot be stored.",
                    field=f"messages[{index}].{problem.path}",
                )


def check_storable(conversation: ConversationRef, message: ChatMessage) -> None:
    """Refuse a turn to be stored later (a waiting run's) as appending it now would,
    but for the sequence rules, which apply when it is appended: what the
    columns cannot hold, and attachments the conversation's owner does not own."""
    _check_storable([(message, {})])
    check_references(conversation_pk(conversation), [message])


def _append(
    conversation: ConversationRef,
    items: Sequence[tuple[ChatMessage, dict[str, Any]]],
    run: Run | None,
    history: Sequence[ChatMessage] | None = None,
    locked: int | None = None,
) -> list[Message]:
    conversation_id = conversation_pk(conversation)
    messages = [message for message, _ in items]
    _check_storable(items)
    check_references(conversation_id, messages)
    rows = None
    if locked is not None:
        count = locked
        rows = _insert_after_tail(conversation_id, count, items)
        Conversation.objects.filter(pk=conversation_id).update(
            message_count=count + len(rows), updated_at=timezone.now()
        )
    elif history is not None and run is not None:
        count = len(history)
        rows = _append_known(conversation_id, items, run, history)
    if rows is None:
        with transaction.atomic():
            count = _count_in(conversation_id, run, len(items))
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
    conversation_id: uuid.UUID, count: int, items: Sequence[tuple[ChatMessage, dict[str, Any]]]
) -> list[Message]:
    """Under the conversation's lock (``count`` messages): check the new turns
    against the stored tail and insert them."""
    check_sequence(
        [message for message, _ in items], pending=unanswered_tool_call_ids(_tail(conversation_id))
    )
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
    rows = Message.objects.bulk_create(rows)
    link_attachments(rows)
    return rows


def _append_known(
    conversation_id: uuid.UUID,
    items: Sequence[tuple[ChatMessage, dict[str, Any]]],
    run: Run,
    history: Sequence[ChatMessage],
) -> list[Message] | None:
    """Append after ``history``, the conversation as the appending run last saw it.

    Two statements instead of five: one conditional ``UPDATE`` locks the
    conversation row and confirms at once that ``history`` is still all of
    it (the count matches) and that ``run`` is its active run, so the tail
    need not be read again. ``None`` when either does not hold: the caller
    then takes the general path, which reads what it needs. It runs in the
    caller's transaction (the loop's, which also changes the run) without a
    savepoint, so a refused append rolls that transaction back.
    """
    count = len(history)
    active_run = Run.objects.filter(
        pk=run.pk, conversation_id=OuterRef("pk"), status__in=ACTIVE_RUN_STATUSES
    )
    with transaction.atomic(savepoint=False):
        if not Conversation.objects.filter(
            Exists(active_run), pk=conversation_id, message_count=count
        ).update(message_count=count + len(items), updated_at=timezone.now()):
            return None
        check_sequence([message for message, _ in items], pending=unanswered_tool_call_ids(history))
        return _insert(conversation_id, count, items)


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
) -> list[Message]:
    """:func:`append_messages` in the caller's transaction, which holds the
    conversation's lock: ``count`` is what :func:`lock_idle_conversation`
    returned. ``ToolLoopService.start`` stores its run's user turn so, without
    locking and checking for an active run a second time; ``metadata`` goes
    on every message."""
    items = [
        (message, {"run": run, "metadata": dict(metadata or {})})
        for message in as_chat_messages(messages)
    ]
    return _append(conversation, items, run, locked=count)


def append_completion(
    conversation: ConversationRef,
    response: CompletionResponse,
    *,
    run: Run | None = None,
    metadata: dict[str, Any] | None = None,
    parsed: Any = None,
    history: Sequence[ChatMessage] | None = None,
    cost: Decimal | None = None,
) -> Message:
    """Append the assistant turn of a provider reply with its provider, model, usage,
    cost and finish reason; a reply the adapter had to make storable is flagged
    ``sanitized``.

    ``parsed`` is a structured answer, read and validated (``Message.parsed``);
    ``run`` and ``history`` as for :func:`append_messages`. ``cost`` is the
    dollars the call cost (``model_info.call_cost()``), ``None`` if unknown.
    """
    usage = response.usage
    extra = {
        "parsed": parsed,
        "provider": response.provider,
        "model": response.model,
        "finish_reason": response.finish_reason.value,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
        "cached_tokens": usage.cached_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
        "reasoning_tokens": usage.reasoning_tokens,
        "cost": cost,
        "run": run,
        "metadata": {**(metadata or {}), **({"sanitized": True} if response.sanitized else {})},
    }
    return _append(conversation, [(response.to_message(), extra)], run, history)[0]


def append_cancelled_reply(conversation: ConversationRef, text: str, *, run: Run) -> Message:
    """Append what a cancelled run's model had streamed as its assistant turn.

    Its finish reason is ``cancelled``; usage is unknown (the provider never
    finished), so it is left empty, as is the cost.
    """
    extra = {
        "provider": run.provider,
        "model": run.model,
        "finish_reason": FinishReason.CANCELLED.value,
        "run": run,
    }
    return _append(conversation, [(ChatMessage.assistant(text), extra)], run)[0]


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
    after = Message.objects.filter(conversation_id=conversation_id, position__gte=first)
    if after.exclude(run=run).exists():
        return None
    after.delete()
    ConversationSummary.objects.filter(
        conversation_id=conversation_id, end_position__gt=first
    ).delete()
    Conversation.objects.filter(pk=conversation_id).update(
        message_count=first, updated_at=timezone.now()
    )
    return count - first


def delete_conversation(conversation: ConversationRef) -> None:
    """Delete a conversation for good with its messages and runs, from the trash
    or not; refused while a run is active.

    Raises ``ConversationBusy`` or ``Conversation.DoesNotExist``.
    """
    conversation_id = conversation_pk(conversation)
    with transaction.atomic():
        _lock(conversation_id, None, trashed=True)
        Conversation.objects.filter(pk=conversation_id).delete()


def fork_conversation(
    source: Conversation,
    count: int,
    *,
    title: str | None = None,
    owner: User | None = None,
) -> Conversation:
    """A new conversation of the same owner holding copies of ``source``'s first
    ``count`` messages, recording where it came from.

    Without ``title`` the fork is named after its source so lists tell them
    apart (:func:`fork_title`: ``Trip (fork)``, then ``Trip (fork 2)``, ...),
    keeping who set it; an untitled source gives an untitled fork, which an
    automatic title fills after its first run. A ``title`` given is the user's.

    An ``owner`` other than the source's makes a copy for that user (a shared
    snapshot continued as a copy, :mod:`~llm_conversations.conversations.sharing`):
    it keeps the source's title as it is and records neither the source
    (``forked_from``, ``forked_at_position``: another user's) nor its metadata.

    ``source`` is only read, never locked or changed, so a source with an
    active run can be forked: only turns already stored are copied. Copies
    keep their text, usage and metadata but not their run. Raises
    ``ForkError`` ``inside_tool_group`` when the copy would end with tool
    calls its results do not follow, and ``Conversation.DoesNotExist`` when
    ``source`` is deleted meanwhile. Costs the same statements at any length.
    """
    if cuts_tool_group(source.pk, count):
        raise ForkError(
            "inside_tool_group",
            "a fork here would keep tool calls without their results; fork before the "
            "assistant turn that made the calls or after its last result.",
            field="message_id",
        )
    foreign = owner is not None and owner.pk != source.owner_id
    if title is not None:
        named = {"title": title, "title_source": TitleSource.USER}
    else:
        named = {
            "title": source.title if foreign else fork_title(source),
            "title_source": source.title_source,
        }
    with transaction.atomic():
        fork = Conversation.objects.create(
            owner_id=owner.pk if owner is not None and foreign else source.owner_id,
            **named,
            metadata={} if foreign else source.metadata,
            forked_from=None if foreign else source,
            forked_at_position=None if foreign else count,
            message_count=count,
        )
        if copy_message_rows(source.pk, fork.pk, count) != count:
            raise Conversation.DoesNotExist("the conversation was deleted while it was forked.")
        # The copies show the same attachments: index them too.
        copy_attachment_links(source.pk, fork.pk, count)
    return fork


FORK_SUFFIX = " (fork)"
NUMBERED_FORK_SUFFIX = " (fork {n})"


def fork_title(source: Conversation) -> str:
    """The title of a new fork of ``source``: its title and `` (fork)``, numbered from the
    second fork of the same source on (`` (fork 2)``); ``""`` for an untitled source.

    The source's title is cut to leave room for the suffix (one count query,
    only for a titled source).
    """
    if not source.title:
        return ""
    earlier = Conversation.objects.filter(forked_from_id=source.pk).count()
    suffix = FORK_SUFFIX if not earlier else NUMBERED_FORK_SUFFIX.format(n=earlier + 1)
    room = (Conversation._meta.get_field("title").max_length or 200) - len(suffix)
    return source.title[:room].rstrip() + suffix


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
    _check_storable(items)
    with transaction.atomic():
        if _lock(conversation_id, None):
            raise InvalidMessage("not_empty", "history goes only into an empty conversation.")
        check_sequence([message for message, _ in items], pending=())
        check_references(conversation_id, [message for message, _ in items])
        rows = _insert(conversation_id, 0, items)
        Conversation.objects.filter(pk=conversation_id).update(message_count=len(rows))
    return rows
