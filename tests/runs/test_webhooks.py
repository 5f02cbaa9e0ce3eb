"""Webhooks of runs, sent over a real socket to a receiver on 127.0.0.1.

The receiver checks each signature as a host would (``verify``); retries are
driven by an injected clock, so no test sleeps for its backoff.
"""

from __future__ import annotations

import importlib
import json
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler
from typing import Any

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone

from llm_conversations.conversations import create_conversation
from llm_conversations.core.completions import CompletionResponse
from llm_conversations.core.messages import ChatMessage
from llm_conversations.core.webhook_signing import new_secret, verify
from llm_conversations.exceptions import ProviderUnavailableError
from llm_conversations.models import (
    DeliveryStatus,
    Run,
    RunStatus,
    WebhookDelivery,
    WebhookEndpoint,
    WebhookEvent,
)
from llm_conversations.providers import EchoProvider
from llm_conversations.providers.base import CompletionRequest
from llm_conversations.runs import ToolLoopService
from llm_conversations.runs.transitions import cancel_run
from llm_conversations.runs.webhook_delivery import deliver, deliver_due, host_problem, send_webhook
from llm_conversations.runs.webhooks import endpoint_problems, queue_event
from tests.conftest import TASKS_PACKAGE, task_backend
from tests.support import loop_tools
from tests.support.http_server import LocalHTTPServer, serving, stop_event

SECRET = new_secret()
OWNER_SECRET = new_secret()
APPROVAL = json.dumps(
    {
        "tool_calls": [
            {
                "id": "d1",
                "type": "function",
                "function": {"name": "delete_file", "arguments": {"path": "/a"}},
            }
        ]
    }
)


@dataclass
class Receiver:
    """What the receiver was sent, and the statuses it answers with, in order (then 200)."""

    statuses: list[int] = field(default_factory=list)
    requests: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    hang: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def respond(self, handler: BaseHTTPRequestHandler) -> None:
        with self.lock:
            self.requests.append(({k.lower(): v for k, v in handler.headers.items()}, handler.body))
            status = self.statuses.pop(0) if self.statuses else 200
        if self.hang:
            stop_event(handler).wait(5)
            return
        handler.send_response(status)
        if status == 302:
            handler.send_header("location", "/elsewhere")
        handler.send_header("content-length", "2")
        handler.end_headers()
        handler.wfile.write(b"ok")

    def payloads(self, secret: str = SECRET) -> list[dict[str, Any]]:
        """Each body, once its signature is checked as a receiver checks it."""
        now = timezone.now().timestamp()
        for headers, body in self.requests:
            assert verify(secret, headers, body, now=now), "bad signature"
        return [json.loads(body) for _, body in self.requests]


@pytest.fixture
def receiver() -> Iterator[tuple[Receiver, LocalHTTPServer]]:
    state = Receiver()
    with serving(state.respond) as server:
        yield state, server


@pytest.fixture
def hooks(settings: Any, receiver: tuple[Receiver, LocalHTTPServer]) -> Receiver:
    """A ``WEBHOOKS`` endpoint at the receiver, which 127.0.0.1 may reach."""
    state, server = receiver
    settings.LLM_CONVERSATIONS = {
        **settings.LLM_CONVERSATIONS,
        "WEBHOOKS": {"ops": {"URL": server.root + "/hooks", "SECRET": SECRET}},
        "WEBHOOK_ALLOWED_HOSTS": ["127.0.0.1"],
    }
    return state


class Broken(EchoProvider):
    def send(self, request: CompletionRequest) -> CompletionResponse:
        raise ProviderUnavailableError("the provider is down", provider="echo")

    send_stream = send  # type: ignore[assignment]


def completed_run(capture: Any, provider: EchoProvider | None = None, **kwargs: Any) -> Run:
    with capture(execute=True):
        return ToolLoopService(provider or EchoProvider(), tools=loop_tools.registry()).send(
            create_conversation(**kwargs), ChatMessage.user("hello")
        )


pytestmark = pytest.mark.django_db


def test_a_completed_run_is_sent_signed_and_recorded(
    hooks: Receiver, django_capture_on_commit_callbacks: Any
) -> None:
    run = completed_run(django_capture_on_commit_callbacks)
    assert run.status == RunStatus.COMPLETED
    (payload,) = hooks.payloads()
    assert payload["type"] == "run.completed"
    assert payload["data"]["run"]["id"] == str(run.pk)
    assert payload["data"]["run"]["conversation_id"] == str(run.conversation_id)
    headers, _ = hooks.requests[0]
    assert headers["content-type"] == "application/json"
    delivery = WebhookDelivery.objects.get()
    assert headers["webhook-id"] == delivery.message_id
    assert (delivery.status, delivery.attempts, delivery.response_status) == ("delivered", 1, 200)
    assert delivery.endpoint_name == "ops"
    assert delivery.finished_at is not None
    assert delivery.next_attempt_at is None


