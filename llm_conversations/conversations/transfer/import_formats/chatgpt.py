"""ChatGPT's data export: ``conversations.json``, a list of conversations.

Each has ``title``, ``create_time`` / ``update_time`` (seconds since the
epoch), ``mapping`` (node id → ``{"message", "parent", "children"}``) and
``current_node``. The branch imported is the one the user saw last: from
``current_node`` back to the root (regenerated answers and edited questions
on other branches are left out); a ``current_node`` or a ``parent`` the
mapping does not hold, or parents in a cycle, refuse the conversation. Along
it, per message:

- left out, silently: nodes without a message, hidden messages
  (``metadata.is_visually_hidden_from_conversation``, system messages with
  no text), ``model_editable_context`` / ``user_editable_context`` (memory and
  custom instructions), ``reasoning_recap`` ("Thought for 10 seconds"), and
  messages with no text;
- ``text`` and ``multimodal_text`` from the user or the assistant: a user or
  assistant turn (``metadata.model_slug`` as the turn's model); images are
  files of the export archive, not of ``conversations.json``, so a note
  stands in their place (``[image not imported: file-service://…]``) and the
  import reports it; audio transcriptions are text;
- ``thoughts``: reasoning of the next assistant turn (tagged ``chatgpt``, never
  sent to a provider);
- an assistant message to a tool (``recipient`` other than ``all``: ``python``,
  ``browser``, ``web.run``, ...): a call of that tool, its id the node's id;
  ``code`` content is the argument ``code``, other text a JSON object when it
  is one, else the argument ``input``;
- a ``tool`` message (``execution_output``, ``tether_browsing_display``,
  ``tether_quote``, ``text``, ``multimodal_text``; ``system_error`` as an error):
  the result of the open call of that tool; one answering no call is left out
  and reported, and a call left without a result is answered with an error result.

Pure: no Django, no database.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from llm_conversations.conversations.transfer.import_formats.foreign_conversations import (
    ForeignConversation,
    Transcript,
    epoch_moment,
    mapping,
    refuse,
    sequence,
)
from llm_conversations.core.content_parts import ContentPart, TextPart
from llm_conversations.core.messages import Role

__all__ = ["NAME", "detect", "parse", "split"]

NAME = "chatgpt"
_SKIPPED = frozenset(
    {"model_editable_context", "user_editable_context", "reasoning_recap", "system_error_context"}
)


def split(document: Any) -> list[tuple[str, Any]]:
    """The conversations of ``conversations.json``."""
    if isinstance(document, Mapping):
        return [("item 1", document)]
    return [(f"item {index}", item) for index, item in enumerate(sequence(document, ""), 1)]


def detect(document: Any) -> bool:
    """Whether the file's first conversation has a ``mapping`` of nodes."""
    items = split(document) if isinstance(document, list | Mapping) else []
    return bool(items) and isinstance(items[0][1], Mapping) and "mapping" in items[0][1]


