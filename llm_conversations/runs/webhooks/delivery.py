"""Sending webhooks: one signed attempt at a time, each within its deadline, retried
with exponential backoff.

:func:`deliver` makes one attempt of a due delivery. It claims the delivery
with a conditional ``UPDATE`` (counting the attempt and pushing its due time
:data:`CLAIM_MARGIN_SECONDS` past the attempt's deadline, so no other worker
sends it meanwhile), sends it with no transaction open, and records the
outcome in a second conditional ``UPDATE`` (only while the claim is its own):

- a 2xx response: delivered;
- 408, 429, any 5xx, a timeout or a connection error: tried again after
  ``WEBHOOK_BACKOFF_SECONDS * 2 ** (attempts - 1)`` seconds (capped at
  :data:`MAX_BACKOFF_SECONDS`), until ``WEBHOOK_MAX_ATTEMPTS`` attempts failed;
- any other status (redirects are not followed), or a URL that may not be
  reached (:mod:`~llm_conversations.runs.webhooks.hosts`): failed at once.

An attempt has ``WEBHOOK_TIMEOUT`` seconds of wall-clock time in all: looking
up the host's addresses, connecting, sending and receiving the response's
headers. It runs as a coroutine on the process's one event loop
(:mod:`~llm_conversations.tools.async_loop`) and is cancelled at its deadline,
so a receiver that drips its headers a byte at a time cannot hold it longer;
the worker thread that made it waits for its outcome. Requests go through one
shared httpx client (connections reused), never follow redirects, and the
response body is never read.

Every delivery is sent by a task (:func:`send_webhook`), never by the request
whose run made it (``runs/webhooks/outbox.py``). A retry is queued as a deferred task
when the task backend can defer one; :func:`deliver_due` (the task
``send_due_webhooks``) sends every delivery that is due, whatever queued it,
and picks up attempts whose worker died.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import httpx
from django.db.models import F
from django.utils import timezone

from llm_conversations.conf import conf
from llm_conversations.core.webhook_signing import signature_headers
from llm_conversations.models import DeliveryStatus, WebhookDelivery
from llm_conversations.runs.webhooks.hosts import host_problem, url_host, url_problem
from llm_conversations.tasks.enqueue import enqueue, enqueue_later, task
from llm_conversations.tools.async_loop import shared_loop, submit

__all__ = [
    "CLAIM_MARGIN_SECONDS",
    "MAX_BACKOFF_SECONDS",
    "backoff",
    "deliver",
    "deliver_due",
    "enqueue_delivery",
    "send_due_webhooks",
    "send_webhook",
    "shared_client",
]

logger = logging.getLogger("llm_conversations.webhooks")

MAX_BACKOFF_SECONDS = 6 * 3600
CLAIM_MARGIN_SECONDS = 30
"""How long a claim outlasts its attempt's deadline: room to record the outcome."""
# Statuses worth another attempt besides 5xx: the receiver timed out or is busy.
_RETRY_STATUSES = frozenset({408, 429})
_USER_AGENT = "llm-conversations-webhooks"
# How much longer than the deadline a worker waits for the loop to report the
# attempt cancelled (a loop stalled by a blocking coroutine); well within the claim.
_LATE_SECONDS = 5.0

# (response status or None, error text, whether to try again)
Outcome = tuple[int | None, str, bool]

_client: tuple[asyncio.AbstractEventLoop, httpx.AsyncClient] | None = None
_client_lock = threading.Lock()


def shared_client() -> httpx.AsyncClient:
    """The process's one webhook client, on the shared event loop: pooled
    connections, no redirects followed (a new one when the loop is new)."""
    global _client
    loop = shared_loop()
    with _client_lock:
        if _client is None or _client[0] is not loop:
            _client = (
                loop,
                httpx.AsyncClient(
                    follow_redirects=False,
                    limits=httpx.Limits(max_connections=20, max_keepalive_connections=10),
                    headers={"user-agent": _USER_AGENT},
                ),
            )
        return _client[1]


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


async def _send(
    client: httpx.AsyncClient, url: str, body: bytes, headers: dict[str, str], seconds: float
) -> Outcome:
    """One attempt on the event loop, ended at ``seconds`` whatever the receiver does."""
    try:
        async with asyncio.timeout(seconds):
            # The host's addresses are looked up (in a thread) within the deadline too.
            problem = await asyncio.get_running_loop().run_in_executor(
                None, host_problem, url_host(url)
            )
            if problem is not None:
                return None, problem, False
            # Streamed and closed unread: a receiver's body is never needed.
            async with client.stream(
                "POST", url, content=body, headers=headers, timeout=seconds
            ) as response:
                status = response.status_code
    except (TimeoutError, httpx.TimeoutException):
        return None, "the request timed out", True
    except httpx.HTTPError as exc:
        return None, f"the request failed ({type(exc).__name__})", True
    if 200 <= status < 300:
        return status, "", False
    return status, f"HTTP {status}", status >= 500 or status in _RETRY_STATUSES


def _attempt(
    client: httpx.AsyncClient | None,
    url: str,
    secret: str,
    delivery: WebhookDelivery,
    stamp: int,
) -> Outcome:
    """Send once, within ``WEBHOOK_TIMEOUT`` of wall-clock time. No secret in the error text."""
    if (problem := url_problem(url)) is not None:
        return None, problem, False
    body = json.dumps(delivery.payload, separators=(",", ":")).encode()
    headers = {
        "content-type": "application/json",
        **signature_headers(secret, delivery.message_id, stamp, body),
    }
    seconds = conf.WEBHOOK_TIMEOUT
    future = submit(_send(client or shared_client(), url, body, headers, seconds))
    try:
        return future.result(timeout=seconds + _LATE_SECONDS)
    except TimeoutError:
        future.cancel()
        return None, "the request timed out", True


def deliver(
    delivery_id: uuid.UUID | str,
    *,
    now: Callable[[], datetime] = timezone.now,
    client: httpx.AsyncClient | None = None,
) -> WebhookDelivery | None:
    """Make one attempt of a due delivery; ``None`` when it is not due (or not pending).

    ``now`` is the clock (tests pass their own) and ``client`` the httpx client
    the attempt uses on the shared event loop (the shared one by default).
    Never raises for a failed attempt: the outcome is recorded on the row.
    """
    moment = now()
    in_flight = moment + timedelta(seconds=conf.WEBHOOK_TIMEOUT + CLAIM_MARGIN_SECONDS)
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
        status, error, again = _attempt(client, *target, delivery, int(moment.timestamp()))
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
    if not WebhookDelivery.objects.filter(
        pk=delivery.pk, status=DeliveryStatus.PENDING, attempts=delivery.attempts
    ).update(**fields):
        # Another attempt holds the delivery now: its outcome stands, not this one's.
        delivery.refresh_from_db()
        return delivery
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
    client: httpx.AsyncClient | None = None,
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