def test_failed_cancelled_and_requires_action_events(
    hooks: Receiver, django_capture_on_commit_callbacks: Any
) -> None:
    failed = completed_run(django_capture_on_commit_callbacks, Broken())
    assert failed.status == RunStatus.FAILED
    service = ToolLoopService(EchoProvider(), tools=loop_tools.registry())
    with django_capture_on_commit_callbacks(execute=True):
        waiting = service.send(create_conversation(), ChatMessage.user(APPROVAL))
    assert waiting.status == RunStatus.REQUIRES_ACTION
    with django_capture_on_commit_callbacks(execute=True):
        cancel_run(waiting.pk)
    events = [(p["type"], p["data"]["run"]) for p in hooks.payloads()]
    assert [e for e, _ in events] == ["run.failed", "run.requires_action", "run.cancelled"]
    assert events[0][1]["error"] == {
        "type": "ProviderUnavailableError",
        "message": "the provider is down",
    }
    assert events[1][1]["waiting"] == [
        {"id": "d1", "name": "delete_file", "reason": "requires_approval"}
    ]
    assert events[2][1]["id"] == str(waiting.pk)


def test_an_endpoint_receives_only_the_events_it_names(
    settings: Any, hooks: Receiver, django_capture_on_commit_callbacks: Any
) -> None:
    entry = settings.LLM_CONVERSATIONS["WEBHOOKS"]["ops"]
    settings.LLM_CONVERSATIONS = {
        **settings.LLM_CONVERSATIONS,
        "WEBHOOKS": {"ops": {**entry, "EVENTS": ["run.failed"]}},
    }
    completed_run(django_capture_on_commit_callbacks)
    assert hooks.requests == []
    assert not WebhookDelivery.objects.exists()
    completed_run(django_capture_on_commit_callbacks, Broken())
    assert [p["type"] for p in hooks.payloads()] == ["run.failed"]


def test_owner_endpoints_receive_their_owners_runs_only(
    settings: Any,
    receiver: tuple[Receiver, LocalHTTPServer],
    django_capture_on_commit_callbacks: Any,
) -> None:
    state, server = receiver
    settings.LLM_CONVERSATIONS = {
        **settings.LLM_CONVERSATIONS,
        "WEBHOOK_ALLOWED_HOSTS": ["127.0.0.1"],
    }
    users = get_user_model().objects
    alice, bob = users.create_user("alice"), users.create_user("bob")
    endpoint = WebhookEndpoint.objects.create(
        owner=alice, url=server.root + "/a", secret=OWNER_SECRET
    )
    WebhookEndpoint.objects.create(
        owner=alice, url=server.root + "/off", secret=OWNER_SECRET, is_active=False
    )
    completed_run(django_capture_on_commit_callbacks, owner=bob)
    completed_run(django_capture_on_commit_callbacks)  # no owner
    assert state.requests == []
    run = completed_run(django_capture_on_commit_callbacks, owner=alice)
    (payload,) = state.payloads(OWNER_SECRET)
    assert payload["data"]["run"]["id"] == str(run.pk)
    assert WebhookDelivery.objects.get().endpoint == endpoint


class Clock:
    """An injected clock the test moves."""

    def __init__(self) -> None:
        self.now = timezone.now()

    def __call__(self) -> datetime:
        return self.now


def queued(settings: Any) -> WebhookDelivery:
    """A pending delivery to the ``ops`` endpoint, due now."""
    return WebhookDelivery.objects.create(
        endpoint_name="ops",
        event="run.completed",
        payload={"type": "run.completed"},
        next_attempt_at=timezone.now() - timedelta(seconds=1),
    )


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


def test_deliveries_of_a_run_are_written_in_one_insert(
    settings: Any, hooks: Receiver, django_assert_num_queries: Any
) -> None:
    owner = get_user_model().objects.create_user("carol")
    for n in range(3):
        WebhookEndpoint.objects.create(
            owner=owner, url=f"{hooks_url(settings)}/{n}", secret=OWNER_SECRET
        )
    run = Run.objects.create(
        conversation=create_conversation(owner=owner), status=RunStatus.COMPLETED
    )
    with django_assert_num_queries(2):  # the owner's endpoints, one INSERT
        created = queue_event(run, WebhookEvent.RUN_COMPLETED)
    assert len(created) == 4


def hooks_url(settings: Any) -> str:
    return str(settings.LLM_CONVERSATIONS["WEBHOOKS"]["ops"]["URL"])


def test_with_background_runs_each_attempt_is_a_task(
    settings: Any, hooks: Receiver, django_capture_on_commit_callbacks: Any
) -> None:
    settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "BACKGROUND_RUNS": True}
    settings.TASKS = {"default": {"BACKEND": task_backend("dummy.DummyBackend")}}
    service = ToolLoopService(EchoProvider(), tools=loop_tools.registry())
    run = service.start(create_conversation(), ChatMessage.user("hello"))
    with django_capture_on_commit_callbacks(execute=True):
        service.execute(run)
    backend: Any = importlib.import_module(TASKS_PACKAGE).task_backends["default"]
    webhook_tasks = [r for r in backend.results if r.task.name == send_webhook.name]
    (queued,) = webhook_tasks
    delivery = WebhookDelivery.objects.get()
    assert queued.args == [str(delivery.pk)]
    assert hooks.requests == []  # nothing sent in the run's process
    hooks.statuses = [503]
    before = timezone.now()
    assert send_webhook.call(*queued.args) == "pending"
    (retry,) = [r for r in backend.results if r.task.name == send_webhook.name][1:]
    assert retry.args == [str(delivery.pk)]
    assert retry.task.run_after >= before + timedelta(seconds=10)
    WebhookDelivery.objects.update(next_attempt_at=timezone.now())
    assert send_webhook.call(*retry.args) == "delivered"
    assert [p["type"] for p in hooks.payloads()] == ["run.completed", "run.completed"]
