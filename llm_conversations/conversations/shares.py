"""Share links: a read-only, revocable snapshot of a conversation, and forks of it.

The owner makes a link to the conversation's history through one message
(:func:`create_share`); anyone holding its token reads that snapshot
(:func:`resolve_share`, :func:`snapshot_messages`) and the attachments it
shows (:func:`snapshot_attachment`), until the link is revoked
(:func:`revoke_share`) or expires, and while the conversation is not in the
trash. A signed-in reader may continue it as a fork of their own
(:func:`continue_as_fork`, made by
:mod:`~llm_conversations.conversations.forks`).

A snapshot names its messages by id (``SharedMessage`` rows), the ones shown
when the link is made: never a message stored later, even at the position of
a rolled-back turn, nor one hidden then. Every reader leaves out what was
hidden since (hiding withdraws a turn, its tool group whole) and what was
removed; nothing else changes what a link shows. Edits and forks make new
conversations with rows of their own, which no existing link names.

The token is 32 random bytes, shown once; only its SHA-256 is stored, so the
database never holds a usable link and a lookup is one indexed equality.
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connections, router, transaction
from django.db.models import Max, QuerySet
from django.utils import timezone

from llm_conversations.conversations.attachments import create_attachment, link_attachments
from llm_conversations.conversations.forks import fork_conversation, fork_messages
from llm_conversations.conversations.history import cuts_tool_group
from llm_conversations.conversations.locks import lock_conversation
from llm_conversations.exceptions import ShareError
from llm_conversations.models import (
    Attachment,
    Conversation,
    Message,
    MessageAttachment,
    SharedMessage,
    ShareLink,
)
from llm_conversations.users import User

__all__ = [
    "NewShare",
    "continue_as_fork",
    "create_share",
    "resolve_share",
    "revoke_share",
    "revoke_shares",
    "snapshot_attachment",
    "snapshot_attachments",
    "snapshot_messages",
    "token_hash",
]

TOKEN_BYTES = 32
# Longer than any token made here (43 characters): not looked up at all.
MAX_TOKEN_CHARS = 100

# What a fork for another user does not take from the owner's turns: their
# metadata and what the owner's calls used and cost (the fork's owner spent
# nothing on them, and budgets count a conversation's turns).
PRIVATE_COLUMNS: dict[str, Any] = {
    "metadata": {},
    "cost": None,
    "input_tokens": None,
    "output_tokens": None,
    "total_tokens": None,
    "cached_tokens": None,
    "cache_write_tokens": None,
    "reasoning_tokens": None,
}

_NOT_FOUND = "no share link has this token, or it was revoked or has expired."


@dataclass(frozen=True, slots=True)
class NewShare:
    """A link just made, with its token: the only time the token is known."""

    link: ShareLink
    token: str


def token_hash(token: str) -> str:
    """The SHA-256 of a token in hexadecimal, as :class:`ShareLink` stores it."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def create_share(
    conversation: Conversation,
    *,
    message_id: uuid.UUID | str | None = None,
    expires_at: datetime | None = None,
) -> NewShare:
    """A link to ``conversation``'s history through ``message_id`` (included), or
    through its last message; made by and for the conversation's owner. It names
    the messages shown then: hidden ones are left out.

    Under the conversation's row lock, so no append or rollback comes between
    choosing the messages and naming them. Raises :class:`ShareError`:
    ``empty_conversation`` (nothing shown), ``unknown_message``,
    ``inside_tool_group`` (the snapshot would end between tool calls and their
    results: refused, never moved, as a fork is) or ``invalid_expiry``; and
    ``ConversationTrashed`` in the trash.
    """
    if conversation.owner_id is None:
        raise ShareError("unknown_owner", "only a conversation with an owner can be shared.")
    if expires_at is not None and expires_at <= timezone.now():
        raise ShareError("invalid_expiry", "expires_at must be in the future.", field="expires_at")
    with transaction.atomic():
        count = lock_conversation(conversation)
        position = _position(conversation, count, message_id)
        if cuts_tool_group(conversation.pk, position + 1):
            raise ShareError(
                "inside_tool_group",
                "a snapshot here would show tool calls without their results; share through "
                "the message before the assistant turn that made the calls or after its last "
                "result.",
                field="message_id",
            )
        token = secrets.token_urlsafe(TOKEN_BYTES)
        link = ShareLink.objects.create(
            conversation=conversation,
            created_by_id=conversation.owner_id,
            token_hash=token_hash(token),
            up_to_position=position,
            expires_at=expires_at,
        )
        shown = _name_messages(link)
        if not shown:
            raise _nothing_shown()
        # What ShareLink.objects.with_shown_count() reads for a stored link.
        link.shown_count = shown  # type: ignore[attr-defined]
    return NewShare(link, token)


