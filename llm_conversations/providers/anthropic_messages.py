"""A conversation as the turns of an Anthropic Messages request (``messages``):
content blocks, ``tool_use`` and ``tool_result`` blocks, thinking sent back."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from llm_conversations.core.content_parts import ContentPart, ImagePart, TextPart
from llm_conversations.core.messages import ChatMessage, Role

from ._wire import wire_call_id
from .anthropic_thinking import thinking_blocks

__all__ = ["anthropic_block", "anthropic_turns"]

# The ids Anthropic takes for tool_use blocks (and their results).
_TOOL_USE_ID = re.compile(r"[a-zA-Z0-9_-]+")


def anthropic_block(part: ContentPart) -> dict[str, Any]:
    """A content part as a Messages block: ``text``, ``image`` or ``document`` (base64)."""
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    source = {"type": "base64", "media_type": part.mime_type, "data": part.base64()}
    return {"type": "image" if isinstance(part, ImagePart) else "document", "source": source}


def anthropic_turns(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """A conversation's turns as the body's ``messages`` (system turns left out).

    Content parts become ``text``, ``image`` and ``document`` blocks
    (:func:`anthropic_block`), in user turns and inside ``tool_result``
    content. An assistant turn Anthropic answered starts with its thinking
    blocks (:func:`thinking_blocks`); its calls become ``tool_use`` blocks after
    any text; tool results become ``tool_result`` blocks of a user turn.
    Consecutive same-role turns are merged (so the results of one assistant
    turn share one user message, ahead of any user text) and empty text
    blocks are never sent.
    """
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.role is Role.SYSTEM:
            continue
        blocks = _blocks(message)
        role = "assistant" if message.role is Role.ASSISTANT else "user"
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    for turn in turns:
        # Anthropic wants tool_result blocks first in a user turn.
        turn["content"].sort(key=lambda b: b["type"] != "tool_result")
    return turns


def _blocks(message: ChatMessage) -> list[dict[str, Any]]:
    """The content blocks of one turn that is not a system turn."""
    blocks: list[dict[str, Any]] = []
    if message.role is Role.TOOL:
        blocks.append(_tool_result(message))
    elif message.parts is not None:
        blocks.extend(anthropic_block(part) for part in message.parts)
    else:
        blocks.extend(thinking_blocks(message.reasoning))
        if message.content:
            blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls or ():
        # input must be an object; a malformed call is answered by an error result.
        blocks.append(
            {
                "type": "tool_use",
                "id": wire_call_id(call.id, _TOOL_USE_ID),
                "name": call.name,
                "input": dict(call.arguments),
            }
        )
    return blocks


def _tool_result(message: ChatMessage) -> dict[str, Any]:
    """A tool turn as a ``tool_result`` block."""
    answered = message.tool_call_id
    assert answered, "a tool turn answers one call (core's rule)"
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": wire_call_id(answered, _TOOL_USE_ID),
    }
    if message.parts is not None:
        block["content"] = [anthropic_block(part) for part in message.parts]
    elif message.content:
        block["content"] = message.content
    if message.is_error:
        block["is_error"] = True
    return block
