"""Idempotency keys: a repeated request gets the first one's answer, and stores nothing twice.

A key is claimed by inserting its row before the request is answered; the
unique ``(user, key)`` constraint lets exactly one concurrent request win. The
others see the row: with another request or body the key is refused
(``idempotency_key_reused``), while the first is still being answered they
are told so (``idempotency_key_in_use``), and once it is answered they get the
stored answer. A key older than ``IDEMPOTENCY_KEY_TTL`` seconds is unknown.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext

from llm_conversations.conf import conf
from llm_conversations.exceptions import IdempotencyKeyError
from llm_conversations.models import IdempotencyKey
from llm_conversations.users import User

__all__ = ["claim", "complete", "expired_before", "release"]


def expired_before(now: datetime | None = None) -> datetime:
    """Keys created before this moment are expired."""
    return (now or timezone.now()) - timedelta(seconds=conf.IDEMPOTENCY_KEY_TTL)


def claim(user: User, key: str, request: str, body_hash: str) -> tuple[IdempotencyKey, bool]:
    """The key's row and whether this call claimed it (``False``: it holds an answer).

    Raises ``IdempotencyKeyError`` when the key named another request or body
    (``idempotency_key_reused``) or is still being answered
    (``idempotency_key_in_use``).
    """
    for _ in range(3):
        try:
            with transaction.atomic():
                row = IdempotencyKey.objects.create(
                    user=user, key=key, request=request, body_hash=body_hash
                )
            return row, True
        except IntegrityError:
            pass
        existing = IdempotencyKey.objects.filter(user=user, key=key).first()
        if existing is None:
            continue  # released meanwhile: claim it again
        if existing.created_at < expired_before():
            IdempotencyKey.objects.filter(pk=existing.pk, created_at=existing.created_at).delete()
            continue
        if (existing.request, existing.body_hash) != (request, body_hash):
            raise IdempotencyKeyError(
                "idempotency_key_reused",
                gettext("this Idempotency-Key was used for another request."),
                field="Idempotency-Key",
            )
        if existing.status is not None:
            return existing, False
        break
    raise IdempotencyKeyError(
        "idempotency_key_in_use",
        gettext("a request with this Idempotency-Key is still being answered."),
        field="Idempotency-Key",
    )


def complete(row: IdempotencyKey, status: int, response: Any) -> None:
    """Store the answer of the request that claimed ``row``."""
    IdempotencyKey.objects.filter(pk=row.pk).update(status=status, response=response)


def release(row: IdempotencyKey) -> None:
    """Forget a claim whose request stored nothing (it was refused), so it can be sent again."""
    IdempotencyKey.objects.filter(pk=row.pk, status__isnull=True).delete()
