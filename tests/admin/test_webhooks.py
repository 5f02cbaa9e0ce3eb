"""The webhook admin: read-only endpoints and deliveries; a secret is shown only as set."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from llm_conversations.core.webhook_signing import new_secret
from llm_conversations.models import WebhookDelivery, WebhookEndpoint

pytestmark = pytest.mark.django_db

SECRET = new_secret()


@pytest.fixture
def staff_client() -> Client:
    user = get_user_model().objects.create_superuser("staff", "staff@example.com", "pw")
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def endpoint() -> WebhookEndpoint:
    owner = get_user_model().objects.create_user("dora")
    return WebhookEndpoint.objects.create(
        owner=owner, url="https://hooks.example.com/in", secret=SECRET, events=["run.failed"]
    )


def test_endpoint_pages_never_show_the_secret(
    staff_client: Client, endpoint: WebhookEndpoint
) -> None:
    listing = staff_client.get(reverse("admin:llm_conversations_webhookendpoint_changelist"))
    page = staff_client.get(
        reverse("admin:llm_conversations_webhookendpoint_change", args=[endpoint.pk])
    )
    for response in (listing, page):
        assert response.status_code == 200
        text = response.content.decode()
        assert "https://hooks.example.com/in" in text
        assert SECRET not in text
        assert SECRET.removeprefix("whsec_")[:12] not in text
    assert "Signing secret" in page.content.decode()
    assert "run.failed" in page.content.decode()


def test_endpoints_and_deliveries_cannot_be_added_changed_or_deleted(
    staff_client: Client, endpoint: WebhookEndpoint
) -> None:
    delivery = WebhookDelivery.objects.create(
        endpoint=endpoint, event="run.failed", payload={"type": "run.failed"}, last_error="HTTP 500"
    )
    for model, pk in (("webhookendpoint", endpoint.pk), ("webhookdelivery", delivery.pk)):
        assert staff_client.get(reverse(f"admin:llm_conversations_{model}_add")).status_code == 403
        change = reverse(f"admin:llm_conversations_{model}_change", args=[pk])
        assert staff_client.post(change, {"status": "delivered"}).status_code == 403
        delete = reverse(f"admin:llm_conversations_{model}_delete", args=[pk])
        assert staff_client.post(delete, {"post": "yes"}).status_code == 403
    assert WebhookEndpoint.objects.get().secret == SECRET
    assert WebhookDelivery.objects.get().status == "pending"


def test_delivery_list_and_page(
    staff_client: Client, endpoint: WebhookEndpoint, django_assert_max_num_queries: Any
) -> None:
    for n in range(5):
        WebhookDelivery.objects.create(
            endpoint=endpoint, event="run.failed", payload={"type": "run.failed", "n": n}
        )
    WebhookDelivery.objects.create(endpoint_name="ops", event="run.completed", payload={})
    url = reverse("admin:llm_conversations_webhookdelivery_changelist")
    staff_client.get(url)
    with django_assert_max_num_queries(8):
        response = staff_client.get(url)
    text = response.content.decode()
    assert "WEBHOOKS[&#x27;ops&#x27;]" in text
    assert text.count("https://hooks.example.com/in") == 5
    delivery = WebhookDelivery.objects.filter(endpoint=endpoint).first()
    assert delivery is not None
    page = staff_client.get(
        reverse("admin:llm_conversations_webhookdelivery_change", args=[delivery.pk])
    )
    assert "&quot;type&quot;: &quot;run.failed&quot;" in page.content.decode()
    assert SECRET not in page.content.decode()
