"""Admin: read-only transcripts of stored conversations."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.utils.safestring import SafeString
from django.utils.text import Truncator

from llm_conversations.models import Conversation, Message


@dataclass
class TranscriptCall:
    """A tool call as shown in the admin, with the tool turn that answers it."""

    id: str
    name: str
    arguments: str
    malformed: bool
    result: Message | None = None


@dataclass
class TranscriptEntry:
    """One row of the transcript: a message, and its calls for assistant turns."""

    message: Message
    calls: list[TranscriptCall] = field(default_factory=list)


def transcript(messages: list[Message]) -> list[TranscriptEntry]:
    """Pair each tool result with the call it answers; unpaired results stay rows."""
    entries: list[TranscriptEntry] = []
    open_calls: dict[str, TranscriptCall] = {}
    for message in messages:
        if message.role == "tool" and message.tool_call_id in open_calls:
            open_calls.pop(message.tool_call_id).result = message
            continue
        entry = TranscriptEntry(message)
        if message.tool_calls:
            open_calls = {}
            for call in message.to_chat_message().tool_calls or ():
                shown = TranscriptCall(
                    id=call.id,
                    name=call.name,
                    arguments=call.raw_arguments
                    if call.raw_arguments is not None
                    else json.dumps(call.arguments, indent=2, ensure_ascii=False),
                    malformed=call.malformed,
                )
                open_calls[call.id] = shown
                entry.calls.append(shown)
        entries.append(entry)
    return entries


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    """Conversations with their transcript; subclass it to customise."""

    list_display = ("__str__", "owner", "message_count", "created_at", "updated_at")
    list_select_related = ("owner",)
    list_filter = ("created_at", "updated_at")
    search_fields = ("title", f"owner__{get_user_model().USERNAME_FIELD}")
    raw_id_fields = ("owner",)
    date_hierarchy = "created_at"
    readonly_fields = ("id", "message_count", "created_at", "updated_at", "transcript")
    fields = (
        "id",
        "title",
        "owner",
        "metadata",
        "message_count",
        "created_at",
        "updated_at",
        "transcript",
    )

    class Media:
        css = {"all": ["llm_conversations/admin.css"]}

    @admin.display(description="Transcript")
    def transcript(self, obj: Conversation) -> SafeString:
        messages = list(obj.messages.order_by("position")) if obj.pk else []
        return render_to_string(
            "llm_conversations/admin/transcript.html", {"entries": transcript(messages)}
        )


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin):
    """Stored turns; read-only, since rewriting history breaks call/result pairing."""

    list_display = ("position", "conversation", "role", "summary", "is_error", "created_at")
    list_filter = ("role", "is_error")
    list_select_related = ("conversation",)
    search_fields = ("content", "tool_call_id")
    ordering = ("conversation", "position")

    @admin.display(description="Content")
    def summary(self, obj: Message) -> str:
        if obj.tool_calls:
            return "calls: " + ", ".join(call["function"]["name"] for call in obj.tool_calls)
        return Truncator(obj.content).chars(80)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
