"""A conversation as the ``contents`` of a Gemini ``generateContent`` request:
text and inline data parts, function calls and their responses, and the
reasoning state Gemini made put back."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from llm_conversations.core.content_parts import TextPart
from llm_conversations.core.messages import ChatMessage, Role
from llm_conversations.core.reasoning import ReasoningKind

from ._wire import tool_names_by_id

__all__ = ["BACKEND", "SKIP_SIGNATURE", "gemini_contents"]

BACKEND = "gemini"
# Google's documented stand-in for the signature of a call Gemini did not make
# (or made before signatures were kept); Gemini 3 refuses a turn's first
# function call without one.
SKIP_SIGNATURE = "skip_thought_signature_validator"
_NEEDS_SIGNATURE = re.compile(r"^(?:models/)?gemini-(\d+)")


def _needs_signature(model: str) -> bool:
    match = _NEEDS_SIGNATURE.match(model)
    return bool(match) and int(match.group(1)) >= 3  # type: ignore[union-attr]


def gemini_contents(messages: Sequence[ChatMessage], model: str) -> list[dict[str, Any]]:
    """A conversation's turns as the body's ``contents`` (system turns left out).

    Assistant turns are ``model`` contents with ``functionCall`` parts and the
    thought parts and signatures Gemini made (:func:`_model_parts`, signing a
    turn's first call for a ``model`` that needs it); the results of one
    assistant turn go in one ``user`` content as ``functionResponse`` parts in
    call order, each named after its call and carrying ``{"output": ...}`` or
    ``{"error": ...}``. Images and PDFs are ``inlineData`` parts
    (``mimeType``, base64 ``data``).
    """
    names = tool_names_by_id(messages)
    sign = _needs_signature(model)
    contents: list[dict[str, Any]] = []
    call_order: dict[str, int] = {}
    for message in messages:
        if message.role is Role.SYSTEM:
            continue
        if message.role is Role.TOOL:
            order = call_order.get(message.tool_call_id or "", 0)
            result = (order, _function_response(message, names))
            last = contents[-1] if contents else None
            if last and last.get("_results"):
                last["parts"].append(result)
            else:
                contents.append({"role": "user", "parts": [result], "_results": True})
            continue
        if message.role is Role.ASSISTANT:
            call_order.update((call.id, i) for i, call in enumerate(message.tool_calls or ()))
            contents.append({"role": "model", "parts": _model_parts(message, sign)})
        else:
            contents.append({"role": "user", "parts": _user_parts(message)})
    for content in contents:
        if content.pop("_results", False):
            content["parts"] = [part for _, part in sorted(content["parts"], key=lambda p: p[0])]
    return contents


def _function_response(message: ChatMessage, names: Mapping[str, str]) -> dict[str, Any]:
    """A tool turn as a ``functionResponse`` part named after its call."""
    key = "error" if message.is_error else "output"
    return {
        "functionResponse": {
            "name": names.get(message.tool_call_id or "", "unknown"),
            "response": {key: message.content},
        }
    }


def _user_parts(message: ChatMessage) -> list[dict[str, Any]]:
    """The parts of a user turn: text, and images and PDFs as ``inlineData``."""
    if message.parts is not None:
        return [
            {"text": part.text}
            if isinstance(part, TextPart)
            else {"inlineData": {"mimeType": part.mime_type, "data": part.base64()}}
            for part in message.parts
        ]
    return [{"text": message.content}] if message.content else []


def _model_parts(message: ChatMessage, sign: bool) -> list[dict[str, Any]]:
    """The parts of an assistant turn, with the reasoning state Gemini made put back.

    Each thought part and each ``thoughtSignature`` goes back on the part that
    carried it: thoughts first, then the text, then the calls. A turn's first
    call without a signature of Gemini's own gets :data:`SKIP_SIGNATURE` when
    the model needs one (``sign``); reasoning of other providers is never sent.
    """
    own = [part for part in message.reasoning or () if part.provider == BACKEND]
    parts: list[dict[str, Any]] = []
    for part in own:
        if part.kind is ReasoningKind.THINKING:
            parts.append(_signed({"text": part.text, "thought": True}, part.data))
    signatures = {part.call_id: part.data for part in own if part.kind is ReasoningKind.SIGNATURE}
    text_signature = signatures.pop(None, None)
    if message.content or text_signature:
        parts.append(_signed({"text": message.content}, text_signature))
    for index, call in enumerate(message.tool_calls or ()):
        # args must be an object; a malformed call is answered by an error result.
        function_call = {"functionCall": {"name": call.name, "args": dict(call.arguments)}}
        signature = signatures.get(call.id)
        if signature is None and sign and index == 0:
            signature = SKIP_SIGNATURE
        parts.append(_signed(function_call, signature))
    return parts


def _signed(part: dict[str, Any], signature: str | None) -> dict[str, Any]:
    if signature is not None:
        part["thoughtSignature"] = signature
    return part
