"""Load a 1,000-message conversation with tool turns as ChatMessages.

Prints the time per load against the floor, a raw cursor fetch of the same
columns with ``json.loads`` of the calls column, and the ratio (target at
most 1.6x); the ORM's ``values()`` of the same rows is printed beside them.
The three are timed in turn, round after round, and each keeps its fastest
round, so a machine whose speed drifts moves all three alike. Runs on the
demo project's database settings (``DATABASE_URL`` for PostgreSQL) in a
throwaway test database.
"""

from __future__ import annotations

import json
import os
import sys
import time
import timeit
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

import django

django.setup()

from django.db import connection
from django.test.utils import setup_test_environment

from llm_conversations.conversations import create_conversation, load_messages
from llm_conversations.core.messages import ChatMessage, ToolCall
from llm_conversations.models import MESSAGE_COLUMNS, Message


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

        queryset = Message.objects.filter(conversation_id=pk).order_by("position")
        sql, params = queryset.values_list(*MESSAGE_COLUMNS).query.sql_with_params()

        def floor() -> object:
            with connection.cursor() as cursor:
                cursor.execute(sql, params)
                return [
                    (role, content, None if calls is None else json.loads(calls), *rest)
                    for role, content, calls, *rest in cursor.fetchall()
                ]

        def values() -> object:
            return list(queryset.values(*MESSAGE_COLUMNS))

        def typed() -> object:
            return load_messages(pk)

        timed: dict[str, Callable[[], object]] = {
            "raw cursor floor": floor,
            "values()": values,
            "load_messages()": typed,
        }
        assert all(len(f()) == 1000 for f in timed.values())  # type: ignore[arg-type]
        print(f"database: {connection.vendor}")
        for clock, timer in (
            ("wall", time.perf_counter),
            ("CPU of this process", time.process_time),
        ):
            rounds, best = 10, dict.fromkeys(timed, float("inf"))
            for _ in range(30):
                for name, function in timed.items():
                    seconds = timeit.timeit(function, timer=timer, number=rounds) / rounds
                    best[name] = min(best[name], seconds)
            print(f"{clock} time, the fastest of 30 rounds of 10:")
            for name, seconds in best.items():
                print(f"  {name + ':':18} {seconds * 1000:.2f} ms per 1,000 messages")
            floor_s = best["raw cursor floor"]
            print(f"  values() / floor:        {best['values()'] / floor_s:.2f}x")
            print(
                f"  load_messages() / floor: {best['load_messages()'] / floor_s:.2f}x"
                " (target <= 1.6x)"
            )
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
