"""Seed the demo: a staff user and conversations that show every kind of turn.

Safe to run again: existing demo rows are left as they are.
"""

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from llm_conversations.messages import ChatMessage, ToolCall
from llm_conversations.models import Conversation
from llm_conversations.services import create_conversation

USERNAME = "demo"
PASSWORD = "demo"  # a local demo account, printed on purpose

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
        self.stdout.write(
            f"Demo data: {added} conversation(s) added, {len(DEMOS) - added} already there.\n"
            f"Admin: http://127.0.0.1:8000/admin/  user: {USERNAME}  password: {PASSWORD}"
        )
