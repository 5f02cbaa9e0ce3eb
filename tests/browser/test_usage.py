"""The admin's usage page in a real headless Chromium: its SVG charts render."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from llm_conversations.conversations import append_completion, append_messages, create_conversation
from llm_conversations.core.completions import CompletionResponse, Usage
from llm_conversations.core.messages import ChatMessage
from llm_conversations.models import Message

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "browser-pass"


def seed() -> None:
    """Turns of two models and two users on three days; one model has no prices."""
    users = get_user_model()
    conversations = {
        name: create_conversation(owner=users.objects.create_user(name)) for name in ("ann", "ben")
    }
    now = timezone.now()
    turns = [
        ("ann", 0, "gpt-4o", (1200, 300), "0.006"),
        ("ann", 2, "gpt-4o", (800, 100), "0.003"),
        ("ben", 2, "claude-haiku-4-5", (2000, 400), "0.004"),
        ("ben", 9, "llama3", (500, 50), None),
    ]
    for owner, days_ago, model, (tokens_in, tokens_out), cost in turns:
        conversation = conversations[owner]
        append_messages(conversation, [ChatMessage.user("hi")])
        reply = CompletionResponse(
            content="hello",
            usage=Usage(input_tokens=tokens_in, output_tokens=tokens_out),
            model=model,
            provider="openai",
        )
        row = append_completion(conversation, reply, cost=None if cost is None else Decimal(cost))
        Message.objects.filter(pk=row.pk).update(created_at=now - timedelta(days=days_ago))


def test_usage_page_draws_its_charts(page: Any, live_server: Any, tmp_path: Path) -> None:
    get_user_model().objects.create_superuser("staff", "staff@example.com", PASSWORD)
    seed()
    page.goto(f"{live_server.url}/admin/login/?next=/admin/")
    page.fill("#id_username", "staff")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{live_server.url}/admin/")
    page.goto(f"{live_server.url}/admin/llm_conversations/conversation/")
    page.click("text=Usage")
    page.wait_for_url(f"{live_server.url}/admin/llm_conversations/conversation/usage/")
    charts = page.locator("figure.llmconv-chart svg")
    charts.first.wait_for(state="visible")
    assert charts.count() == 4
    # Bars per chart: spend by model, tokens by model, spend by user, tokens by user.
    # llama3 (ben's, 9 days ago) has tokens but no prices, so no spend bar.
    bars = page.evaluate(
        """() => [...document.querySelectorAll('figure.llmconv-chart svg')]
              .map(svg => svg.querySelectorAll('rect.llmconv-bar').length)"""
    )
    assert bars == [3, 4, 3, 4]
    # Every bar is drawn: a real box of positive size inside its chart.
    sizes = page.evaluate(
        """() => [...document.querySelectorAll('rect.llmconv-bar')].map(r => {
              const box = r.getBBox(); return [box.width, box.height]; })"""
    )
    assert len(sizes) == 14
    assert all(width > 0 and height > 0 for width, height in sizes)
    tooltips = page.locator("#usage-by-user rect.llmconv-bar title").all_text_contents()
    assert sum(text.endswith(" ann: $0.0060") for text in tooltips) == 1
    legend = page.locator("#usage-by-model figure").first.locator(".llmconv-legend li")
    assert legend.all_inner_texts() == [
        "gpt-4o (openai): $0.0090",
        "claude-haiku-4-5 (openai): $0.0040",
    ]
    shot = tmp_path / "usage-page.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
