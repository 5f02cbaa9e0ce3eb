"""Sending webhooks: retries with backoff on an injected clock, outcomes, allowed hosts,
claims, and no transaction open across the request, over a real socket on 127.0.0.1."""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from typing import Any

import httpx
import pytest
from django.db import connection, connections
from django.utils import timezone

from llm_conversations.models import (
    DeliveryStatus,
    WebhookDelivery,
)
from llm_conversations.runs.webhooks.delivery import deliver, deliver_due
from llm_conversations.runs.webhooks.endpoints import endpoint_problems
from llm_conversations.runs.webhooks.hosts import host_problem
from llm_conversations.tools.async_loop import submit
from tests.support.http_server import serving
from tests.support.webhook_receiver import SECRET, Clock, Receiver, hooks, queued, receiver

__all__ = ["hooks", "receiver"]  # fixtures

pytestmark = pytest.mark.django_db


def test_server_errors_are_retried_with_exponential_backoff_then_delivered(
    settings: Any, hooks: Receiver
) -> None:
    hooks.statuses = [500, 503, 429]
    clock = Clock()
    delivery = queued(settings)
    first = deliver(delivery.pk, now=clock)
    assert first is not None
    assert (first.status, first.attempts, first.response_status, first.last_error) == (
        "pending",
        1,
        500,
        "HTTP 500",
    )
    assert first.next_attempt_at == clock.now + timedelta(seconds=10)
    clock.now += timedelta(seconds=9)
    assert deliver_due(now=clock) == 0  # not due yet
    waits = []
    for _ in range(2):
        clock.now = WebhookDelivery.objects.get().next_attempt_at
        assert deliver_due(now=clock) == 1
        row = WebhookDelivery.objects.get()
        waits.append((row.next_attempt_at - clock.now).total_seconds())
    assert waits == [20, 40]
    clock.now = WebhookDelivery.objects.get().next_attempt_at
    assert deliver_due(now=clock) == 1
    row = WebhookDelivery.objects.get()
    assert (row.status, row.attempts, row.response_status, row.last_error) == (
        "delivered",
        4,
        200,
        "",
    )
    hooks.payloads()  # every attempt signed
    assert len({headers["webhook-id"] for headers, _ in hooks.requests}) == 1
    stamps = [int(headers["webhook-timestamp"]) for headers, _ in hooks.requests]
    assert stamps == sorted(stamps)
    assert stamps[-1] - stamps[0] == 70


def test_gives_up_after_max_attempts(settings: Any, hooks: Receiver, caplog: Any) -> None:
    settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "WEBHOOK_MAX_ATTEMPTS": 2}
    hooks.statuses = [502, 502, 502]
    clock = Clock()
    delivery = queued(settings)
    deliver(delivery.pk, now=clock)
    clock.now += timedelta(seconds=10)
    with caplog.at_level(logging.WARNING, logger="llm_conversations.webhooks"):
        row = deliver(delivery.pk, now=clock)
    assert row is not None
    assert (row.status, row.attempts, row.last_error) == ("failed", 2, "HTTP 502")
    clock.now += timedelta(days=1)
    assert deliver_due(now=clock) == 0
    assert len(hooks.requests) == 2
    assert "failed after 2 attempt(s): HTTP 502" in caplog.text
    assert SECRET not in caplog.text


@pytest.mark.parametrize("status", [400, 401, 404, 410, 302])
def test_client_errors_and_redirects_fail_at_once(
    settings: Any, hooks: Receiver, status: int
) -> None:
    hooks.statuses = [status]
    row = deliver(queued(settings).pk)
    assert row is not None
    assert (row.status, row.attempts, row.response_status) == ("failed", 1, status)
    assert [h[0].get("webhook-id") for h in hooks.requests] == [
        row.message_id
    ]  # no redirect followed


def test_a_timeout_is_retried(settings: Any, hooks: Receiver) -> None:
    settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "WEBHOOK_TIMEOUT": 0.2}
    hooks.hang = True
    row = deliver(queued(settings).pk)
    assert row is not None
    assert (row.status, row.response_status, row.last_error) == (
        "pending",
        None,
        "the request timed out",
    )


def test_a_refused_connection_is_retried(settings: Any) -> None:
    with serving(lambda handler: None) as server:
        url = server.root + "/gone"
    settings.LLM_CONVERSATIONS = {
        **settings.LLM_CONVERSATIONS,
        "WEBHOOKS": {"ops": {"URL": url, "SECRET": SECRET}},
        "WEBHOOK_ALLOWED_HOSTS": ["127.0.0.1"],
    }
    row = deliver(queued(settings).pk)
    assert row is not None
    assert (row.status, row.last_error) == ("pending", "the request failed (ConnectError)")


def test_private_addresses_are_refused_unless_allowed(settings: Any, hooks: Receiver) -> None:
    settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "WEBHOOK_ALLOWED_HOSTS": None}
    row = deliver(queued(settings).pk)
    assert row is not None
    assert (row.status, row.last_error) == (
        "failed",
        "the host has a loopback address (127.0.0.1), not a public one",
    )
    assert hooks.requests == []


