"""The demo chat page in a real headless Chromium."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model

from llm_conversations.models import Conversation, Message, Run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "browser-pass"


@pytest.fixture
def staff() -> Any:
    return get_user_model().objects.create_superuser("staff", "staff@example.com", PASSWORD)


def log_in(page: Any, base: str) -> None:
    page.goto(f"{base}/admin/login/?next=/")
    page.fill("#id_username", "staff")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")


def test_demo_page_streams_a_tool_call_and_its_result(
    page: Any, live_server: Any, staff: Any
) -> None:
    log_in(page, live_server.url)
    page.wait_for_url(f"{live_server.url}/")
    page.click("button.example[data-example=weather]")
    page.click("#send")
    card = page.locator(".card[data-tool-call-id]").first
    card.wait_for(state="visible")
    assert card.locator(".name").inner_text() == "get_weather"
    card.locator(".result").wait_for(state="visible")
    assert "Paris" in card.locator(".result").inner_text()
    page.locator("#status", has_text="Run completed").wait_for()
    # The echo backend's closing reply quotes the results.
    reply = page.locator(".msg.assistant").last
    assert "get_time" in reply.inner_text()
    conversation = Conversation.objects.get()
    assert [m.role for m in conversation.messages.all()] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    # Reloading shows the stored transcript, results paired with their calls.
    page.reload()
    page.locator("#conversations li").first.click()
    page.locator(".card .result").nth(1).wait_for(state="visible")
    assert page.locator(".msg.tool").count() == 0


def test_demo_page_approves_a_paused_run(page: Any, live_server: Any, staff: Any) -> None:
    log_in(page, live_server.url)
    page.wait_for_url(f"{live_server.url}/")
    page.click("button.example[data-example=email]")
    page.click("#send")
    page.locator("#action").wait_for(state="visible")
    assert "send_email" in page.locator("#pending").inner_text()
    run = Run.objects.get()
    assert run.status == "requires_action"
    page.click("#approve")
    page.locator("#status", has_text="Run completed").wait_for()
    run.refresh_from_db()
    assert run.status == "completed"
    assert list(run.decisions.values()) == ["approved"]
    result = Message.objects.get(role="tool")
    assert not result.is_error
    assert page.locator(".card .result").first.inner_text().strip() == result.content
