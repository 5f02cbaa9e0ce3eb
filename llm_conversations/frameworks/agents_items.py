"""The OpenAI Agents SDK's session items as typed turns, and back.

An Agents SDK session holds Responses API input items. Read into turns:

- ``message`` items (and the SDK's ``{"role", "content"}`` shorthand): ``user``
  ones are user turns (text, images and files given as data URLs), ``system``
  and ``developer`` ones system turns; ``assistant`` ones give their text
  (``output_text`` and ``refusal`` parts) to an assistant turn;
- ``reasoning`` items join the assistant turn they precede, stored as the
  ``openai_responses`` adapter stores them (an ``encrypted`` part holding the item's
  ``id``, ``encrypted_content`` and ``summary``, and ``summary`` parts for the
  text shown); the ``message`` and ``function_call`` items after one keep their
  ids as ``signature`` parts, as that adapter keeps them;
- ``function_call`` items are the calls of the assistant turn, and
  ``function_call_output`` items the tool turns that answer them.

Consecutive assistant items (reasoning, text, calls) are one turn, as one model
response is. Any other item (hosted tools, computer use, MCP, compaction) is
refused (``unsupported_item``): no turn could hold it.

Turns become items as the ``openai_responses`` adapter sends them
(``to_responses_input``), system turns as ``system`` messages in their place.

No Django, and no import of the Agents SDK: items are plain dicts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from llm_conversations.core.content_parts import ContentPart, TextPart, part_from_dict
from llm_conversations.core.messages import ChatMessage, Role
from llm_conversations.core.reasoning import Reasoning, ReasoningKind
from llm_conversations.core.tool_calls import ToolCall
from llm_conversations.exceptions import InvalidMessage
from llm_conversations.providers.openai_responses_items import BACKEND, to_responses_input

__all__ = ["BACKEND", "Item", "items_of", "turns_of", "without_last_item"]

Item = dict[str, Any]
"""A Responses API input item (``TResponseInputItem``)."""

# The keys of a reasoning item the encrypted part keeps (the adapter's, and the
# reasoning text some models return).
_REASONING_KEYS = ("id", "encrypted_content", "summary", "content")
_PLAIN_ROLES = {"user": Role.USER, "system": Role.SYSTEM, "developer": Role.SYSTEM}


def _refuse(code: str, message: str, where: str | None) -> InvalidMessage:
    return InvalidMessage(code, message, field=where)


def _text(value: Any, kinds: frozenset[str], where: str) -> str:
    """Text content, or the text of its parts of ``kinds``."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise _refuse("invalid_content", "content must be text or a list of parts.", where)
    texts = []
    for index, part in enumerate(value):
        if not isinstance(part, Mapping) or part.get("type") not in kinds:
            kind = part.get("type") if isinstance(part, Mapping) else None
            raise _refuse(
                "unsupported_content", f"a {kind!r} part is not stored.", f"{where}[{index}]"
            )
        texts.append(str(part.get("text") if "text" in part else part.get("refusal") or ""))
    return "".join(texts)


def _user_parts(value: Any, where: str) -> str | list[ContentPart]:
    """A user message's content: text, or text, image and file parts (data URLs)."""
    if isinstance(value, str) or not isinstance(value, list):
        return _text(value, frozenset(), where)
    parts: list[ContentPart] = []
    for index, part in enumerate(value):
        kind = part.get("type") if isinstance(part, Mapping) else None
        at = f"{where}[{index}]"
        if kind == "input_text":
            parts.append(TextPart(str(part.get("text") or "")))
        elif kind == "input_image" and str(part.get("image_url") or "").startswith("data:"):
            parts.append(_part({"type": "image_url", "image_url": {"url": part["image_url"]}}, at))
        elif kind == "input_file" and str(part.get("file_data") or "").startswith("data:"):
            file = {"file_data": part["file_data"], "filename": part.get("filename") or ""}
            parts.append(_part({"type": "file", "file": file}, at))
        else:
            raise _refuse(
                "unsupported_content",
                f"a {kind!r} part is not stored (images and files only as data URLs).",
                at,
            )
    if all(isinstance(part, TextPart) for part in parts):
        return "".join(part.text for part in parts if isinstance(part, TextPart))
    return parts


def _part(data: Mapping[str, Any], where: str) -> ContentPart:
    try:
        return part_from_dict(data)
    except InvalidMessage as exc:
        raise exc.within(where) from None


@dataclass
class _Draft:
    """The assistant turn being gathered from consecutive assistant items."""

    provider: str
    texts: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    reasoning: list[Reasoning] = field(default_factory=list)
    reasoned: bool = False
    where: str = ""

    @classmethod
    def of(cls, message: ChatMessage, provider: str) -> _Draft:
        """A draft going on from a stored assistant turn."""
        reasoning = list(message.reasoning or ())
        return cls(
            provider,
            [message.content] if message.content else [],
            list(message.tool_calls or ()),
            reasoning,
            any(_makes_item(part, {BACKEND, provider}) for part in reasoning),
        )

    def sign(self, item: Mapping[str, Any], call_id: str | None = None) -> None:
        """Keep the item's id after a reasoning item, as the adapter does."""
        if self.reasoned and isinstance(item.get("id"), str) and item["id"]:
            self.reasoning.append(
                Reasoning(self.provider, ReasoningKind.SIGNATURE, data=item["id"], call_id=call_id)
            )

    def think(self, item: Mapping[str, Any]) -> None:
        for summary in item.get("summary") or ():
            if isinstance(summary, Mapping) and summary.get("text"):
                self.reasoning.append(
                    Reasoning(self.provider, ReasoningKind.SUMMARY, str(summary["text"]))
                )
        if item.get("encrypted_content"):
            self.reasoned = True
            kept = {key: item[key] for key in _REASONING_KEYS if item.get(key) is not None}
            self.reasoning.append(
                Reasoning(self.provider, ReasoningKind.ENCRYPTED, data=json.dumps(kept))
            )

    def turn(self) -> ChatMessage | None:
        if not (self.texts or self.calls or self.reasoning):
            return None
        return ChatMessage(
            Role.ASSISTANT,
            "\n\n".join(self.texts),
            tuple(self.calls) or None,
            reasoning=tuple(self.reasoning) or None,
        )


