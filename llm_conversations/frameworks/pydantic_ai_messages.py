"""pydantic-ai messages, in their JSON form (``ModelMessagesTypeAdapter``), as typed
turns and back.

A ``ModelRequest`` is one row per part that is a turn: a system prompt a system
turn, a user prompt (text) a user turn, a tool return (or a retry of a call) the
tool turn answering its call (``is_error`` unless its outcome is ``success``),
feedback on an unusable answer a user turn. A ``ModelResponse`` is one assistant
turn: its text parts' text, its tool calls, its thinking parts as reasoning
(tagged ``anthropic`` for Anthropic's, whose replay rule the app's adapter shares;
``pydantic-ai/<provider>`` for any other, kept and shown, never sent by the app),
and the model, provider, usage and finish reason in the row's columns.

What the columns do not hold stays in the row's ``metadata["pydantic_ai"]``:
each message's envelope (timestamps, run ids, provider details) and each
part's other fields, so a conversation stored from pydantic-ai loads back as the
same messages. Rows this app made have none; they load as plain parts.

No import of pydantic-ai: this reads and writes the JSON form.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from llm_conversations.conversations.store import Turn
from llm_conversations.core.completions import FinishReason, Usage
from llm_conversations.core.content_parts import TextPart
from llm_conversations.core.messages import ChatMessage, Role
from llm_conversations.core.reasoning import Reasoning, ReasoningKind
from llm_conversations.core.tool_calls import ToolCall
from llm_conversations.exceptions import InvalidMessage
from llm_conversations.models import USAGE_COLUMNS

__all__ = ["KEY", "ROW_FIELDS", "messages_of", "turns_of"]

KEY = "pydantic_ai"
"""The key of ``Message.metadata`` holding what the columns do not."""
ROW_FIELDS = (
    "metadata",
    "hidden_at",
    "created_at",
    "model",
    "provider",
    "finish_reason",
    *USAGE_COLUMNS,
)
"""The columns :func:`messages_of` reads beside each message."""

Json = dict[str, Any]
_FINISH = {
    "stop": FinishReason.STOP,
    "length": FinishReason.LENGTH,
    "content_filter": FinishReason.CONTENT_FILTER,
    "tool_call": FinishReason.TOOL_CALLS,
    "error": FinishReason.OTHER,
}
_FINISHED = {reason.value: word for word, reason in _FINISH.items()}
# Usage: pydantic-ai's name, and the column's.
_USAGE = {
    "input_tokens": "input_tokens",
    "output_tokens": "output_tokens",
    "cache_read_tokens": "cached_tokens",
    "cache_write_tokens": "cache_write_tokens",
    "output_reasoning_tokens": "reasoning_tokens",
}


def _without(part: Mapping[str, Any], *keys: str) -> Json:
    return {key: value for key, value in part.items() if key not in keys}


def _text(value: Any) -> tuple[str, bool]:
    """A part's content as a turn's text, and whether it was JSON (not text)."""
    if isinstance(value, str):
        return value, False
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")), True


# Into turns ------------------------------------------------------------------


def _request_part(part: Json, where: str) -> tuple[ChatMessage, Json] | None:
    """The turn of one request part, with what its row keeps beside it."""
    kind = part.get("part_kind")
    content: Any = part.get("content")
    if kind == "system-prompt":
        return ChatMessage(Role.SYSTEM, content), {"part": _without(part, "content")}
    if kind == "user-prompt":
        if isinstance(content, list) and all(isinstance(item, str) for item in content):
            parts = [TextPart(item) for item in content]
            return ChatMessage.user(parts), {"part": _without(part, "content"), "list": True}
        if not isinstance(content, str):
            raise InvalidMessage(
                "unsupported_content",
                "only text user prompts are stored (not images, audio or documents).",
                field=f"{where}.content",
            )
        return ChatMessage.user(content), {"part": _without(part, "content")}
    if kind in ("tool-return", "retry-prompt") and (kind == "tool-return" or part.get("tool_name")):
        text, was_json = _text(content)
        failed = kind == "retry-prompt" or part.get("outcome", "success") != "success"
        message = ChatMessage.tool_result(part.get("tool_call_id"), text, is_error=failed)  # type: ignore[arg-type]
        return message, {"part": _without(part, "content", "tool_call_id"), "json": was_json}
    if kind in ("retry-prompt", "retry-feedback"):
        text, was_json = _text(content)
        return ChatMessage.user(text), {"part": _without(part, "content"), "json": was_json}
    return None


def _request_turns(message: Json, where: str) -> list[Turn]:
    made: list[tuple[ChatMessage, Json]] = []
    extra: list[Json] = []
    for index, part in enumerate(message.get("parts") or ()):
        try:
            turn = _request_part(part, f"{where}.parts[{index}]")
        except InvalidMessage as exc:
            raise (exc if exc.field else exc.within(f"{where}.parts[{index}]")) from None
        if turn is None:
            extra.append({"at": index, "part": part})
        else:
            made.append(turn)
    if not made:
        raise InvalidMessage(
            "unsupported_part",
            "a request holds no prompt or tool return that a turn keeps.",
            field=where,
        )
    made[0][1].update(request=_without(message, "parts"), extra=extra)
    return [Turn(chat, metadata={KEY: kept}) for chat, kept in made]


def _reasoning(part: Json) -> Reasoning | None:
    provider = part.get("provider_name")
    tag = "anthropic" if provider == "anthropic" else f"pydantic-ai/{provider or 'unknown'}"
    text, signature = part.get("content") or "", part.get("signature") or None
    if text:
        return Reasoning(tag, ReasoningKind.THINKING, text, signature)
    if signature:
        return Reasoning(tag, ReasoningKind.REDACTED, data=signature)
    return None


def _response_turn(message: Json) -> Turn:
    texts: list[str] = []
    calls: list[ToolCall] = []
    reasoning: list[Reasoning] = []
    kept: list[Json] = []
    for part in message.get("parts") or ():
        kind = part.get("part_kind")
        thought = _reasoning(part) if kind == "thinking" else None
        if kind == "text":
            texts.append(part.get("content") or "")
            kept.append(
                {"kind": "text", "part": _without(part, "content"), "chars": len(texts[-1])}
            )
        elif thought is not None:
            reasoning.append(thought)
            kept.append({"kind": "thinking", "part": _without(part, "content", "signature")})
        elif kind == "tool-call":
            calls.append(
                ToolCall.parse(
                    id=part.get("tool_call_id"),
                    name=part.get("tool_name"),
                    arguments=part.get("args"),
                )
            )
            # Arguments given as text keep their text; an object is the column's.
            keys = (
                "tool_name",
                "tool_call_id",
                *(("args",) if isinstance(part.get("args"), dict) else ()),
            )
            kept.append({"kind": "call", "part": _without(part, *keys)})
        else:
            kept.append({"kind": "whole", "part": part})
    usage = message.get("usage") or {}
    return Turn(
        ChatMessage(
            Role.ASSISTANT, "".join(texts), tuple(calls) or None, reasoning=tuple(reasoning) or None
        ),
        metadata={KEY: {"response": _without(message, "parts"), "parts": kept}},
        model=message.get("model_name") or "",
        provider=message.get("provider_name") or "",
        usage=Usage(
            input_tokens=usage.get("input_tokens") or 0,
            output_tokens=usage.get("output_tokens") or 0,
            cached_tokens=usage.get("cache_read_tokens") or None,
            cache_write_tokens=usage.get("cache_write_tokens") or None,
            reasoning_tokens=usage.get("output_reasoning_tokens") or None,
        ),
        finish_reason=_FINISH.get(message.get("finish_reason") or ""),
    )


def turns_of(messages: Sequence[Json]) -> list[Turn]:
    """The turns of pydantic-ai messages in their JSON form (see the module).

    Raises :class:`InvalidMessage` naming the part (``messages[0].parts[1].content``).
    """
    turns: list[Turn] = []
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if message.get("kind") == "response":
            try:
                turns.append(_response_turn(message))
            except InvalidMessage as exc:
                raise exc.within(where) from None
        else:
            turns.extend(_request_turns(message, where))
    return turns


# Back into messages -----------------------------------------------------------


def _moment(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _request_part_of(chat: ChatMessage, row: Json, kept: Json | None, names: Json) -> Json:
    """A request part from a row: its kept fields and the columns' values."""
    if kept is not None:
        part = dict(kept["part"])
        text: Any = (
            [p.text for p in chat.parts or () if isinstance(p, TextPart)]
            if kept.get("list")
            else chat.content
        )
        if "content" not in part:
            part["content"] = json.loads(text) if kept.get("json") else text
        if chat.role is Role.TOOL:
            part["tool_call_id"] = chat.tool_call_id
        return part
    stamp = _moment(row["created_at"])
    if chat.role is Role.SYSTEM:
        return {"part_kind": "system-prompt", "content": chat.content, "timestamp": stamp}
    if chat.role is Role.USER:
        return {"part_kind": "user-prompt", "content": chat.content, "timestamp": stamp}
    return {
        "part_kind": "tool-return",
        "tool_name": names.get(chat.tool_call_id or "") or "unknown",
        "content": chat.content,
        "tool_call_id": chat.tool_call_id,
        "outcome": "failed" if chat.is_error else "success",
        "timestamp": stamp,
    }


