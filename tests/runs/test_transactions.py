"""No database transaction is open while a provider or a tool is called.

These tests run outside the per-test transaction (``transaction=True``), since
inside it every call would look transactional.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client, override_settings

from llm_conversations.conversations import create_conversation
from llm_conversations.core.messages import ChatMessage
from llm_conversations.runs import ToolLoopService
from tests.support import loop_tools

pytestmark = pytest.mark.django_db(transaction=True)

PROBE_SETTINGS: dict[str, Any] = {
    "DEFAULT_PROVIDER": "probe",
    "PROVIDERS": {"probe": {"BACKEND": "tests.support.loop_tools.ProbeProvider", "MODEL": "probe"}},
    "TOOLS": ["tests.support.loop_tools.probe"],
    # Inline, on the request's own connection: the case where a held transaction would show.
    "TOOL_TIMEOUT": None,
}
CALL_PROBE = json.dumps(
    {
        "tool_calls": [
            {"id": "p", "type": "function", "function": {"name": "probe", "arguments": {}}}
        ]
    }
)


@pytest.fixture(autouse=True)
def clean_probe() -> None:
    loop_tools.atomic_seen.clear()


@override_settings(LLM_CONVERSATIONS=PROBE_SETTINGS)
def test_the_loop_calls_provider_and_tools_outside_transactions() -> None:
    run = ToolLoopService().send(create_conversation(), ChatMessage.user(CALL_PROBE))
    assert run.status == "completed"
    assert loop_tools.atomic_seen == [("provider", False), ("tool", False), ("provider", False)]


@override_settings(LLM_CONVERSATIONS=PROBE_SETTINGS)
@pytest.mark.parametrize("stream", [False, True])
def test_the_api_runs_outside_atomic_requests(
    monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    monkeypatch.setitem(connection.settings_dict, "ATOMIC_REQUESTS", True)
    user = get_user_model().objects.create_user("probe-user")
    client = Client()
    client.force_login(user)
    conversation = create_conversation(owner=user)
    response = client.post(
        f"/api/conversations/{conversation.pk}/runs/",
        {"message": CALL_PROBE, "stream": stream},
        content_type="application/json",
    )
    assert response.status_code == (200 if stream else 201)
    if stream:
        b"".join(response.streaming_content)
    assert loop_tools.atomic_seen == [("provider", False), ("tool", False), ("provider", False)]
