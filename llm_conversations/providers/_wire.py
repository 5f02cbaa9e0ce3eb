"""Small helpers shared by the adapters: wire-format readers and id allocation."""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llm_conversations.core.messages import ChatMessage, InvalidMessage, ToolCall
from llm_conversations.core.text import json_problem, storable_text
from llm_conversations.core.tool_calls import CONTROL_CHARACTERS
from llm_conversations.core.tool_specs import ToolSpec
from llm_conversations.exceptions import UnsupportedContent

ToolInput = ToolSpec | Mapping[str, Any]
"""What ``tools=`` accepts: a ``ToolSpec`` or either of its dict forms."""


def check_supported_parts(
    messages: Sequence[ChatMessage], provider: str, supported: Mapping[str, frozenset[str]]
) -> None:
    """Refuse, before any request, a content part ``provider`` cannot take.

    ``supported`` maps a role to the part types the provider accepts in it.
    """
    for index, message in enumerate(messages):
        allowed = supported.get(message.role.value, frozenset())
        for part in message.parts or ():
            if part.type not in allowed:
                raise UnsupportedContent(
                    f"{provider} cannot take {part.type} parts in {message.role.value} "
                    f"messages (messages[{index}]).",
                    provider=provider,
                )


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    """One dispatched server-sent event."""

    event: str
    data: str


def iter_sse(lines: Iterable[str]) -> Iterator[ServerSentEvent]:
    """Parse server-sent events from text lines (the WHATWG field rules)."""
    event = ""
    data: list[str] = []
    for line in lines:
        if not line:
            if data:
                yield ServerSentEvent(event or "message", "\n".join(data))
            event, data = "", []
            continue
        if line.startswith(":"):
            continue  # a comment, used as keep-alive
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            event = value
        elif name == "data":
            data.append(value)
    if data:
        yield ServerSentEvent(event or "message", "\n".join(data))


def iter_ndjson(lines: Iterable[str]) -> Iterator[Any]:
    """Decode one JSON value per non-blank line."""
    for line in lines:
        if line.strip():
            yield json.loads(line)


def as_tool_specs(tools: Iterable[ToolInput] | None) -> list[ToolSpec]:
    """Normalise ``tools=``: specs pass through, dicts go through ``ToolSpec.from_dict``.

    Errors name the tool index in ``field`` (``tools[1].function.name``).
    """
    specs: list[ToolSpec] = []
    for index, tool in enumerate(tools or ()):
        if isinstance(tool, ToolSpec):
            specs.append(tool)
            continue
        if not isinstance(tool, Mapping):
            raise InvalidMessage(
                "invalid_tool", "a tool must be a ToolSpec or a dict.", field=f"tools[{index}]"
            )
        try:
            specs.append(ToolSpec.from_dict(tool))
        except InvalidMessage as exc:
            raise exc.within(f"tools[{index}]") from None
    return specs


def wire_call_id(call_id: str, allowed: re.Pattern[str], max_length: int = 61) -> str:
    """``call_id`` as a provider whose ids must match ``allowed`` takes it.

    A conversation moved between providers carries ids another one made
    (``llm_version:0``, a 46-character ``chatcmpl-tool-...``). One that breaks
    the rule is rewritten the same way every time, for a call and for its
    result alike: the offending characters become ``_``, it is cut to fit
    ``max_length``, and a digest of the original keeps rewritten ids apart.
    """
    if allowed.fullmatch(call_id):
        return call_id
    digest = hashlib.sha256(call_id.encode()).hexdigest()[:10]
    kept = max_length - len(digest) - 1
    return f"{re.sub(r'[^A-Za-z0-9_-]', '_', call_id)[:kept]}_{digest}"


