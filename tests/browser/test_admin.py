"""The admin transcript in a real headless Chromium."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from llm_conversations.conversations import create_conversation
from llm_conversations.core.messages import ChatMessage, ToolCall

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "browser-pass"


@pytest.fixture
def staff() -> Any:
    return get_user_model().objects.create_superuser("staff", "staff@example.com", PASSWORD)


def test_admin_shows_a_tool_call_card_with_its_result(
    page: Any, live_server: Any, staff: Any
) -> None:
    conversation = create_conversation(
        owner=staff,
        title="Parallel tool calls",
        messages=[
            ChatMessage.user("What's the weather in Paris, and what time is it?"),
            ChatMessage.assistant_tool_calls(
                [
                    ToolCall("call_weather", "get_weather", {"city": "Paris", "unit": "celsius"}),
                    ToolCall("call_time", "get_time", {}),
                ]
            ),
            ChatMessage.tool_result("call_weather", '{"city": "Paris", "temperature": 18}'),
            ChatMessage.tool_result("call_time", "2026-11-30T09:00:00Z"),
            ChatMessage.assistant("It is 18 °C in Paris, and the time is 09:00 UTC."),
        ],
    )
    page.goto(f"{live_server.url}/admin/login/?next=/admin/")
    page.fill("#id_username", "staff")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{live_server.url}/admin/")
    page.goto(f"{live_server.url}/admin/llm_conversations/conversation/{conversation.pk}/change/")
    card = page.locator("#call-call_weather")
    card.wait_for(state="visible")
    assert card.locator(".llmconv-tool-name").inner_text() == "get_weather"
    assert json.loads(card.locator(".llmconv-args").inner_text()) == {
        "city": "Paris",
        "unit": "celsius",
    }
    result = card.locator("#result-call_weather")
    assert result.is_visible()
    assert '"temperature": 18' in result.inner_text()
    # The empty-arguments call of the same turn has its own card and result.
    assert page.locator("#call-call_time .llmconv-args").inner_text() == "{}"
    assert page.locator("#result-call_time").is_visible()


def test_a_run_offering_forty_tools_has_a_short_page(
    page: Any, live_server: Any, staff: Any
) -> None:
    from llm_conversations.core.tool_specs import ToolSpec
    from llm_conversations.models import Run, RunStatus

    # Forty schemas the size of an MCP server's, as a run offering them stores them.
    schema = {
        "type": "object",
        "properties": {f"field_{n}": {"type": "string", "description": "x" * 60} for n in range(8)},
        "required": ["field_0"],
    }
    conversation = create_conversation(owner=staff, messages=[ChatMessage.user("hi")])
    run = Run(conversation=conversation, provider="echo", model="echo", status=RunStatus.COMPLETED)
    run.offered_tools = [ToolSpec(f"server__tool_{n}", "A tool. " * 30, schema) for n in range(40)]
    run.save()
    page.goto(f"{live_server.url}/admin/login/?next=/admin/")
    page.fill("#id_username", "staff")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{live_server.url}/admin/")
    page.goto(f"{live_server.url}/admin/llm_conversations/run/{run.pk}/change/")
    height = page.evaluate("document.documentElement.scrollHeight")
    assert page.locator(".llmconv-tools summary code").count() == 40
    # Printed in full, these schemas made the page 26,375 px tall (3,448 now).
    assert height < 4000
    # A schema opens on a click on its name.
    page.locator(".llmconv-tools summary").first.click()
    assert page.locator(".llmconv-tools details pre").first.is_visible()
