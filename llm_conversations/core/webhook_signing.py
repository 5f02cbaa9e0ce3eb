"""Webhook signatures as Standard Webhooks writes them (https://www.standardwebhooks.com).

A message is sent with three headers: ``webhook-id`` (the same on every
attempt of one message, so a receiver can drop repeats), ``webhook-timestamp``
(integer seconds since the epoch, when the attempt was signed) and
``webhook-signature``: ``v1,`` and the base64 HMAC-SHA256 of
``"{id}.{timestamp}.{body}"``, keyed with the secret's bytes (a secret is
``whsec_`` and the base64 of 24 to 62 random bytes). Several space-separated
signatures may be sent (a secret being rotated); one that matches is enough.

Pure: used by the sender and usable by any Python receiver.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets

__all__ = [
    "SECRET_PATTERN",
    "SECRET_PREFIX",
    "TOLERANCE_SECONDS",
    "new_secret",
    "secret_problem",
    "sign",
    "signature_headers",
    "verify",
]

SECRET_PREFIX = "whsec_"
# How far a receiver lets a timestamp stray from its clock (replays older are refused).
TOLERANCE_SECONDS = 5 * 60
# ``whsec_`` and the canonical base64 of 24 to 62 bytes (a JSON Schema pattern too).
SECRET_PATTERN = r"^whsec_(?:[A-Za-z0-9+/]{4}){8,20}(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
_SECRET = re.compile(SECRET_PATTERN)


def _key(secret: str) -> bytes:
    return base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)


def secret_problem(secret: object) -> str | None:
    """Why ``secret`` is not a signing secret (``None`` when it is); never quotes it."""
    if not isinstance(secret, str) or not secret.startswith(SECRET_PREFIX):
        return f"a signing secret is a string starting with {SECRET_PREFIX!r}"
    if _SECRET.fullmatch(secret) is None:
        return f"a signing secret is {SECRET_PREFIX!r} and the base64 of 24 to 62 bytes"
    return None


def new_secret() -> str:
    """A fresh signing secret: ``whsec_`` and 32 random bytes in base64."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def sign(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value for one message: ``v1,<base64 HMAC-SHA256>``."""
    signed = b".".join((message_id.encode(), str(timestamp).encode(), body))
    digest = hmac.new(_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def signature_headers(secret: str, message_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three headers of one signed attempt."""
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(secret, message_id, timestamp, body),
    }


def verify(
    secret: str,
    headers: dict[str, str],
    body: bytes,
    *,
    now: float,
    tolerance: float = TOLERANCE_SECONDS,
) -> bool:
    """Whether ``headers`` (lower-case names) sign ``body`` with ``secret`` and a
    timestamp within ``tolerance`` seconds of ``now``; compared in constant time."""
    message_id = headers.get("webhook-id", "")
    stamp = headers.get("webhook-timestamp", "")
    if not message_id or not stamp.isdigit() or abs(now - int(stamp)) > tolerance:
        return False
    expected = sign(secret, message_id, int(stamp), body)
    offered = headers.get("webhook-signature", "").split()
    return any(hmac.compare_digest(expected, candidate) for candidate in offered)
