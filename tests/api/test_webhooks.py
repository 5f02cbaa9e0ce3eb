"""``/api/webhooks/``: the caller's endpoints; another user's are 404 and a secret is never answered."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from llm_conversations.core.webhook_signing import new_secret
from llm_conversations.models import WebhookDelivery, WebhookEndpoint
from llm_conversations.users import User

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
