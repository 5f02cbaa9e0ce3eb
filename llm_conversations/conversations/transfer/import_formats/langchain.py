"""LangChain messages as ``messages_to_dict`` writes them: ``[{"type": "human", "data": {...}}, ...]``.

The form LangChain's file and SQL chat histories store, and django-ai-assistant's
``Message.message`` column. A file holds one conversation (an array of them),
several (an array of arrays, or of objects with ``messages``) or one per line.

By type: ``system`` and ``human`` are system and user turns (text; images given
as data URLs); ``ai`` (and ``AIMessageChunk``) an assistant turn of its text,
its ``tool_calls`` (``invalid_tool_calls`` kept as calls whose arguments did not
parse), its ``thinking`` / ``reasoning`` content blocks and
``additional_kwargs.reasoning_content`` as reasoning (tagged ``langchain``: shown,
never sent to a provider), the model its ``response_metadata`` names and its
``usage_metadata``; ``tool`` a tool turn answering ``tool_call_id`` (``status``
``error`` is an error result); ``chat`` by its role. What no turn holds is left
out and reported: ``additional_kwargs`` and ``response_metadata`` otherwise, a
tool's ``artifact``, legacy ``function`` messages and ``function_call``,
LangGraph's ``remove`` markers, content other than text and data-URL images.

Pure: no Django, no database, and no import of LangChain.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from llm_conversations.conversations.transfer.import_formats.foreign_conversations import (
    ForeignConversation,
    Transcript,
    mapping,
    message_arrays,
    messages_of,
    refuse,
    sequence,
    uses_message_arrays,
)
from llm_conversations.conversations.transfer.import_formats.openai_messages import content_parts
from llm_conversations.core.completions import Usage
from llm_conversations.core.messages import Role

__all__ = ["NAME", "REASONING_PROVIDER", "detect", "parse", "read_message", "split"]

NAME = "langchain"
REASONING_PROVIDER = "langchain"
_TYPES = frozenset(
    {"system", "human", "ai", "AIMessageChunk", "tool", "chat", "function", "remove"}
)
_CHAT_ROLES = {"user": "human", "human": "human", "assistant": "ai", "ai": "ai", "system": "system"}
# Content blocks of an AI message that are reasoning, or a call its tool_calls hold.
_THINKING = frozenset({"thinking", "reasoning"})
_CALL_BLOCKS = frozenset({"tool_use", "tool_call", "function_call"})


def _is_message(value: Any) -> bool:
    return (
        isinstance(value, Mapping)
        and value.get("type") in _TYPES
        and isinstance(value.get("data"), Mapping)
    )


def split(document: Any) -> list[tuple[str, Any]]:
    """The conversations of a file: one array of messages, or a list of them."""
    return message_arrays(document, _is_message)


def detect(document: Any) -> bool:
    """Whether the file's first conversation is an array of LangChain message dicts."""
    return uses_message_arrays(document, _is_message)


def parse(item: Any) -> ForeignConversation:
    """One conversation."""
    prefix = "messages" if isinstance(item, Mapping) else ""
    transcript = Transcript(reasoning_provider=REASONING_PROVIDER)
    for index, value in enumerate(sequence(messages_of(item), prefix)):
        read_message(transcript, value, f"{prefix}[{index}]")
    title = item.get("title") if isinstance(item, Mapping) else None
    source = item.get("id") if isinstance(item, Mapping) else None
    return transcript.finish(
        title=title if isinstance(title, str) else "",
        source_id=str(source) if isinstance(source, str | int) else None,
    )