def _nothing_shown() -> ShareError:
    return ShareError(
        "empty_conversation", "the conversation has no message to show yet (hidden ones are not)."
    )


def _position(conversation: Conversation, count: int, message_id: uuid.UUID | str | None) -> int:
    """The position of ``message_id`` in ``conversation``, or of its last message."""
    if message_id is None:
        if not count:
            raise _nothing_shown()
        return count - 1
    try:
        pk = uuid.UUID(str(message_id))
    except ValueError:
        pk = None
    found = (
        Message.objects.filter(conversation_id=conversation.pk, pk=pk)
        .values_list("position", flat=True)
        .first()
        if pk is not None
        else None
    )
    if found is None:
        raise ShareError(
            "unknown_message", "not a message of this conversation.", field="message_id"
        )
    return found


def _name_messages(link: ShareLink) -> int:
    """Name the messages ``link`` shows: its conversation's through ``up_to_position``
    that are not hidden (one ``INSERT ... SELECT`` at any length); how many."""
    shown = (
        Message.objects.filter(
            conversation_id=link.conversation_id,
            position__lte=link.up_to_position,
            hidden_at__isnull=True,
        )
        .order_by()
        .values("pk")
    )
    using = router.db_for_write(SharedMessage)
    connection = connections[using]
    quote = connection.ops.quote_name
    picked, params = shown.query.get_compiler(using=using).as_sql()
    sql = (
        f"INSERT INTO {quote(SharedMessage._meta.db_table)} "
        f"({quote('link_id')}, {quote('message_id')}) "
        f"SELECT %s, picked.{quote('pk')} FROM ({picked}) picked"
    )
    link_id = SharedMessage._meta.get_field("link").get_db_prep_value(link.pk, connection)
    with connection.cursor() as cursor:
        cursor.execute(sql, [link_id, *params])
        return int(cursor.rowcount)


def resolve_share(token: str) -> ShareLink:
    """The usable link of ``token``, its conversation loaded (one query).

    Raises :class:`ShareError` ``share_not_found`` for a token no link has, and
    for a revoked or expired link or one of a trashed conversation alike, so a
    reader cannot tell them apart.
    """
    if not token or len(token) > MAX_TOKEN_CHARS:
        raise ShareError("share_not_found", _NOT_FOUND)
    link = (
        ShareLink.objects.usable()
        .select_related("conversation")
        .filter(token_hash=token_hash(token))
        .first()
    )
    if link is None:
        raise ShareError("share_not_found", _NOT_FOUND)
    return link


def snapshot_messages(share: ShareLink) -> QuerySet[Message]:
    """The messages the link shows, in order: those it names, less the ones hidden since
    (a removed one is no longer named)."""
    return Message.objects.filter(
        conversation_id=share.conversation_id, share_entries__link=share, hidden_at__isnull=True
    ).order_by("position")


def snapshot_attachments(share: ShareLink) -> QuerySet[Attachment]:
    """The attachments the snapshot's messages show (by their index rows)."""
    return Attachment.objects.filter(
        pk__in=MessageAttachment.objects.filter(
            message__in=snapshot_messages(share).order_by().values("pk")
        ).values("attachment_id")
    )


