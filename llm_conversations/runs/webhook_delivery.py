"""Sending webhooks: one signed attempt at a time, retried with exponential backoff.

:func:`deliver` makes one attempt of a due delivery. It claims the delivery
with a conditional ``UPDATE`` (counting the attempt and pushing its due time
past the attempt's timeout, so no other worker sends it meanwhile), sends it
with no transaction open, and records the outcome in a second ``UPDATE``:

- a 2xx response: delivered;
- 408, 429, any 5xx, a timeout or a connection error: tried again after
  ``WEBHOOK_BACKOFF_SECONDS * 2 ** (attempts - 1)`` seconds (capped at
  :data:`MAX_BACKOFF_SECONDS`), until ``WEBHOOK_MAX_ATTEMPTS`` attempts failed;
- any other status (redirects are not followed), or a URL that may not be
  reached: failed at once.

A retry is queued as a deferred task when the task backend can defer one;
:func:`deliver_due` (the task ``send_due_webhooks``) sends every delivery
that is due, whatever queued it, and picks up attempts whose worker died.

Where a webhook may go (server-side request forgery): ``WEBHOOK_ALLOWED_HOSTS``
``None`` lets a URL reach a host only when every address it resolves to is
public; a list lets it reach exactly those hosts, private ones included.
Requests go through one shared httpx client (connections reused), never
follow redirects, and the response body is never read.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import httpx
from django.db.models import F
from django.utils import timezone

from llm_conversations.background import enqueue, enqueue_later, task
from llm_conversations.conf import conf
from llm_conversations.core.webhook_signing import signature_headers
from llm_conversations.models import DeliveryStatus, WebhookDelivery

__all__ = [
    "MAX_BACKOFF_SECONDS",
    "backoff",
    "deliver",
    "deliver_due",
    "enqueue_delivery",
    "host_problem",
    "send_due_webhooks",
    "send_webhook",
    "url_problem",
]

logger = logging.getLogger("llm_conversations.webhooks")

MAX_BACKOFF_SECONDS = 6 * 3600
# Statuses worth another attempt besides 5xx: the receiver timed out or is busy.
_RETRY_STATUSES = frozenset({408, 429})
_USER_AGENT = "llm-conversations-webhooks"

_client: httpx.Client | None = None
_client_lock = threading.Lock()

Resolve = Callable[[str], list[str]]


def shared_client() -> httpx.Client:
    """The process's one webhook client: pooled connections, no redirects followed."""
    global _client
    with _client_lock:
        if _client is None:
            _client = httpx.Client(
                follow_redirects=False,
                limits=httpx.Limits(max_connections=20, max_keepalive_connections=10),
                headers={"user-agent": _USER_AGENT},
            )
        return _client


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be a webhook URL (not http(s), no host); ``None`` if it can."""
    if any(c.isspace() or not c.isprintable() for c in url):
        return "the URL holds spaces or control characters"
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:  # a malformed IPv6 host or port
        return "the URL cannot be read"
    if parts.scheme not in ("http", "https"):
        return "only http and https URLs are sent webhooks"
    if not host:
        return "the URL has no host"
    return None


def _resolve(host: str) -> list[str]:
    return [str(info[4][0]) for info in socket.getaddrinfo(host, None)]


def host_problem(host: str, *, resolve: Resolve = _resolve) -> str | None:
    """Why a webhook may not reach ``host`` under ``WEBHOOK_ALLOWED_HOSTS``; ``None`` if it may."""
    allowed = conf.WEBHOOK_ALLOWED_HOSTS
    if allowed is not None:
        names = {name.lower() for name in allowed}
        return None if host.lower() in names else "the host is not in WEBHOOK_ALLOWED_HOSTS"
    try:
        addresses = resolve(host)
    except OSError:
        return "the host does not resolve"
    if not addresses or not all(ipaddress.ip_address(a.split("%")[0]).is_global for a in addresses):
        return "the host has a private, loopback or reserved address"
    return None


def backoff(attempts: int) -> float:
    """Seconds before the attempt after ``attempts`` failed ones."""
    delay: float = conf.WEBHOOK_BACKOFF_SECONDS * 2 ** (attempts - 1)
    return min(delay, MAX_BACKOFF_SECONDS)


def _target(delivery: WebhookDelivery) -> tuple[str, str] | None:
    """The URL and secret a delivery goes to; ``None`` when its endpoint is gone or off."""
    if delivery.endpoint_name:
        entry = conf.WEBHOOKS.get(delivery.endpoint_name)
        return None if entry is None else (str(entry["URL"]), str(entry["SECRET"]))
    endpoint = delivery.endpoint
    if endpoint is None or not endpoint.is_active:
        return None
    return endpoint.url, endpoint.secret


def _attempt(
    client: httpx.Client, url: str, secret: str, delivery: WebhookDelivery, stamp: int
) -> tuple[int | None, str, bool]:
    """Send once: (status or ``None``, error text, whether to try again). No secret in the text."""
    if (problem := url_problem(url)) is not None:
        return None, problem, False
    if (problem := host_problem(urlsplit(url).hostname or "")) is not None:
        return None, problem, False
    body = json.dumps(delivery.payload, separators=(",", ":")).encode()
    headers = {
        "content-type": "application/json",
        **signature_headers(secret, delivery.message_id, stamp, body),
    }
    try:
        # Streamed and closed unread: a receiver's body is never needed.
        with client.stream(
            "POST", url, content=body, headers=headers, timeout=conf.WEBHOOK_TIMEOUT
        ) as response:
            status = response.status_code
    except httpx.TimeoutException:
        return None, "the request timed out", True
    except httpx.HTTPError as exc:
        return None, f"the request failed ({type(exc).__name__})", True
    if 200 <= status < 300:
        return status, "", False
    return status, f"HTTP {status}", status >= 500 or status in _RETRY_STATUSES


def deliver(
    delivery_id: uuid.UUID | str,
    *,
    now: Callable[[], datetime] = timezone.now,
    client: httpx.Client | None = None,
) -> WebhookDelivery | None:
    """Make one attempt of a due delivery; ``None`` when it is not due (or not pending).

    ``now`` is the clock (tests pass their own) and ``client`` the httpx client
    (the shared one by default). Never raises for a failed attempt: the outcome
    is recorded on the row.
    """
    moment = now()
    in_flight = moment + timedelta(seconds=conf.WEBHOOK_TIMEOUT + 30)
    claimed = WebhookDelivery.objects.filter(
        pk=delivery_id, status=DeliveryStatus.PENDING, next_attempt_at__lte=moment
    ).update(attempts=F("attempts") + 1, next_attempt_at=in_flight)
    if not claimed:
        return None
    delivery = WebhookDelivery.objects.select_related("endpoint").get(pk=delivery_id)
    target = _target(delivery)
    if target is None:
        status, error, again = None, "the endpoint was removed or switched off", False
    else:
        status, error, again = _attempt(
            client or shared_client(), *target, delivery, int(moment.timestamp())
        )
    return _record(delivery, now(), status, error, again)


def _record(
    delivery: WebhookDelivery, moment: datetime, status: int | None, error: str, again: bool
) -> WebhookDelivery:
    fields: dict[str, Any] = {"response_status": status, "last_error": error}
    if status is not None and not error:
        fields.update(status=DeliveryStatus.DELIVERED, next_attempt_at=None, finished_at=moment)
    elif again and delivery.attempts < conf.WEBHOOK_MAX_ATTEMPTS:
        fields["next_attempt_at"] = moment + timedelta(seconds=backoff(delivery.attempts))
    else:
        fields.update(status=DeliveryStatus.FAILED, next_attempt_at=None, finished_at=moment)
    WebhookDelivery.objects.filter(pk=delivery.pk).update(**fields)
    for name, value in fields.items():
        setattr(delivery, name, value)
    if delivery.status == DeliveryStatus.PENDING and delivery.next_attempt_at is not None:
        enqueue_later(send_webhook, delivery.next_attempt_at, str(delivery.pk))
    elif delivery.status == DeliveryStatus.FAILED:
        logger.warning(
            "Webhook %s (%s) failed after %d attempt(s): %s",
            delivery.pk,
            delivery.event,
            delivery.attempts,
            error,
        )
    return delivery


def deliver_due(
    *,
    now: Callable[[], datetime] = timezone.now,
    client: httpx.Client | None = None,
    limit: int = 100,
) -> int:
    """Make one attempt of each due delivery (at most ``limit``); how many were attempted."""
    due = WebhookDelivery.objects.filter(
        status=DeliveryStatus.PENDING, next_attempt_at__lte=now()
    ).order_by("next_attempt_at")
    ids = list(due.values_list("pk", flat=True)[:limit])
    return sum(deliver(pk, now=now, client=client) is not None for pk in ids)


@task()
def send_webhook(delivery_id: str) -> str | None:
    """The task making one attempt of a delivery: :func:`deliver`; its status after."""
    delivery = deliver(delivery_id)
    return None if delivery is None else delivery.status


@task()
def send_due_webhooks() -> int:
    """The task sending every due delivery (schedule it every minute or so): :func:`deliver_due`."""
    started = time.monotonic()
    sent = deliver_due()
    logger.info("Sent %d due webhook(s) in %.1f s", sent, time.monotonic() - started)
    return sent


def enqueue_delivery(delivery_id: uuid.UUID | str) -> Any:
    """Queue :func:`send_webhook` for a delivery on the configured task backend."""
    return enqueue(send_webhook, str(delivery_id))