@pytest.mark.parametrize(
    ("addresses", "allowed", "refused"),
    [
        (["93.184.215.14"], None, False),
        (["93.184.215.14", "10.0.0.1"], None, True),
        (["169.254.169.254"], None, True),
        (["::1"], None, True),
        (["fd00::1"], None, True),
        (["64:ff9b::7f00:1"], None, True),  # NAT64 of 127.0.0.1
        (["64:ff9b::5db8:d70e"], None, False),  # NAT64 of a public address
        (["64:ff9b:1::a00:1"], None, True),  # local-use NAT64
        (["2002:7f00:1::1"], None, True),  # 6to4
        (["2002:5db8:d70e::1"], None, True),  # 6to4 of a public address: a relay decides
        (["::ffff:127.0.0.1"], None, True),  # IPv4-mapped
        (["::7f00:1"], None, True),  # IPv4-compatible
        (["224.0.0.1"], None, True),  # multicast
        (["ff0e::1"], None, True),  # global-scope multicast
        (["2606:4700::1111", "2001:0:4136:e378:8000:63bf:3fff:fdd2"], None, True),  # Teredo
        (["100.64.0.1"], None, True),  # shared (carrier-grade NAT)
        (["10.0.0.1"], ["hooks.internal"], False),
        (["93.184.215.14"], ["other.example"], True),
    ],
)
def test_host_rules(
    settings: Any, addresses: list[str], allowed: list[str] | None, refused: bool
) -> None:
    settings.LLM_CONVERSATIONS = {"WEBHOOK_ALLOWED_HOSTS": allowed}
    assert (host_problem("hooks.internal", resolve=lambda host: addresses) is not None) is refused


def test_urls_other_than_http_are_refused_when_sending(settings: Any) -> None:
    settings.LLM_CONVERSATIONS = {
        **settings.LLM_CONVERSATIONS,
        "WEBHOOKS": {"ops": {"URL": "file:///etc/passwd", "SECRET": SECRET}},
    }
    row = deliver(queued(settings).pk)
    assert row is not None
    assert (row.status, row.last_error) == ("failed", "only http and https URLs are sent webhooks")
    assert endpoint_problems("gopher://x", SECRET, []) == [
        "URL: only http and https URLs are sent webhooks"
    ]


def test_a_removed_endpoint_fails_the_delivery(settings: Any) -> None:
    settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "WEBHOOKS": {}}
    row = deliver(queued(settings).pk)
    assert row is not None
    assert (row.status, row.attempts) == ("failed", 1)


def test_an_attempt_goes_through_the_client_it_is_given(settings: Any, hooks: Receiver) -> None:
    sent: list[str] = []

    async def note(request: httpx.Request) -> None:
        sent.append(request.headers["webhook-id"])

    client = httpx.AsyncClient(event_hooks={"request": [note]})
    try:
        row = deliver(queued(settings).pk, client=client)
    finally:
        submit(client.aclose()).result()
    assert row is not None
    assert (row.status, sent) == ("delivered", [row.message_id])


def test_a_delivery_is_attempted_once_by_two_workers(settings: Any, hooks: Receiver) -> None:
    delivery = queued(settings)
    assert deliver(delivery.pk) is not None
    assert deliver(delivery.pk) is None  # delivered: nothing to claim
    assert len(hooks.requests) == 1


@pytest.mark.django_db(transaction=True)
def test_no_transaction_is_open_while_a_webhook_is_sent(settings: Any, hooks: Receiver) -> None:
    hooks.statuses = [500]
    seen: list[bool] = []
    # The worker's own connection (this thread's), looked at while the receiver answers.
    worker = connections["default"]
    hooks.during = lambda: seen.append(worker.in_atomic_block)
    clock = Clock()
    delivery = queued(settings)
    deliver(delivery.pk, now=clock)
    clock.now += timedelta(seconds=10)
    deliver_due(now=clock)
    assert seen == [False, False]
    assert WebhookDelivery.objects.get().status == DeliveryStatus.DELIVERED


def test_an_attempt_ends_at_its_deadline_however_slowly_the_receiver_drips(
    settings: Any, hooks: Receiver
) -> None:
    settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "WEBHOOK_TIMEOUT": 0.5}
    hooks.drip = 5  # a byte every 0.05 s: no read waits 0.5 s, the headers never end
    started = time.monotonic()
    row = deliver(queued(settings).pk)
    took = time.monotonic() - started
    assert row is not None
    assert (row.status, row.attempts, row.last_error) == ("pending", 1, "the request timed out")
    assert took < 1.5, f"the attempt took {took:.1f} s"
    assert len(hooks.requests) == 1


@pytest.mark.django_db(transaction=True)
def test_a_delivery_in_flight_is_claimed_past_its_deadline(settings: Any, hooks: Receiver) -> None:
    settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "WEBHOOK_TIMEOUT": 0.5}
    hooks.drip = 5
    delivery = queued(settings)
    during: dict[str, Any] = {}

    def second_worker() -> None:
        # Another worker, in the receiver's thread, while the attempt waits.
        try:
            during["claimed_until"] = WebhookDelivery.objects.get().next_attempt_at
            during["again"] = deliver(delivery.pk)
            # A sweep once the attempt's deadline passed still finds it claimed.
            during["swept"] = deliver_due(now=lambda: timezone.now() + timedelta(seconds=1))
        finally:
            connection.close()

    hooks.during = second_worker
    started = timezone.now()
    row = deliver(delivery.pk)
    ended = timezone.now()
    assert (during["again"], during["swept"]) == (None, 0)
    assert during["claimed_until"] >= started + timedelta(seconds=30.5)
    assert ended - started < timedelta(seconds=1.5)
    assert row is not None
    assert (row.status, row.attempts, row.last_error) == ("pending", 1, "the request timed out")
    assert (len(hooks.requests), hooks.most_at_once) == (1, 1)