def turns_of(
    items: Sequence[Mapping[str, Any]],
    provider: str = BACKEND,
    continuing: ChatMessage | None = None,
) -> list[ChatMessage]:
    """The turns of ``items`` (see the module); reasoning tagged ``provider``.

    ``continuing`` is an assistant turn the items follow (a session's last): its
    assistant items before any other go on it, and the first turn returned is
    it, extended or as it was. Raises :class:`InvalidMessage` naming the item
    (``items[3].content[0]``).
    """
    turns: list[ChatMessage] = []
    draft = _Draft.of(continuing, provider) if continuing is not None else _Draft(provider)

    def flush() -> None:
        nonlocal draft, continuing
        # The continued turn comes first even when nothing of it makes a draft (an empty reply).
        made = draft.turn() or continuing
        continuing = None
        if made is not None:
            turns.append(made)
        draft = _Draft(provider)

    for index, item in enumerate(items):
        where = f"items[{index}]"
        if not isinstance(item, Mapping):
            raise _refuse("invalid_item", "an item is an object.", where)
        kind = item.get("type", "message" if "role" in item else None)
        role = item.get("role")
        try:
            if kind == "message" and role in _PLAIN_ROLES:
                flush()
                content = _user_parts(item.get("content"), "content")
                if role != "user" and not isinstance(content, str):
                    raise _refuse("unsupported_content", "only text is stored here.", "content")
                turns.append(ChatMessage(_PLAIN_ROLES[role], content))  # type: ignore[arg-type]
            elif kind == "message" and role == "assistant":
                kinds = frozenset({"output_text", "refusal", "input_text"})
                draft.texts.append(_text(item.get("content"), kinds, "content"))
                draft.sign(item)
            elif kind == "reasoning":
                draft.think(item)
            elif kind == "function_call":
                call = ToolCall.parse(
                    id=item.get("call_id"),  # type: ignore[arg-type]
                    name=item.get("name"),  # type: ignore[arg-type]
                    arguments=item.get("arguments"),
                )
                draft.calls.append(call)
                draft.sign(item, call.id)
            elif kind == "function_call_output":
                flush()
                output = _text(item.get("output"), frozenset({"input_text"}), "output")
                turns.append(ChatMessage.tool_result(item.get("call_id"), output))  # type: ignore[arg-type]
            else:
                raise _refuse(
                    "unsupported_item",
                    f"{kind or role!r} items are not stored in a conversation.",
                    None,
                )
        except InvalidMessage as exc:
            raise exc.within(where) from None
    flush()
    return turns


def _sent(message: ChatMessage, mine: frozenset[str]) -> ChatMessage:
    """``message`` with the reasoning of ``mine`` tagged as the adapter's own."""
    if not message.reasoning or mine == {BACKEND}:
        return message
    parts = tuple(
        replace(part, provider=BACKEND) if part.provider in mine else part
        for part in message.reasoning
    )
    return replace(message, reasoning=parts)


def items_of(messages: Sequence[ChatMessage], provider: str = BACKEND) -> list[Item]:
    """The items of stored turns, as the ``openai_responses`` adapter sends them; the
    reasoning of ``provider`` goes back too (attachments' bytes must be loaded)."""
    mine = frozenset({BACKEND, provider})
    items: list[Item] = []
    for message in messages:
        if message.role is Role.SYSTEM:
            items.append({"role": "system", "content": message.content})
        else:
            items.extend(to_responses_input([_sent(message, mine)])[1])
    return items


def without_last_item(message: ChatMessage, provider: str = BACKEND) -> ChatMessage | None:
    """What remains of a turn when its last item (:func:`items_of`) is taken back:
    its last call, else its text, else its last reasoning item; ``None`` when
    nothing of it makes an item then."""
    if message.role is not Role.ASSISTANT:
        return None
    mine = {BACKEND, provider}
    parts = list(message.reasoning or ())
    calls = list(message.tool_calls or ())
    content = message.content
    if calls:
        dropped = calls.pop().id
        parts = [part for part in parts if part.call_id != dropped]
    elif content:
        content = ""
        parts = [p for p in parts if not _text_signature(p, mine)]
    else:
        encrypted = [i for i, p in enumerate(parts) if _makes_item(p, mine)]
        if encrypted:
            last = encrypted[-1]
            start = last
            while start and parts[start - 1].kind is ReasoningKind.SUMMARY:
                start -= 1
            del parts[start : last + 1]
    if not calls and not content and not any(_makes_item(part, mine) for part in parts):
        return None
    return ChatMessage(
        Role.ASSISTANT, content, tuple(calls) or None, reasoning=tuple(parts) or None
    )


def _makes_item(part: Reasoning, mine: set[str]) -> bool:
    return part.provider in mine and part.kind is ReasoningKind.ENCRYPTED


def _text_signature(part: Reasoning, mine: set[str]) -> bool:
    return part.provider in mine and part.kind is ReasoningKind.SIGNATURE and part.call_id is None
