"""``/api/webhooks/``: the caller's endpoints; another user's are 404 and a secret is never answered."""

from __future__ import annotations

import importlib
import time
from typing import Any

import pytest
from rest_framework.test import APIClient

from llm_conversations.conversations import create_conversation
from llm_conversations.core.webhook_signing import new_secret
from llm_conversations.models import WebhookDelivery, WebhookEndpoint
from llm_conversations.runs.webhooks.delivery import send_webhook
from llm_conversations.users import User
from tests.conftest import TASKS_PACKAGE, task_backend
from tests.support.http_server import LocalHTTPServer
from tests.support.webhook_receiver import Receiver, receiver

__all__ = ["receiver"]  # fixtures

pytestmark = pytest.mark.django_db

URL = "/api/webhooks/"
SECRET = new_secret()


def create(client: APIClient, **body: Any) -> Any:
    return client.post(
        URL, {"url": "https://hooks.example.com/in", "secret": SECRET, **body}, format="json"
    )


def test_create_list_read_change_delete(client: APIClient, user: User) -> None:
    created = create(client, events=["run.failed", "run.failed"], description="ops")
    assert created.status_code == 201, created.content
    assert "location" not in created.headers
    body = created.json()
    assert body["secret_set"] is True
    assert "secret" not in body
    assert body["events"] == ["run.failed"]
    endpoint = WebhookEndpoint.objects.get()
    assert (endpoint.owner, endpoint.secret) == (user, SECRET)
    one = f"{URL}{body['id']}/"
    assert client.get(URL).json() == [client.get(one).json()]
    changed = client.patch(one, {"is_active": False, "events": []}, format="json")
    assert changed.status_code == 200
    assert (changed.json()["is_active"], changed.json()["events"]) == (False, [])
    rotated = new_secret()
    assert client.patch(one, {"secret": rotated}, format="json").status_code == 200
    assert WebhookEndpoint.objects.get().secret == rotated
    for response in (client.get(URL), client.get(one), changed):
        assert SECRET not in response.content.decode()
        assert rotated not in response.content.decode()
    assert client.delete(one).status_code == 204
    assert not WebhookEndpoint.objects.exists()


def test_another_users_endpoint_does_not_exist(client: APIClient, other_user: User) -> None:
    theirs = WebhookEndpoint.objects.create(
        owner=other_user, url="https://x.example", secret=SECRET
    )
    one = f"{URL}{theirs.pk}/"
    assert client.get(URL).json() == []
    for response in (
        client.get(one),
        client.patch(one, {"is_active": False}, format="json"),
        client.delete(one),
        client.get(f"{one}deliveries/"),
    ):
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"
    assert WebhookEndpoint.objects.get().is_active
    assert client.get(f"{URL}not-a-uuid/").status_code == 404


@pytest.mark.parametrize(
    ("body", "field", "code"),
    [
        ({"url": "ftp://hooks.example.com"}, "url", "invalid_url"),
        ({"url": "https://"}, "url", "invalid_url"),
        ({"url": "http://[\U00021103"}, "url", "invalid_url"),
        ({"url": "http://[::1"}, "url", "invalid_url"),
        ({"url": "https://x.example/\nSet-Cookie: a"}, "url", "invalid_url"),
        ({"secret": "hunter2-very-secret"}, "secret", "invalid_secret"),
        ({"events": ["run.started"]}, "events", "invalid_events"),
        ({"events": "run.failed"}, "events", "invalid"),
        ({"token": "x"}, "token", "unknown_field"),
    ],
)
def test_bad_input_is_a_400_naming_the_field_and_never_the_secret(
    client: APIClient, body: dict[str, Any], field: str, code: str
) -> None:
    response = create(client, **body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["field"], error["code"]) == (field, code)
    assert "hunter2" not in response.content.decode()
    assert not WebhookEndpoint.objects.exists()


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://127.0.0.1:8000/in", "a loopback address (127.0.0.1)"),
        ("http://localhost/in", "a loopback address"),
        ("http://[::1]/in", "a loopback address (::1)"),
        ("http://10.0.0.5/in", "a private address (10.0.0.5)"),
        ("http://169.254.169.254/latest/meta-data", "a link-local address (169.254.169.254)"),
        ("http://[64:ff9b::7f00:1]/in", "a loopback address (127.0.0.1, inside 64:ff9b::7f00:1)"),
        ("http://[2002:7f00:1::1]/in", "a 6to4 address (2002:7f00:1::1)"),
        ("http://224.0.0.1/in", "a multicast address (224.0.0.1)"),
    ],
)
def test_a_url_no_webhook_may_reach_is_refused_when_written(
    client: APIClient, user: User, url: str, why: str
) -> None:
    response = create(client, url=url)
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["field"], error["code"]) == ("url", "invalid_url")
    assert why in error["message"]
    assert not WebhookEndpoint.objects.exists()
    endpoint = WebhookEndpoint.objects.create(
        owner=user, url="https://hooks.example.com/in", secret=SECRET
    )
    changed = client.patch(f"{URL}{endpoint.pk}/", {"url": url}, format="json")
    assert (changed.status_code, changed.json()["error"]["code"]) == (400, "invalid_url")
    endpoint.refresh_from_db()
    assert endpoint.url == "https://hooks.example.com/in"


