"""Prompt caching: the entry option that turns it off, and the request shapes it needs.

Providers cache the longest unchanged start of a request, so every adapter
builds its body with the parts that never change (model, tools, system) ahead
of the conversation, and the conversation last: round N's bytes then extend
round N-1's (``bench/prompt_prefix.py`` measures it). Anthropic caches only up
to the ``cache_control`` breakpoints a request sets (:func:`place_breakpoints`);
OpenAI caches by itself and routes by ``prompt_cache_key`` (:func:`prefix_key`).
The rules and their sources are in docs/providers.md, "Prompt caching".
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from typing import Any

from llm_conversations.core.messages import ChatMessage, Role

__all__ = [
    "CACHE_OPTION",
    "EPHEMERAL",
    "MAX_BREAKPOINTS",
    "caching_on",
    "last_key",
    "place_breakpoints",
    "prefix_key",
]

# The entry option (never sent) that turns prompt caching off: "OPTIONS": {"cache": false}.
CACHE_OPTION = "cache"
# Anthropic refuses a request with more breakpoints than this.
MAX_BREAKPOINTS = 4
EPHEMERAL: Mapping[str, str] = {"type": "ephemeral"}
# Blocks Anthropic refuses a cache_control on (thinking is cached with the turn around it).
_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})


def caching_on(options: MutableMapping[str, Any]) -> bool:
    """Pop the ``cache`` option from ``options``: caching is on unless it is ``false``."""
    return options.pop(CACHE_OPTION, True) is not False


def last_key(body: dict[str, Any], key: str) -> dict[str, Any]:
    """``body`` with ``key`` moved to the end, so the serialized request grows at its end."""
    if key in body:
        body[key] = body.pop(key)
    return body


def _marks(value: object) -> int:
    """How many ``cache_control`` breakpoints ``value`` already carries."""
    if isinstance(value, Mapping):
        return ("cache_control" in value) + sum(_marks(item) for item in value.values())
    if isinstance(value, list):
        return sum(_marks(item) for item in value)
    return 0


def _last_markable(turns: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The last content block of the request that may carry a breakpoint."""
    for turn in reversed(turns):
        for block in reversed(turn["content"]):
            if block.get("type") not in _UNMARKABLE:
                return block  # type: ignore[no-any-return]
    return None


def place_breakpoints(body: dict[str, Any]) -> dict[str, Any]:
    """Anthropic's breakpoints set on a Messages body, at most four in all.

    A rolling one on the last block of the last turn (everything before it
    is the stable prefix: the next round reads it from the cache), one on the
    system prompt (made a text block) and one on the last tool, in that order
    of value; breakpoints the entry's options set already count.
    """
    free = MAX_BREAKPOINTS - _marks(body)
    targets: list[dict[str, Any]] = []
    block = _last_markable(body.get("messages") or ())
    if block is not None:
        targets.append(block)
    if isinstance(body.get("system"), str) and body["system"]:
        body["system"] = [{"type": "text", "text": body["system"]}]
        targets.append(body["system"][-1])
    if body.get("tools"):
        targets.append(body["tools"][-1])
    for target in targets:
        if free <= 0:
            break
        if "cache_control" not in target:
            target["cache_control"] = dict(EPHEMERAL)
            free -= 1
    return body


def prefix_key(messages: Iterable[ChatMessage]) -> str:
    """A ``prompt_cache_key`` for a conversation: a digest of its start.

    The system text and first turn never change from one round to the next,
    so every round of a conversation (and every conversation that starts the
    same way, which shares the cached prefix anyway) has the same key.
    """
    start: list[Any] = []
    for message in messages:
        start.append(message.to_wire())
        if message.role is not Role.SYSTEM:
            break
    digest = hashlib.sha256(json.dumps(start, sort_keys=True).encode()).hexdigest()
    return f"llmc-{digest[:32]}"
