"""Seed the demo: a staff user and conversations that show every kind of turn.

Safe to run again: each demo conversation is found by its ``metadata["demo"]``
key and created only when missing.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from llm_conversations.conversations import create_conversation
from llm_conversations.core.messages import ChatMessage, ToolCall
from llm_conversations.models import Conversation
from llm_conversations.providers import EchoProvider
from llm_conversations.runs import ToolLoopService
from llm_conversations.tools import ToolRegistry
from project import tools

USERNAME = "demo"
PASSWORD = "demo"  # a local demo account, printed on purpose

# Stored as written: they read naturally but were not produced by a run.
DEMOS: dict[str, tuple[str, list[ChatMessage]]] = {
    "plain": (
        "Plain text",
        [
            ChatMessage.system("You are a concise assistant."),
            ChatMessage.user("What is the capital of France?"),
            ChatMessage.assistant("Paris."),
        ],
    ),
    "parallel-tools": (
        "Parallel tool calls",
        [
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
    ),
    "tool-error": (
        "A failing tool",
        [
            ChatMessage.user("Convert 100 USD to XYZ."),
            ChatMessage.assistant_tool_calls(
                [ToolCall("call_fx", "convert_currency", {"amount": 100, "to": "XYZ"})],
                "Let me convert that.",
            ),
            ChatMessage.tool_result("call_fx", "ValueError: unknown currency 'XYZ'", is_error=True),
            ChatMessage.assistant("Sorry, XYZ is not a currency I know."),
        ],
    ),
}


def calls_message(*calls: tuple[str, dict[str, Any]]) -> str:
    """A user message that makes the echo backend call these tools."""
    return json.dumps(
        {
            "tool_calls": [
                {"type": "function", "function": {"name": name, "arguments": arguments}}
                for name, arguments in calls
            ]
        }
    )


# Produced by the tool loop with the echo backend, so they have runs.
RUN_DEMOS: dict[str, tuple[str, str]] = {
    "echo-run": (
        "A run through the echo backend",
        calls_message(
            ("get_weather", {"city": "Lisbon"}), ("convert_currency", {"amount": 20, "to": "EUR"})
        ),
    ),
    "approval": (
        "A run paused for approval",
        calls_message(
            ("send_email", {"to": "team@example.com", "subject": "Hello", "body": "Hi all!"})
        ),
    ),
    # A call without a name is refused by the backend: the run fails.
    "failed-run": ("A failed run", calls_message(("", {}))),
}


def demo_registry() -> ToolRegistry:
    """The demo tools, independent of the ``TOOLS`` setting."""
    return ToolRegistry(
        [tools.get_weather, tools.get_time, tools.convert_currency, tools.send_email]
    )


class Command(BaseCommand):
    help = "Create the demo staff user and demo conversations (idempotent)."

    def handle(self, *args: Any, **options: Any) -> None:
        User = get_user_model()
        with transaction.atomic():
            user, created = User.objects.get_or_create(
                username=USERNAME, defaults={"is_staff": True, "is_superuser": True}
            )
            if created:
                user.set_password(PASSWORD)
                user.save(update_fields=["password"])
            existing = set(
                Conversation.objects.filter(metadata__has_key="demo").values_list(
                    "metadata__demo", flat=True
                )
            )
            added = 0
            for key, (title, messages) in DEMOS.items():
                if key in existing:
                    continue
                create_conversation(
                    owner=user, title=title, metadata={"demo": key}, messages=messages
                )
                added += 1
        # Runs outside the transaction: the loop commits each turn as it goes.
        service = ToolLoopService(EchoProvider(), tools=demo_registry())
        for key, (title, text) in RUN_DEMOS.items():
            if key in existing:
                continue
            conversation = create_conversation(owner=user, title=title, metadata={"demo": key})
            service.send(conversation, ChatMessage.user(text))
            added += 1
        total = len(DEMOS) + len(RUN_DEMOS)
        self.stdout.write(
            f"Demo data: {added} conversation(s) added, {total - added} already there.\n"
            f"Admin: http://127.0.0.1:8000/admin/  user: {USERNAME}  password: {PASSWORD}"
        )