def snapshot_attachment(share: ShareLink, attachment_id: uuid.UUID | str) -> Attachment:
    """An attachment a message of the snapshot shows (one query); any other one,
    the owner's included, raises ``Attachment.DoesNotExist``."""
    try:
        pk = uuid.UUID(str(attachment_id))
    except ValueError:
        raise Attachment.DoesNotExist(_NOT_FOUND) from None
    return snapshot_attachments(share).get(pk=pk)


def revoke_shares(links: QuerySet[ShareLink]) -> int:
    """Revoke the links at once (one conditional ``UPDATE``); how many were still
    unrevoked. A revoked link keeps its first ``revoked_at``; its token resolves
    to nothing from then on."""
    return links.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())


def revoke_share(share: ShareLink) -> ShareLink:
    """Revoke one link (:func:`revoke_shares`); the link as it is stored after."""
    revoke_shares(ShareLink.objects.filter(pk=share.pk))
    share.refresh_from_db(fields=["revoked_at"])
    return share


def continue_as_fork(share: ShareLink, viewer: User) -> Conversation:
    """A fork of the snapshot for ``viewer``: a new conversation of theirs holding
    copies of the snapshot's turns.

    For a viewer other than the owner the fork is theirs alone
    (:func:`~llm_conversations.conversations.forks.fork_messages`): the
    turns the link shows, numbered from 0, with none of the owner's metadata or
    usage and no source recorded, showing copies of the snapshot's attachments
    owned by the viewer (one storage read and write each; the same bytes the
    viewer uploaded before are reused). The owner gets a fork of their
    conversation through the last message the link still names (their hidden
    turns stay in it, hidden). Costs the same statements at any length. Raises
    ``Conversation.DoesNotExist`` when the conversation is deleted meanwhile,
    and ``ShareError`` ``snapshot_changed`` when a turn came back into the
    snapshot while it was forked (nothing is stored).
    """
    source = share.conversation
    if viewer.pk == source.owner_id:
        last = share.entries.aggregate(last=Max("message__position"))["last"]
        return fork_conversation(source, 0 if last is None else last + 1)
    # Outside the transaction: files are written first; a fork that fails leaves
    # only attachments no message shows, which the orphan purge removes.
    copies = {
        str(attachment.pk): str(_copy_attachment(attachment, viewer).pk)
        for attachment in snapshot_attachments(share)
    }
    with transaction.atomic():
        fork = fork_messages(source, snapshot_messages(share), viewer)
        Message.objects.filter(conversation=fork).update(**PRIVATE_COLUMNS)
        _show_copies(fork, copies)
    return fork


def _copy_attachment(attachment: Attachment, owner: User) -> Attachment:
    with attachment.file.open("rb") as handle:
        data = handle.read()
    copy, _ = create_attachment(
        owner, data, filename=attachment.filename, declared_type=attachment.mime_type
    )
    return copy


def _show_copies(conversation: Conversation, copies: dict[str, str]) -> None:
    """Point the copied turns' parts at the viewer's copies of the attachments, and
    index those instead of the owner's (four statements whatever the length; one
    read without attachments). A part whose attachment was not copied (its turn
    was shown again meanwhile) refuses the fork: it would show the owner's."""
    rows = list(Message.objects.filter(conversation=conversation, content_parts__isnull=False))
    for row in rows:
        parts = row.content_parts or ()
        if any(part["attachment_id"] not in copies for part in parts if "attachment_id" in part):
            raise ShareError(
                "snapshot_changed",
                "the shared conversation changed while it was forked; fork it again.",
            )
        row.content_parts = [
            {**part, "attachment_id": copies[part["attachment_id"]]}
            if "attachment_id" in part
            else part
            for part in parts
        ]
    if not copies:
        return
    MessageAttachment.objects.filter(message__conversation=conversation).delete()
    Message.objects.bulk_update(rows, ["content_parts"])
    link_attachments(rows)