def _branch(conversation: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """The nodes from the root to ``current_node``, in order.

    Without a current node, the branch ends at the last leaf written. A current
    node the mapping does not hold, a parent it does not hold, or parents that
    go round in a cycle refuse the conversation, naming the field.
    """
    nodes = mapping(conversation.get("mapping"), "mapping")
    current = conversation.get("current_node")
    if current is None:
        leaves = [key for key, node in nodes.items() if not (node or {}).get("children")]
        if not leaves:
            raise refuse("mapping", "has no last node (every node has children: a cycle)")
        current = max(leaves, key=lambda key: _created(nodes[key]))
    elif not isinstance(current, str) or current not in nodes:
        raise refuse("current_node", "names no node of the mapping")
    path: list[tuple[str, Mapping[str, Any]]] = []
    seen: set[str] = set()
    while current is not None:
        child = path[-1][0] if path else None
        if not isinstance(current, str) or current not in nodes:
            raise refuse(f"mapping.{child}.parent", "names no node of the mapping")
        if current in seen:
            raise refuse(f"mapping.{child}.parent", f"goes round in a cycle (back to {current})")
        seen.add(current)
        node = mapping(nodes[current], f"mapping.{current}")
        path.append((current, node))
        current = node.get("parent")
    return path[::-1]


def _created(node: Any) -> int | float:
    """When a node's message was written, for ordering (0 when it says not); never
    converted, so a number too large for a float still compares."""
    message = node.get("message") if isinstance(node, Mapping) else None
    value = message.get("create_time") if isinstance(message, Mapping) else None
    return value if isinstance(value, int | float) and not isinstance(value, bool) else 0


def parse(item: Any) -> ForeignConversation:
    """One conversation: the branch the user saw."""
    conversation = mapping(item, "")
    transcript = Transcript(reasoning_provider=NAME)
    for key, node in _branch(conversation):
        message = node.get("message")
        if isinstance(message, Mapping):
            _message(transcript, message, f"mapping.{key}.message", key)
    title = conversation.get("title")
    source = conversation.get("conversation_id") or conversation.get("id")
    return transcript.finish(
        title=title if isinstance(title, str) else "",
        source_id=source if isinstance(source, str) else None,
        created_at=epoch_moment(conversation.get("create_time"), "create_time"),
        updated_at=epoch_moment(conversation.get("update_time"), "update_time"),
    )


def _message(transcript: Transcript, message: Mapping[str, Any], where: str, key: str) -> None:
    author = mapping(message.get("author") or {}, f"{where}.author")
    role = author.get("role")
    content = mapping(message.get("content") or {}, f"{where}.content")
    kind = content.get("content_type")
    metadata: Mapping[str, Any] = message.get("metadata") or {}
    if not isinstance(metadata, Mapping):
        metadata = {}
    if kind in _SKIPPED or metadata.get("is_visually_hidden_from_conversation"):
        return
    at = epoch_moment(message.get("create_time"), f"{where}.create_time")
    recipient = message.get("recipient") or "all"
    model = str(metadata.get("model_slug") or "")
    if role == "tool":
        _tool_output(transcript, author, content, where, at, key)
    elif role == "assistant" and kind == "thoughts":
        text = "\n\n".join(
            str(thought.get("content") or thought.get("summary") or "")
            for thought in sequence(content.get("thoughts") or [], f"{where}.content.thoughts")
            if isinstance(thought, Mapping)
        )
        transcript.thinking(text.strip(), where, at, key, model)
    elif role == "assistant" and recipient != "all":
        text = str(content.get("text") or "") if kind == "code" else _text(content)
        transcript.call(key, str(recipient), _arguments(kind, text), where, at, key, model)
    elif role == "assistant":
        text = "\n\n".join(
            p.text for p in _parts(transcript, content, where) if isinstance(p, TextPart)
        )
        transcript.text(text, where, at, key, model)
    elif role in ("user", "system"):
        parts = _parts(transcript, content, where)
        if parts:
            transcript.plain(Role(role), parts, where, at, key)
    else:
        raise refuse(f"{where}.author.role", "must be user, assistant, system or tool")


def _arguments(kind: Any, text: str) -> dict[str, Any]:
    if kind == "code":
        return {"code": text}
    try:
        decoded = json.loads(text)
    except ValueError:
        decoded = None
    return decoded if isinstance(decoded, dict) else {"input": text}


def _text(content: Mapping[str, Any]) -> str:
    return "\n\n".join(str(part) for part in content.get("parts") or () if isinstance(part, str))


def _parts(transcript: Transcript, content: Mapping[str, Any], where: str) -> list[ContentPart]:
    """Text and multimodal text as text parts; a note for each image."""
    kind = content.get("content_type")
    if kind not in ("text", "multimodal_text"):
        transcript.note("content_not_imported", f"{kind} content is left out.", where)
        return []
    parts: list[ContentPart] = []
    for index, part in enumerate(content.get("parts") or ()):
        if isinstance(part, str):
            if part.strip():
                parts.append(TextPart(part))
        elif isinstance(part, Mapping) and part.get("content_type") == "audio_transcription":
            if part.get("text"):
                parts.append(TextPart(str(part["text"])))
        elif isinstance(part, Mapping):
            pointer = part.get("asset_pointer")
            what = f"{part.get('content_type', 'part')} {pointer}" if pointer else "a part"
            transcript.note(
                "content_not_imported",
                f"{what} is a file of the export archive, "
                "not of conversations.json; a note stands in its place.",
                f"{where}.content.parts[{index}]",
            )
            parts.append(TextPart(f"[{what} not imported]"))
    return parts


def _tool_output(
    transcript: Transcript,
    author: Mapping[str, Any],
    content: Mapping[str, Any],
    where: str,
    at: Any,
    key: str,
) -> None:
    name = author.get("name")
    call_id = transcript.open_call(name if isinstance(name, str) else None)
    if call_id is None:
        call_id = transcript.open_call()
    kind = content.get("content_type")
    if kind in ("execution_output", "tether_quote", "system_error"):
        text = str(content.get("text") or "")
    elif kind == "tether_browsing_display":
        text = str(content.get("result") or content.get("summary") or "")
    else:
        text = "\n\n".join(
            p.text for p in _parts(transcript, content, where) if isinstance(p, TextPart)
        )
    if call_id is None:
        if text:
            transcript.note(
                "tool_output_without_call",
                f"output of {name or 'a tool'} answering no call is left out.",
                where,
            )
        return
    transcript.result(
        call_id, text, where, is_error=kind == "system_error", created_at=at, source_id=key
    )
