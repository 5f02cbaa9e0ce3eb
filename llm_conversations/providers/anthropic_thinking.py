"""Anthropic's extended thinking and compaction: the blocks read from replies and
where they go back.

The rules (docs/providers.md, "Reasoning"): thinking and redacted thinking
blocks come back unmodified and in order at the start of the turn that made
them; Anthropic refuses them in a final assistant turn when the request has
thinking off, and refuses thinking on in the middle of a tool turn that has
none (a turn another provider made). A ``compaction`` block (the server's summary
of the turns before it, made when ``context_management`` asks for compaction) is
kept as a ``compaction`` part and sent back in its place, before the turn's text:
Anthropic then reads it instead of everything before it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from llm_conversations.core.reasoning import Reasoning, ReasoningKind

from .stream import StreamAccumulator

__all__ = ["BACKEND", "fit_thinking", "keep_thinking", "thinking_blocks"]

BACKEND = "anthropic"
_THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})


def keep_thinking(reply: StreamAccumulator, block: Mapping[str, Any]) -> None:
    """Add a reply's ``thinking`` (text and signature), ``redacted_thinking`` (data)
    or ``compaction`` (the summary's text) block."""
    if block.get("type") == "compaction":
        reply.reason(ReasoningKind.COMPACTION, block.get("content"))
    elif block.get("type") == "thinking":
        reply.reason(ReasoningKind.THINKING, block.get("thinking"), block.get("signature"))
    elif block.get("type") == "redacted_thinking":
        reply.reason(ReasoningKind.REDACTED, data=block.get("data"))


def thinking_blocks(reasoning: Sequence[Reasoning] | None) -> list[dict[str, Any]]:
    """The ``thinking``, ``redacted_thinking`` and ``compaction`` blocks of a turn
    Anthropic answered, verbatim and in order.

    Reasoning another provider made is never sent, nor a thinking block
    without its signature.
    """
    blocks: list[dict[str, Any]] = []
    for part in reasoning or ():
        if part.provider != BACKEND:
            continue
        if part.kind is ReasoningKind.COMPACTION and part.text:
            blocks.append({"type": "compaction", "content": part.text})
        elif part.data is None:
            continue
        elif part.kind is ReasoningKind.THINKING:
            blocks.append({"type": "thinking", "thinking": part.text, "signature": part.data})
        elif part.kind is ReasoningKind.REDACTED:
            blocks.append({"type": "redacted_thinking", "data": part.data})
    return blocks


def fit_thinking(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` made acceptable for its ``thinking`` setting.

    With thinking off, a final assistant turn loses its thinking blocks. With
    thinking ``enabled``, a request that continues a tool turn without
    thinking blocks is sent without ``thinking``: the turn goes on as it
    began, and the next turn thinks again.
    """
    turns: list[dict[str, Any]] = body["messages"]
    thinking = body.get("thinking")
    mode = thinking.get("type") if isinstance(thinking, Mapping) else None
    if turns[-1:] and turns[-1]["role"] == "assistant" and mode not in ("enabled", "adaptive"):
        last = turns[-1]
        last["content"] = [b for b in last["content"] if b["type"] not in _THINKING_BLOCKS]
    if mode == "enabled" and _unthought_tool_turn(turns):
        del body["thinking"]
    return body


def _unthought_tool_turn(turns: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the request continues a tool turn whose assistant part has no thinking."""
    if len(turns) < 2 or turns[-1]["role"] != "user" or turns[-2]["role"] != "assistant":
        return False
    if not any(block["type"] == "tool_result" for block in turns[-1]["content"]):
        return False
    first = turns[-2]["content"][:1]
    return not first or first[0]["type"] not in _THINKING_BLOCKS