def read_message(
    transcript: Transcript,
    value: Any,
    where: str,
    created_at: datetime | None = None,
    source_id: str | None = None,
) -> None:
    """Add one message dict to ``transcript`` (an AI message is a turn of its own)."""
    message = mapping(value, where)
    kind = message.get("type")
    data = mapping(message.get("data"), f"{where}.data")
    if kind == "chat":
        kind = _CHAT_ROLES.get(str(data.get("role")))
        if kind is None:
            transcript.note(
                "unknown_role", f"a chat message of role {data.get('role')!r} is left out.", where
            )
            return
    if kind in ("system", "human"):
        role = Role.SYSTEM if kind == "system" else Role.USER
        content = content_parts(transcript, data.get("content"), where, allow_files=kind == "human")
        transcript.plain(role, content, where, created_at, source_id)
    elif kind in ("ai", "AIMessageChunk"):
        _ai(transcript, data, where, created_at, source_id)
    elif kind == "tool":
        call_id = data.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise refuse(f"{where}.data.tool_call_id", "must name the call the result answers")
        if data.get("artifact") is not None:
            transcript.note("artifact_not_imported", "a tool's artifact is left out.", where)
        text = content_parts(transcript, data.get("content"), where, allow_files=False)
        transcript.result(
            call_id,
            text,
            where,
            is_error=data.get("status") == "error",
            created_at=created_at,
            source_id=source_id,
        )
    elif kind in ("function", "remove"):
        transcript.note(f"{kind}_message", f"a {kind} message is left out.", where)
    else:
        raise refuse(f"{where}.type", "must be a LangChain message type")


def _ai(
    transcript: Transcript,
    data: Mapping[str, Any],
    where: str,
    created_at: datetime | None,
    source_id: str | None,
) -> None:
    metadata = data.get("response_metadata")
    model = (
        metadata.get("model_name") or metadata.get("model")
        if isinstance(metadata, Mapping)
        else None
    )
    model = model if isinstance(model, str) else ""
    content = data.get("content")
    extra = data.get("additional_kwargs")
    reasoning = extra.get("reasoning_content") if isinstance(extra, Mapping) else None
    if isinstance(reasoning, str):
        transcript.thinking(reasoning, where, created_at, source_id, model)
    if isinstance(content, list):
        blocks = []
        for index, block in enumerate(content):
            kind = block.get("type") if isinstance(block, Mapping) else None
            if kind in _THINKING:
                text = block.get("thinking") or block.get("reasoning") or ""
                signature = block.get("signature")
                transcript.thinking(
                    str(text),
                    f"{where}.content[{index}]",
                    created_at,
                    source_id,
                    model,
                    signature=signature if isinstance(signature, str) else None,
                )
            elif kind not in _CALL_BLOCKS:
                blocks.append(block)
        content = blocks
    text = content_parts(transcript, content, where, allow_files=False)
    transcript.text(text if isinstance(text, str) else "", where, created_at, source_id, model)
    if isinstance(extra, Mapping) and extra.get("function_call") is not None:
        transcript.note("legacy_function_call", "a legacy function_call is left out.", where)
    for field in ("tool_calls", "invalid_tool_calls"):
        for index, raw in enumerate(sequence(data.get(field) or [], f"{where}.data.{field}")):
            call = mapping(raw, f"{where}.data.{field}[{index}]")
            if not call.get("id"):
                transcript.note(
                    "call_without_id",
                    "a tool call without an id is left out.",
                    f"{where}.data.{field}[{index}]",
                )
                continue
            transcript.call(
                str(call.get("id") or ""),
                str(call.get("name") or ""),
                call.get("args"),
                f"{where}.data.{field}[{index}]",
                created_at,
                source_id,
                model,
            )
    usage = data.get("usage_metadata")
    if isinstance(usage, Mapping):
        transcript.usage(_usage(usage))
    transcript.end_turn()


def _usage(usage: Mapping[str, Any]) -> Usage:
    """``usage_metadata``: input and output tokens, cache reads and writes, reasoning."""

    def count(value: Any) -> int | None:
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    details = usage.get("input_token_details")
    details = details if isinstance(details, Mapping) else {}
    output = usage.get("output_token_details")
    output = output if isinstance(output, Mapping) else {}
    return Usage(
        input_tokens=count(usage.get("input_tokens")) or 0,
        output_tokens=count(usage.get("output_tokens")) or 0,
        total_tokens=count(usage.get("total_tokens")),
        cached_tokens=count(details.get("cache_read")),
        cache_write_tokens=count(details.get("cache_creation")),
        reasoning_tokens=count(output.get("reasoning")),
    )