class CallIds:
    """Hands out tool call ids that are unique across one conversation.

    Some providers send no ids (Gemini, Ollama) or reuse them across turns;
    a provider id is kept when it is new, otherwise a random one is made.
    """

    def __init__(self, messages: Sequence[ChatMessage]) -> None:
        self._used: set[str] = set()
        for message in messages:
            self._used.update(call.id for call in message.tool_calls or ())
            if message.tool_call_id:
                self._used.add(message.tool_call_id)

    def take(self, candidate: object = None) -> str:
        """``candidate`` when it is a fresh non-empty string, else a new id."""
        if isinstance(candidate, str) and candidate and candidate not in self._used:
            self._used.add(candidate)
            return candidate
        while True:
            new = f"call_{secrets.token_hex(12)}"
            if new not in self._used:
                self._used.add(new)
                return new


CallParts = tuple[str, str, object]
"""A call as a provider sent it: id, name, and arguments as JSON text or decoded."""


def function_calls(items: Iterable[Mapping[str, Any]] | None, ids: CallIds) -> list[CallParts]:
    """Read a ``tool_calls`` list of ``{"id", "function": {"name", "arguments"}}`` items.

    The shape OpenAI and Ollama share; ``id`` may be absent and ``arguments``
    may be JSON text or an object. The parts go to ``StreamAccumulator.call``.
    """
    parts: list[CallParts] = []
    for item in items or ():
        function = item["function"]
        parts.append((ids.take(item.get("id")), function["name"], function.get("arguments")))
    return parts


def storable_call(id: str, name: str, arguments: object) -> tuple[ToolCall, bool]:
    """A :class:`ToolCall` a database can store, and whether anything was changed.

    Every adapter's calls pass through here (via ``StreamAccumulator.call``).
    Id and name get :func:`storable_text`; control characters in the name become ``_``. Arguments that decode to an object
    a JSON column refuses are kept as ``raw_arguments`` (the call is then
    ``malformed`` and answered with an error result): the text as received,
    or, for arguments sent already decoded, their JSON with every non-ASCII
    character escaped so the text itself is storable.
    """
    # A control character in a model's name would make the call unstorable; no offered
    # tool has one, so the call still names an unknown tool and is answered as such.
    clean_id, clean_name = storable_text(id), CONTROL_CHARACTERS.sub("_", storable_text(name))
    changed = (clean_id, clean_name) != (id, name)
    if isinstance(arguments, str) and arguments:
        try:
            decoded = json.loads(arguments)
        except ValueError:
            decoded = None
        if isinstance(decoded, dict) and json_problem(decoded) is not None:
            raw = storable_text(arguments)
            return ToolCall(clean_id, clean_name, raw_arguments=raw), True
    elif isinstance(arguments, Mapping) and json_problem(arguments) is not None:
        raw = json.dumps(arguments, ensure_ascii=True)
        return ToolCall(clean_id, clean_name, raw_arguments=raw), True
    call = ToolCall.parse(id=clean_id, name=clean_name, arguments=arguments)
    if call.raw_arguments is not None:
        # Text that is not a JSON object is kept raw; it may still hold a NUL.
        raw = storable_text(call.raw_arguments)
        if raw != call.raw_arguments:
            return ToolCall(clean_id, clean_name, raw_arguments=raw), True
    return call, changed


def tool_names_by_id(messages: Sequence[ChatMessage]) -> dict[str, str]:
    """Map every call id of the conversation to its function name."""
    return {call.id: call.name for message in messages for call in message.tool_calls or ()}


def pass_through(body: dict[str, Any], options: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` with the options left untranslated added as they are; built keys win."""
    for key, value in options.items():
        body.setdefault(key, value)
    return body


def merge_fields(body: dict[str, Any], fields: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` with ``fields`` written over it; nested objects are merged key by key.

    How a run's parameters override what the options built: a per-run
    ``temperature`` replaces ``generationConfig.temperature`` and keeps the
    entry's other ``generationConfig`` keys.
    """
    for key, value in fields.items():
        current = body.get(key)
        if isinstance(value, Mapping) and isinstance(current, Mapping):
            body[key] = merge_fields(dict(current), value)
        else:
            body[key] = value
    return body


def int_or_zero(value: object) -> int:
    """A token count from a provider body; absent or odd values count as 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
