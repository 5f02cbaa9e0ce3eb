"""OpenAI Chat Completions message arrays: ``[{"role": ..., "content": ...}, ...]``.

A file holds one conversation (an array of messages), several (an array of
arrays, or of objects with ``messages``: the fine-tuning form included) or one
per line (JSON Lines). Roles ``system`` and ``developer`` become system turns;
``user``, ``assistant`` (``tool_calls``, ``refusal`` when there is no text) and
``tool`` (``tool_call_id``) keep theirs; content is a string or parts. Images
and files given as data URLs are stored as attachments; remote URLs, uploaded
file ids and audio are not in the file, so the turn keeps a note in their
place (``[image not imported: ...]``) and the import reports it. Legacy
``function`` messages and ``function_call`` are left out and reported.

Pure: no Django, no database.
"""

from __future__ import annotations

from collections.abc import Mapping
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
from llm_conversations.core.content_parts import ContentPart, TextPart, part_from_dict
from llm_conversations.core.messages import Role
from llm_conversations.exceptions import InvalidMessage

__all__ = ["NAME", "content_parts", "detect", "parse", "split"]

NAME = "openai"
_ROLES = {"system": Role.SYSTEM, "developer": Role.SYSTEM, "user": Role.USER}


def _is_message(value: Any) -> bool:
    return (
        isinstance(value, Mapping) and isinstance(value.get("role"), str) and "parts" not in value
    )


def split(document: Any) -> list[tuple[str, Any]]:
    """The conversations of a file: one array of messages, or a list of them."""
    return message_arrays(document, _is_message)


def detect(document: Any) -> bool:
    """Whether the file's first conversation is an array of Chat Completions messages."""
    return uses_message_arrays(document, _is_message)


def parse(item: Any) -> ForeignConversation:
    """One conversation."""
    messages = sequence(messages_of(item), "messages" if isinstance(item, Mapping) else "")
    prefix = "messages" if isinstance(item, Mapping) else ""
    transcript = Transcript(reasoning_provider="openai-import")
    for index, value in enumerate(messages):
        where = f"{prefix}[{index}]"
        data = mapping(value, where)
        role = data.get("role")
        if role in _ROLES:
            parts = content_parts(
                transcript, data.get("content"), where, allow_files=role == "user"
            )
            transcript.plain(_ROLES[role], parts, where)
        elif role == "assistant":
            _assistant(transcript, data, where)
        elif role == "tool":
            content = content_parts(transcript, data.get("content"), where, allow_files=False)
            call_id = data.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise refuse(f"{where}.tool_call_id", "must name the call the result answers")
            transcript.result(call_id, content, where)
        elif role == "function":
            transcript.note(
                "legacy_function_message", "a legacy function message is left out.", where
            )
        else:
            raise refuse(f"{where}.role", "must be system, developer, user, assistant or tool")
    title = item.get("title") if isinstance(item, Mapping) else None
    source = item.get("id") if isinstance(item, Mapping) else None
    return transcript.finish(
        title=title if isinstance(title, str) else "",
        source_id=str(source) if isinstance(source, str | int) else None,
    )


def _assistant(transcript: Transcript, data: Mapping[str, Any], where: str) -> None:
    text = content_parts(transcript, data.get("content"), where, allow_files=False)
    content = (
        text
        if isinstance(text, str)
        else "\n\n".join(part.text for part in text if isinstance(part, TextPart))
    )
    if not content and isinstance(data.get("refusal"), str):
        content = data["refusal"]
    transcript.text(content, where)
    if data.get("function_call") is not None:
        transcript.note("legacy_function_call", "a legacy function_call is left out.", where)
    for index, raw in enumerate(sequence(data.get("tool_calls") or [], f"{where}.tool_calls")):
        call_where = f"{where}.tool_calls[{index}]"
        call = mapping(raw, call_where)
        function = mapping(call.get("function"), f"{call_where}.function")
        transcript.call(
            str(call.get("id") or ""),
            str(function.get("name") or ""),
            function.get("arguments"),
            call_where,
        )


def content_parts(
    transcript: Transcript, content: Any, where: str, *, allow_files: bool
) -> str | list[ContentPart]:
    """Chat Completions content read: text as it is; parts as text, image and file
    parts (images and files only with ``allow_files``), notes for what the file lacks."""
    if content is None or isinstance(content, str):
        return content or ""
    parts: list[ContentPart] = []
    for index, raw in enumerate(sequence(content, f"{where}.content")):
        part_where = f"{where}.content[{index}]"
        part = mapping(raw, part_where)
        kind = part.get("type")
        if kind == "text":
            if part.get("text"):
                parts.append(TextPart(str(part["text"])))
            continue
        if kind in ("image_url", "file") and allow_files:
            try:
                parts.append(part_from_dict(part))
                continue
            except InvalidMessage as exc:
                if exc.code != "unsupported_content":
                    raise exc.within(part_where) from None
        what = _describe(part)
        transcript.note(
            "content_not_imported",
            f"{what} is not in the file; a note stands in its place.",
            part_where,
        )
        parts.append(TextPart(f"[{what} not imported]"))
    if not allow_files:
        return "\n\n".join(part.text for part in parts if isinstance(part, TextPart))
    return parts


def _describe(part: Mapping[str, Any]) -> str:
    kind = part.get("type")
    if kind == "image_url":
        url = part.get("image_url")
        url = url.get("url") if isinstance(url, Mapping) else None
        return f"image {url}" if isinstance(url, str) and len(url) < 300 else "image"
    if kind == "file":
        file = part.get("file")
        name = file.get("filename") or file.get("file_id") if isinstance(file, Mapping) else None
        return f"file {name}" if isinstance(name, str) else "file"
    if kind == "input_audio":
        return "audio"
    return f"a {kind} part" if isinstance(kind, str) else "a part"
