"""AI SDK ``UIMessage[]``: ``[{"id", "role", "parts": [...]}, ...]``, as ``useChat`` keeps them.

A file holds one conversation (an array of UI messages, or an object with
``messages`` and an optional ``id`` and ``title``), several (an array of them)
or one per line. The reverse of ``api/ui_messages.py``:

- ``system`` and ``user`` messages: ``text`` parts, and ``file`` parts given as
  data URLs (stored as attachments; a remote URL leaves a note in its place);
- ``assistant`` messages: each step (``step-start``, or text after tool parts)
  is one assistant turn: its ``text``, its ``reasoning`` (kept, tagged
  ``ai-sdk``, never sent to a provider), and a call per ``tool-<name>`` or
  ``dynamic-tool`` part, whose result follows the turn: ``output-available``
  (the output, JSON unless text), ``output-error`` (``errorText``, an error
  result) and ``output-denied`` (an error result saying so). A call in any
  other state has no result yet and is answered with an error result.
- ``source-*``, ``data-*`` and assistant ``file`` parts are left out and reported.

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
    output_text,
    refuse,
    sequence,
    uses_message_arrays,
)
from llm_conversations.core.content_parts import (
    IMAGE_TYPES,
    ContentPart,
    FilePart,
    ImagePart,
    TextPart,
    part_from_dict,
)
from llm_conversations.core.messages import Role
from llm_conversations.exceptions import InvalidMessage

__all__ = ["DENIED", "NAME", "detect", "parse", "split"]

NAME = "ai-sdk"
# The result of a call the user denied (the UI message keeps no text for it).
DENIED = "The tool call was denied."
_PLAIN = {"system": Role.SYSTEM, "user": Role.USER}


def _is_ui_message(value: Any) -> bool:
    return isinstance(value, Mapping) and isinstance(value.get("parts"), list)


def split(document: Any) -> list[tuple[str, Any]]:
    """The conversations of a file: one ``UIMessage[]``, or a list of them."""
    return message_arrays(document, _is_ui_message)


def detect(document: Any) -> bool:
    """Whether the file's first conversation is an array of UI messages."""
    return uses_message_arrays(document, _is_ui_message)


def parse(item: Any) -> ForeignConversation:
    """One conversation."""
    prefix = "messages" if isinstance(item, Mapping) else ""
    transcript = Transcript(reasoning_provider="ai-sdk")
    for index, value in enumerate(sequence(messages_of(item), prefix)):
        where = f"{prefix}[{index}]"
        data = mapping(value, where)
        role = data.get("role")
        parts = sequence(data.get("parts"), f"{where}.parts")
        source = data.get("id") if isinstance(data.get("id"), str) else None
        if role in _PLAIN:
            content = _plain_parts(transcript, parts, where, files=role == "user")
            transcript.plain(_PLAIN[role], content, where, source_id=source)
        elif role == "assistant":
            _assistant(transcript, parts, where, source)
        else:
            raise refuse(f"{where}.role", "must be system, user or assistant")
    title = item.get("title") if isinstance(item, Mapping) else None
    chat_id = item.get("id") if isinstance(item, Mapping) else None
    return transcript.finish(
        title=title if isinstance(title, str) else "",
        source_id=chat_id if isinstance(chat_id, str) else None,
    )


def _plain_parts(
    transcript: Transcript, parts: list[Any], where: str, *, files: bool
) -> str | list[ContentPart]:
    result: list[ContentPart] = []
    for index, raw in enumerate(parts):
        part_where = f"{where}.parts[{index}]"
        part = mapping(raw, part_where)
        kind = part.get("type")
        if kind == "text":
            if part.get("text"):
                result.append(TextPart(str(part["text"])))
        elif kind == "file" and files:
            result.append(_file(transcript, part, part_where))
        elif kind != "step-start":
            transcript.note("part_not_imported", f"a {kind} part is left out.", part_where)
    if not files:
        return "\n\n".join(part.text for part in result if isinstance(part, TextPart))
    return result


def _file(transcript: Transcript, part: Mapping[str, Any], where: str) -> ContentPart:
    """A ``file`` part given as a data URL, as an image or file part; a note otherwise."""
    media_type = str(part.get("mediaType") or "")
    url = part.get("url")
    kind = "image_url" if media_type in IMAGE_TYPES else "file"
    wire = (
        {"type": kind, "image_url": {"url": url}}
        if kind == "image_url"
        else {"type": "file", "file": {"filename": part.get("filename") or "", "file_data": url}}
    )
    try:
        read = part_from_dict(wire)
    except InvalidMessage as exc:
        if exc.code != "unsupported_content":
            raise exc.within(where) from None
        shown = url if isinstance(url, str) and len(url) < 300 else media_type or "a file"
        transcript.note(
            "content_not_imported",
            f"{shown} is not in the file; a note stands in its place.",
            where,
        )
        return TextPart(f"[file not imported: {shown}]")
    assert isinstance(read, ImagePart | FilePart)
    return read.with_data(filename=str(part.get("filename") or ""))


def _assistant(transcript: Transcript, parts: list[Any], where: str, source: str | None) -> None:
    """Each step of the message as one assistant turn, its results after it."""
    for step in _steps(transcript, parts, where):
        for part_where, part in step:
            if part["type"] == "reasoning":
                transcript.thinking(str(part.get("text") or ""), part_where, source_id=source)
        for part_where, part in step:
            if part["type"] == "text":
                transcript.text(str(part.get("text") or ""), part_where, source_id=source)
        results = []
        for part_where, part in step:
            kind = part["type"]
            if kind not in ("text", "reasoning"):
                name = part.get("toolName") if kind == "dynamic-tool" else kind[len("tool-") :]
                call_id = str(part.get("toolCallId") or "")
                arguments = part["rawInput"] if "rawInput" in part else part.get("input")
                transcript.call(call_id, str(name or ""), arguments, part_where, source_id=source)
                answer = _answer(part)
                if answer is not None:
                    results.append((call_id, *answer, part_where))
        transcript.end_turn()
        for call_id, text, is_error, result_where in results:
            transcript.result(call_id, text, result_where, is_error=is_error)


def _steps(
    transcript: Transcript, parts: list[Any], where: str
) -> list[list[tuple[str, Mapping[str, Any]]]]:
    """The parts of each step: from a ``step-start``, or from text after tool parts."""
    steps: list[list[tuple[str, Mapping[str, Any]]]] = [[]]
    for index, raw in enumerate(parts):
        part_where = f"{where}.parts[{index}]"
        part = mapping(raw, part_where)
        kind = part.get("type")
        tool = isinstance(kind, str) and (kind.startswith("tool-") or kind == "dynamic-tool")
        if kind == "step-start" or (
            kind in ("text", "reasoning")
            and any(p["type"] not in ("text", "reasoning") for _, p in steps[-1])
        ):
            steps.append([])
        if kind in ("text", "reasoning") or tool:
            steps[-1].append((part_where, part))
        elif kind != "step-start":
            transcript.note("part_not_imported", f"a {kind} part is left out.", part_where)
    return [step for step in steps if step]


def _answer(part: Mapping[str, Any]) -> tuple[str, bool] | None:
    """A tool part's result and whether it is an error; ``None`` while it has none."""
    state = part.get("state")
    if state == "output-available":
        return output_text(part.get("output")), False
    if state == "output-error":
        return str(part.get("errorText") or "The tool call failed."), True
    if state == "output-denied":
        return DENIED, True
    return None