def test_allowed_hosts_are_the_one_way_to_a_private_receiver(
    client: APIClient, settings: Any
) -> None:
    settings.LLM_CONVERSATIONS = {
        **settings.LLM_CONVERSATIONS,
        "WEBHOOK_ALLOWED_HOSTS": ["127.0.0.1"],
    }
    assert create(client, url="http://127.0.0.1:8000/in").status_code == 201
    refused = create(client, url="http://10.0.0.5/in")
    assert refused.status_code == 400
    assert refused.json()["error"]["message"] == "the host is not in WEBHOOK_ALLOWED_HOSTS"


def test_a_secret_is_required(client: APIClient) -> None:
    response = client.post(URL, {"url": "https://hooks.example.com/in"}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "secret"


def test_deliveries_of_an_endpoint(
    client: APIClient, user: User, django_assert_num_queries: Any
) -> None:
    endpoint = WebhookEndpoint.objects.create(owner=user, url="https://x.example", secret=SECRET)
    for status in ("delivered", "failed"):
        WebhookDelivery.objects.create(
            endpoint=endpoint,
            event="run.completed",
            payload={"type": "run.completed"},
            status=status,
        )
    with django_assert_num_queries(2):  # the endpoint, its deliveries
        response = client.get(f"{URL}{endpoint.pk}/deliveries/")
    assert [d["status"] for d in response.json()] == ["failed", "delivered"]
    assert SECRET not in response.content.decode()


def test_anonymous_callers_are_refused() -> None:
    assert APIClient().get(URL).status_code in (401, 403)
    assert APIClient().post(URL, {}, format="json").status_code in (401, 403)


@pytest.mark.django_db(transaction=True)
def test_a_request_ending_a_run_returns_while_its_webhook_receiver_drips(
    client: APIClient,
    user: User,
    settings: Any,
    receiver: tuple[Receiver, LocalHTTPServer],
) -> None:
    state, server = receiver
    state.drip = 3  # a receiver that takes 3 s to answer
    settings.LLM_CONVERSATIONS = {
        **settings.LLM_CONVERSATIONS,
        "BACKGROUND_RUNS": False,
        "WEBHOOK_ALLOWED_HOSTS": ["127.0.0.1"],
    }
    settings.TASKS = {"default": {"BACKEND": task_backend("dummy.DummyBackend")}}
    WebhookEndpoint.objects.create(owner=user, url=server.root + "/in", secret=SECRET)
    conversation = create_conversation(owner=user)
    started = time.monotonic()
    response = client.post(
        f"/api/conversations/{conversation.pk}/runs/", {"message": "hello"}, format="json"
    )
    took = time.monotonic() - started
    assert (response.status_code, response.json()["status"]) == (201, "completed")
    assert took < 1.5, f"the request took {took:.1f} s"
    assert state.requests == []  # nothing sent from the request's thread
    delivery = WebhookDelivery.objects.get()
    backend: Any = importlib.import_module(TASKS_PACKAGE).task_backends["default"]
    queued = [r.args for r in backend.results if r.task.name == send_webhook.name]
    assert queued == [[str(delivery.pk)]]