def _thinking_of(part: Reasoning) -> Json:
    provider = part.provider.removeprefix("pydantic-ai/")
    signature = part.data if part.kind in (ReasoningKind.THINKING, ReasoningKind.REDACTED) else None
    return {
        "part_kind": "thinking",
        "content": part.text,
        "signature": signature,
        "provider_name": None if provider == "unknown" else provider,
    }


def _response_parts(chat: ChatMessage, kept: Sequence[Json] | None) -> list[Json]:
    if kept is None:  # a turn this app made
        shown = (ReasoningKind.THINKING, ReasoningKind.REDACTED, ReasoningKind.SUMMARY)
        parts = [_thinking_of(p) for p in chat.reasoning or () if p.kind in shown]
        if chat.content:
            parts.append({"part_kind": "text", "content": chat.content})
        kept = []
    else:
        parts = []
    reasoning: Iterator[Reasoning] = iter(chat.reasoning or ())
    calls: Iterator[ToolCall] = iter(chat.tool_calls or ())
    at = 0
    for entry in kept:
        part = dict(entry["part"])
        if entry["kind"] == "text":
            part["content"] = chat.content[at : at + entry["chars"]]
            at += entry["chars"]
        elif entry["kind"] == "thinking":
            thought = next(reasoning)
            part.update(content=thought.text, signature=thought.data)
        elif entry["kind"] == "call":
            call = next(calls)
            part.update(tool_name=call.name, tool_call_id=call.id)
            part.setdefault("args", call.arguments)
        parts.append(part)
    for call in calls:  # a turn this app made
        parts.append(
            {
                "part_kind": "tool-call",
                "tool_name": call.name,
                "args": call.raw_arguments if call.malformed else call.arguments,
                "tool_call_id": call.id,
            }
        )
    return parts


