"""Claude's data export: ``conversations.json``, a list of conversations.

Each has ``uuid``, ``name``, ``created_at`` / ``updated_at`` (ISO 8601) and
``chat_messages``, in order, each with ``sender`` (``human`` or
``assistant``), ``text``, ``content`` blocks, ``attachments`` and ``files``:

- a human message: its text blocks (or ``text``) as the user turn, and each
  attachment's ``extracted_content`` (the text Claude was given of a pasted or
  uploaded document) as a text part after it; ``files`` (images, PDFs) are not
  in the export, so a note stands in their place and the import reports it;
- an assistant message: its blocks in order: ``text`` as the answer,
  ``thinking`` as its reasoning (tagged ``claude-export``, never sent back to
  a provider: the export has no signatures), ``tool_use`` as a call (``id``,
  ``name``, ``input``) and ``tool_result`` as the result that answers it
  (``is_error`` kept); text after a result begins the next assistant turn. A
  call without a result is answered with an error result; other blocks are
  left out and reported. Exports without ``content`` are read from ``text``.

Pure: no Django, no database.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llm_conversations.conversations.transfer.import_formats.foreign_conversations import (
    ForeignConversation,
    Transcript,
    iso_moment,
    mapping,
    output_text,
    refuse,
    sequence,
)
from llm_conversations.core.content_parts import ContentPart, TextPart
from llm_conversations.core.messages import Role

__all__ = ["NAME", "detect", "parse", "split"]

NAME = "claude"


def split(document: Any) -> list[tuple[str, Any]]:
    """The conversations of ``conversations.json``."""
    if isinstance(document, Mapping):
        return [("item 1", document)]
    return [(f"item {index}", item) for index, item in enumerate(sequence(document, ""), 1)]


def detect(document: Any) -> bool:
    """Whether the file's first conversation has ``chat_messages``."""
    items = split(document) if isinstance(document, list | Mapping) else []
    return bool(items) and isinstance(items[0][1], Mapping) and "chat_messages" in items[0][1]


def parse(item: Any) -> ForeignConversation:
    """One conversation."""
    conversation = mapping(item, "")
    transcript = Transcript(reasoning_provider="claude-export")
    for index, value in enumerate(sequence(conversation.get("chat_messages"), "chat_messages")):
        where = f"chat_messages[{index}]"
        message = mapping(value, where)
        at = iso_moment(message.get("created_at"), f"{where}.created_at")
        source = message.get("uuid") if isinstance(message.get("uuid"), str) else None
        blocks = message.get("content")
        if not blocks:
            blocks = [{"type": "text", "text": message.get("text") or ""}]
        blocks = sequence(blocks, f"{where}.content")
        sender = message.get("sender")
        if sender in ("human", "user"):
            parts = _human(transcript, message, blocks, where)
            if parts:
                transcript.plain(Role.USER, parts, where, at, source)
            else:
                transcript.note("empty_message", "a human message with no text is left out.", where)
        elif sender == "assistant":
            _assistant(transcript, blocks, where, at, source)
        else:
            raise refuse(f"{where}.sender", "must be human or assistant")
    name = conversation.get("name")
    source = conversation.get("uuid")
    return transcript.finish(
        title=name if isinstance(name, str) else "",
        source_id=source if isinstance(source, str) else None,
        created_at=iso_moment(conversation.get("created_at"), "created_at"),
        updated_at=iso_moment(conversation.get("updated_at"), "updated_at"),
    )


def _human(
    transcript: Transcript, message: Mapping[str, Any], blocks: list[Any], where: str
) -> list[ContentPart]:
    parts: list[ContentPart] = []
    for index, raw in enumerate(blocks):
        block = mapping(raw, f"{where}.content[{index}]")
        if block.get("type") == "text" and str(block.get("text") or "").strip():
            parts.append(TextPart(str(block["text"])))
    for index, raw in enumerate(sequence(message.get("attachments") or [], f"{where}.attachments")):
        attachment = mapping(raw, f"{where}.attachments[{index}]")
        extracted = attachment.get("extracted_content")
        if isinstance(extracted, str) and extracted.strip():
            parts.append(TextPart(f"{attachment.get('file_name') or 'attachment'}:\n{extracted}"))
    for index, raw in enumerate(sequence(message.get("files") or [], f"{where}.files")):
        file = mapping(raw, f"{where}.files[{index}]")
        name = file.get("file_name") or file.get("file_uuid") or "a file"
        transcript.note(
            "content_not_imported",
            f"file {name} is not in the export; a note stands in its place.",
            f"{where}.files[{index}]",
        )
        parts.append(TextPart(f"[file not imported: {name}]"))
    return parts


def _assistant(
    transcript: Transcript, blocks: list[Any], where: str, at: Any, source: str | None
) -> None:
    for index, raw in enumerate(blocks):
        block_where = f"{where}.content[{index}]"
        block = mapping(raw, block_where)
        kind = block.get("type")
        if kind == "text":
            transcript.text(str(block.get("text") or ""), block_where, at, source)
        elif kind == "thinking":
            transcript.thinking(str(block.get("thinking") or ""), block_where, at, source)
        elif kind == "tool_use":
            call_id = str(block.get("id") or f"{source or where}-{index}")
            transcript.call(
                call_id, str(block.get("name") or ""), block.get("input"), block_where, at, source
            )
        elif kind == "tool_result":
            answered = block.get("tool_use_id") or transcript.open_call(block.get("name"))
            if not isinstance(answered, str):
                transcript.note(
                    "tool_output_without_call",
                    "a tool result answering no call is left out.",
                    block_where,
                )
                continue
            transcript.result(
                answered,
                _result_text(block.get("content")),
                block_where,
                is_error=bool(block.get("is_error")),
                created_at=at,
                source_id=source,
            )
        else:
            transcript.note("block_not_imported", f"a {kind} block is left out.", block_where)


def _result_text(content: Any) -> str:
    if isinstance(content, list):
        texts = [
            str(item.get("text") or "")
            if isinstance(item, Mapping) and item.get("type") == "text"
            else output_text(item)
            for item in content
        ]
        return "\n\n".join(text for text in texts if text)
    return output_text(content) if content is not None else ""
