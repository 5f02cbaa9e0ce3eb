"""The demo seed command is idempotent and covers the documented cases."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from llm_conversations.models import Conversation, Message

pytestmark = pytest.mark.django_db


def test_seed_twice_creates_everything_once() -> None:
    out = StringIO()
    call_command("seed_demo", stdout=out)
    call_command("seed_demo", stdout=out)
    assert "password: demo" in out.getvalue()
    user = get_user_model().objects.get(username="demo")
    assert user.is_staff
    assert user.check_password("demo")
    assert Conversation.objects.filter(owner=user).count() == 3
    calls = Message.objects.get(
        tool_calls__isnull=False, conversation__metadata__demo="parallel-tools"
    )
    assert [call["function"]["arguments"] for call in calls.tool_calls] == [
        {"city": "Paris", "unit": "celsius"},
        {},
    ]
    assert Message.objects.filter(role="tool", is_error=True).count() == 1