def _response_of(chat: ChatMessage, row: Json, kept: Json | None) -> Json:
    if kept is not None:
        return {**kept["response"], "parts": _response_parts(chat, kept["parts"])}
    usage = {name: row[column] for name, column in _USAGE.items() if row[column] is not None}
    return {
        "kind": "response",
        "parts": _response_parts(chat, None),
        "usage": usage,
        "model_name": row["model"] or None,
        "provider_name": row["provider"] or None,
        "timestamp": _moment(row["created_at"]),
        "finish_reason": _FINISHED.get(row["finish_reason"]),
    }


def messages_of(rows: Sequence[tuple[ChatMessage, Json]]) -> list[Json]:
    """pydantic-ai messages in their JSON form from turns and their rows'
    :data:`ROW_FIELDS` (see the module)."""
    messages: list[Json] = []
    request: Json | None = None
    extras: list[tuple[Json, list[Json]]] = []
    names: Json = {}  # call id: tool name, for results of turns this app made
    for chat, row in rows:
        kept = (row["metadata"] or {}).get(KEY)
        if chat.role is Role.ASSISTANT:
            request = None
            messages.append(_response_of(chat, row, kept))
            names.update((call.id, call.name) for call in chat.tool_calls or ())
            continue
        if request is None or (kept is not None and "request" in kept):
            request = {**(kept or {}).get("request", {"kind": "request"}), "parts": []}
            messages.append(request)
            extras.append((request, (kept or {}).get("extra", [])))
        request["parts"].append(_request_part_of(chat, row, kept, names))
    for held, parts in extras:
        for extra in parts:
            held["parts"].insert(extra["at"], extra["part"])
    return messages
