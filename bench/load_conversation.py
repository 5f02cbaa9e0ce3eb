"""Load a 1,000-message conversation with tool turns as ChatMessages.

Prints the time per load against a raw ``values()`` fetch of the same rows
(the baseline) and the ratio; the target is at most 2x. Runs on the demo
project's database settings (``DATABASE_URL`` for PostgreSQL) in a
throwaway test database.
"""

from __future__ import annotations

import os
import sys
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

import django

django.setup()

from django.db import connection
from django.test.utils import setup_test_environment

from llm_conversations.conversations import create_conversation, load_messages
from llm_conversations.core.messages import ChatMessage, ToolCall
from llm_conversations.models import MESSAGE_FIELDS, Message


def history(size: int) -> list[ChatMessage]:
    """Rounds of user, assistant tool calls, two results, assistant answer."""
    messages: list[ChatMessage] = []
    round_no = 0
    while len(messages) < size:
        ids = (f"call_{round_no}_a", f"call_{round_no}_b")
        messages += [
            ChatMessage.user(f"Question {round_no}: weather and time?"),
            ChatMessage.assistant_tool_calls(
                [
                    ToolCall(ids[0], "get_weather", {"city": "Paris", "day": round_no}),
                    ToolCall(ids[1], "get_time"),
                ]
            ),
            ChatMessage.tool_result(ids[0], '{"temperature": 18, "sky": "cloudy"}'),
            ChatMessage.tool_result(ids[1], "09:00", is_error=round_no % 7 == 0),
            ChatMessage.assistant(f"Answer {round_no}: 18 degrees, cloudy, 09:00."),
        ]
        round_no += 1
    return messages[:size]


def main() -> None:
    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0)
    try:
        conversation = create_conversation(messages=history(1000))
        pk = conversation.pk

        def baseline() -> object:
            return list(
                Message.objects.filter(conversation_id=pk)
                .order_by("position")
                .values(*MESSAGE_FIELDS)
            )

        def typed() -> object:
            return load_messages(pk)

        assert len(typed()) == len(baseline()) == 1000  # type: ignore[arg-type]
        rounds = 30
        base = min(timeit.repeat(baseline, number=rounds, repeat=5)) / rounds
        ours = min(timeit.repeat(typed, number=rounds, repeat=5)) / rounds
        print(f"database: {connection.vendor}")
        print(f"values() baseline: {base * 1000:.2f} ms per 1,000 messages")
        print(f"load_messages():   {ours * 1000:.2f} ms per 1,000 messages")
        print(f"ratio: {ours / base:.2f}x (target <= 2x)")
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
