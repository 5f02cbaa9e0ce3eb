"""Turning tool return values and failures into tool-turn content."""

from __future__ import annotations

import json

from pydantic_core import to_jsonable_python

from llm_conversations.conf import conf
from llm_conversations.core.messages import ChatMessage
from llm_conversations.tools.schema import cut

# An exception message longer than this is cut: the model needs the gist, not a dump.
_EXCEPTION_MESSAGE_CHARS = 1_000


def malformed_reason(raw: str) -> str:
    """Why arguments that are not a JSON object were refused, for the model."""
    excerpt = cut(raw, 200)
    try:
        decoded = json.loads(raw)
    except ValueError as exc:
        return f"the arguments are not valid JSON ({exc}): {excerpt}. Send a JSON object."
    kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(decoded), "a number"
    )
    return f"the arguments must be a JSON object, not {kind}: {excerpt}."


def exception_summary(exc: BaseException) -> str:
    """``"ValueError: message"``, short; never a traceback."""
    message = str(exc).strip()
    name = type(exc).__name__
    return cut(f"{name}: {message}" if message else name, _EXCEPTION_MESSAGE_CHARS)


# Results --------------------------------------------------------------------


def truncate_text(text: str, max_chars: int) -> str:
    """``text`` cut to at most ``max_chars`` characters, marker included.

    The marker says how much is shown:
    ``\\n[truncated: 12,345 of 80,000 characters shown]``.
    """
    if len(text) <= max_chars:
        return text
    total = len(text)
    shown = max_chars
    # The marker's length depends on the shown count; settle it in a few rounds.
    for _ in range(3):
        marker = f"\n[truncated: {shown:,} of {total:,} characters shown]"
        shown = max(max_chars - len(marker), 0)
    marker = f"\n[truncated: {shown:,} of {total:,} characters shown]"
    if len(marker) > max_chars:
        return text[:max_chars]  # A cap too small for any marker.
    return text[:shown] + marker


def format_tool_output(value: object, *, max_chars: int | None = None) -> str:
    """A tool's return value as tool-turn content, capped at ``max_chars``.

    A ``str`` is used as is; JSON-serialisable values (and dataclasses,
    pydantic models, dates) become JSON; anything else becomes ``str(value)``.
    ``max_chars`` defaults to the ``TOOL_RESULT_MAX_CHARS`` setting.
    """
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError):
            try:
                text = json.dumps(to_jsonable_python(value), ensure_ascii=False)
            except Exception:  # pydantic cannot serialise it either
                text = str(value)
    return truncate_text(text, conf.TOOL_RESULT_MAX_CHARS if max_chars is None else max_chars)


def tool_result_message(tool_call_id: str, value: object, *, is_error: bool = False) -> ChatMessage:
    """The tool turn answering ``tool_call_id`` with ``value``, formatted and capped."""
    return ChatMessage.tool_result(tool_call_id, format_tool_output(value), is_error=is_error)
