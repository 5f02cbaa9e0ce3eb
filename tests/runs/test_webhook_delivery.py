"""Sending webhooks: retries with backoff on an injected clock, outcomes, allowed hosts,
claims, and no transaction open across the request, over a real socket on 127.0.0.1."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import httpx
import pytest
from django.db import connection

from llm_conversations.models import (
    DeliveryStatus,
    WebhookDelivery,
)
from llm_conversations.runs.webhook_delivery import deliver, deliver_due, host_problem
from llm_conversations.runs.webhooks import endpoint_problems
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
        "the host has a private, loopback or reserved address",
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


def test_a_delivery_is_attempted_once_by_two_workers(settings: Any, hooks: Receiver) -> None:
    delivery = queued(settings)
    assert deliver(delivery.pk) is not None
    assert deliver(delivery.pk) is None  # delivered: nothing to claim
    assert len(hooks.requests) == 1


@pytest.mark.django_db(transaction=True)
def test_no_transaction_is_open_while_a_webhook_is_sent(settings: Any, hooks: Receiver) -> None:
    hooks.statuses = [500]
    seen: list[bool] = []

    def check(request: httpx.Request) -> None:
        seen.append(connection.in_atomic_block)

    clock = Clock()
    with httpx.Client(event_hooks={"request": [check]}) as client:
        delivery = queued(settings)
        deliver(delivery.pk, now=clock, client=client)
        clock.now += timedelta(seconds=10)
        deliver_due(now=clock, client=client)
    assert seen == [False, False]
    assert WebhookDelivery.objects.get().status == DeliveryStatus.DELIVERED


def test_a_delivery_in_flight_is_not_claimed_again(settings: Any, hooks: Receiver) -> None:
    delivery = queued(settings)
    during: list[Any] = []

    def second_worker(request: httpx.Request) -> None:
        during.append(deliver(delivery.pk))
        during.append(deliver_due())

    with httpx.Client(event_hooks={"request": [second_worker]}) as client:
        row = deliver(delivery.pk, client=client)
    assert during == [None, 0]
    assert row is not None
    assert (row.status, row.attempts) == ("delivered", 1)
    assert len(hooks.requests) == 1
