"""Webhooks of runs: which events make which deliveries, sent over a real socket to a
receiver on 127.0.0.1 that checks each signature as a host would (``verify``).

Retries, outcomes and allowed hosts: ``test_delivery.py``.
"""

from __future__ import annotations

import importlib
import json
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from llm_conversations.conversations import create_conversation
from llm_conversations.core.completions import CompletionResponse
from llm_conversations.core.messages import ChatMessage
from llm_conversations.exceptions import ProviderUnavailableError
from llm_conversations.models import (
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
from llm_conversations.runs.webhooks.delivery import send_webhook
from llm_conversations.runs.webhooks.outbox import queue_event
from tests.conftest import TASKS_PACKAGE, task_backend
from tests.support import loop_tools
from tests.support.http_server import LocalHTTPServer
from tests.support.webhook_receiver import (
    OWNER_SECRET,
    Receiver,
    hooks,
    receiver,
)

__all__ = ["hooks", "receiver"]  # fixtures

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


@pytest.mark.parametrize("background_runs", [True, False])
def test_each_attempt_is_a_task_wherever_the_run_executed(
    settings: Any,
    hooks: Receiver,
    django_capture_on_commit_callbacks: Any,
    background_runs: bool,
) -> None:
    settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "BACKGROUND_RUNS": background_runs}
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
