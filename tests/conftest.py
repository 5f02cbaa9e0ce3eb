from __future__ import annotations

import pytest
from django.db import connection

from llm_conversations.messages import ChatMessage, ToolCall


def parallel_call_history() -> list[ChatMessage]:
    """A system prompt, a user turn, two parallel calls (one with empty
    arguments), their results (one an error), and a final user turn."""
    return [
        ChatMessage.system("Be brief."),
        ChatMessage.user("Weather in Paris and the time?"),
        ChatMessage.assistant_tool_calls(
            [
                ToolCall("call_1", "get_weather", {"city": "Paris"}),
                ToolCall("call_2", "get_time", {}),
            ]
        ),
        ChatMessage.tool_result("call_1", '{"temperature": 18}'),
        ChatMessage.tool_result("call_2", "clock unavailable", is_error=True),
        ChatMessage.user("Thanks. And tomorrow?"),
    ]


@pytest.fixture
def history() -> list[ChatMessage]:
    return parallel_call_history()


requires_postgresql = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="needs PostgreSQL row locks"
)
