"""Fitting a conversation into a model's context window: where the sent history starts.

:class:`ContextFitter` keeps cumulative token estimates of a conversation's
messages, extended as the conversation grows, so choosing a cut costs a
binary search, never a re-scan. The rules of a cut, in one place:

- system messages are always sent (those before the cut too, in order);
- the sent history starts at a user turn, so it never starts with a tool
  result and never separates an assistant turn's calls from their results,
  and every protocol accepts its first turn;
- the latest user turn and everything after it are always sent.

A summary covering the messages before a cut (``summary_end``) is sent in their
place. The stored conversation is never changed; this only chooses what a call
sends. Pure: imports nothing from Django.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from itertools import accumulate

from llm_conversations.core.messages import ChatMessage, Role
from llm_conversations.core.tokens import (
    MESSAGE_OVERHEAD,
    Anchor,
    Counter,
    heuristic_tokens,
    message_tokens,
)
from llm_conversations.exceptions import ContextOverflow

__all__ = [
    "SUMMARY_TARGET",
    "ContextFitter",
    "ContextOverflow",
    "ContextStrategy",
    "Cut",
    "summary_message",
    "summary_tokens",
]

SUMMARY_TARGET = 0.5
"""A new summary covers enough turns that the rest fills at most this share of
the window, so the following rounds reuse it rather than extend it each time."""


class ContextStrategy(StrEnum):
    """What a run does with a conversation longer than the model's context window."""

    ERROR = "error"
    """Refuse the call: the run ends with ``context_overflow``."""
    TRUNCATE = "truncate"
    """Send the latest turns that fit; older ones are left out."""
    SUMMARIZE = "summarize"
    """Send a summary of the older turns in their place."""
    COMPACT = "compact"
    """The provider compacts the older turns (Anthropic, OpenAI Responses): its
    compacted state, stored on the reply that carried it, stands in for the turns
    before it; an entry whose protocol cannot compact summarizes instead."""


@dataclass(frozen=True, slots=True)
class Cut:
    """Where a call's history starts, and what it is estimated to take.

    ``start`` is the index of the first message sent after the kept system
    messages (0: the whole conversation); ``estimated`` counts everything sent,
    the summary of ``summary_end`` included when one is used, corrected by the
    anchor; ``raw`` is the same before the correction.
    """

    start: int
    estimated: int
    summary_end: int | None = None
    raw: int = 0

    def messages(
        self, history: Sequence[ChatMessage], summary: ChatMessage | None = None
    ) -> list[ChatMessage]:
        """What is sent: kept system messages, the summary, then ``history[start:]``."""
        if self.start == 0:
            return list(history)
        kept = [m for m in history[: self.start] if m.role is Role.SYSTEM]
        if summary is not None:
            kept.append(summary)
        return [*kept, *history[self.start :]]


class ContextFitter:
    """Chooses cuts of one growing conversation against a token limit.

    ``limit`` is the tokens the input may take (the window less the room
    kept for the reply). Feed it the conversation with :meth:`extend` (only
    the messages not seen yet are counted) before each :meth:`fit`.
    """

    def __init__(self, limit: int, count: Counter = heuristic_tokens) -> None:
        self.limit = limit
        self._count = count
        # _all[i]: tokens of messages 0..i-1; _system[i]: of the system ones among them.
        self._all = [0]
        self._system = [0]
        self._users: list[int] = []  # indices of user turns, ascending

    def __len__(self) -> int:
        return len(self._all) - 1

    def extend(self, history: Sequence[ChatMessage]) -> None:
        """Count the messages of ``history`` past those already counted."""
        begin = len(self)
        new = history[begin:]
        if not new:
            return
        count = self._count
        # Comprehensions and accumulate: the first round counts every message.
        tokens = [
            message_tokens(m, count)
            if m.tool_calls or m.tool_call_id
            else MESSAGE_OVERHEAD + count(m.content)
            for m in new
        ]
        system = Role.SYSTEM
        self._all += accumulate(tokens, initial=self._all[-1])
        del self._all[begin]  # accumulate repeats the initial value
        self._system += accumulate(
            (t if m.role is system else 0 for t, m in zip(tokens, new, strict=True)),
            initial=self._system[-1],
        )
        del self._system[begin]
        user = Role.USER
        self._users += [i for i, m in enumerate(new, begin) if m.role is user]

    def tokens(self, start: int, end: int | None = None) -> int:
        """Estimated tokens of messages ``start`` to ``end`` (the last when ``None``)."""
        return self._all[len(self) if end is None else end] - self._all[start]

    def sent_tokens(self, start: int, fixed: int, summary_tokens: int = 0) -> int:
        """Estimated tokens of a call starting at ``start``: ``fixed`` (tools,
        instructions, framing), the system messages before ``start``, the
        summary, the rest."""
        if start == 0:
            return fixed + self.tokens(0)
        return fixed + self._system[start] + summary_tokens + self.tokens(start)

    def starts(self) -> list[int]:
        """Where a history may start: each user turn up to the latest (the whole
        conversation aside)."""
        return self._users

    def first_fitting(self, fixed: int, limit: int, summary_tokens: int = 0, after: int = 0) -> int:
        """The earliest start after ``after`` whose call fits ``limit``; -1 when none does.

        Starts are user turns, whose sent tokens fall as the start moves on,
        so this is a binary search.
        """
        users = self._users
        low = bisect.bisect_right(users, after)
        high = len(users)
        while low < high:
            middle = (low + high) // 2
            if self.sent_tokens(users[middle], fixed, summary_tokens) <= limit:
                high = middle
            else:
                low = middle + 1
        return users[low] if low < len(users) else -1

    def fit(
        self,
        fixed: int,
        *,
        strategy: ContextStrategy,
        anchor: Anchor | None = None,
        summary_end: int | None = None,
        summary_tokens: int = 0,
        summary_budget: int = 0,
        compacted: int | None = None,
    ) -> Cut:
        """The cut for the next call.

        ``anchor`` (the previous call's reported count) scales estimates. For
        :attr:`ContextStrategy.SUMMARIZE`, ``summary_end`` and ``summary_tokens``
        describe the stored summary (it covers messages before ``summary_end``);
        a cut past it means a new summary is needed, whose size is taken as
        ``summary_budget``. For :attr:`ContextStrategy.COMPACT` the history
        starts at ``compacted`` (the user turn the provider's latest compacted
        state answered; the provider reads that state in place of all before it)
        and the provider, not the estimate, decides when to compact again.
        Raises :class:`ContextOverflow` when nothing fits.
        """
        ratio = anchor.ratio if anchor is not None else 1.0
        limit = int(self.limit / ratio)  # the estimate's scale

        def cut(start: int, end: int | None, tokens: int) -> Cut:
            raw = self.sent_tokens(start, fixed, tokens)
            estimated = raw if anchor is None else anchor.correct(raw, start, len(self))
            return Cut(start, estimated, end, raw)

        if strategy is ContextStrategy.COMPACT:
            return cut(compacted or 0, None, 0)
        whole = self.sent_tokens(0, fixed)
        if whole <= limit:
            return cut(0, None, 0)
        if strategy is ContextStrategy.ERROR:
            raise self._overflow(cut(0, None, 0).estimated)
        reusable = (
            strategy is ContextStrategy.SUMMARIZE
            and summary_end is not None
            and self.sent_tokens(summary_end, fixed, summary_tokens) <= limit
        )
        if reusable and summary_end is not None:
            return cut(summary_end, summary_end, summary_tokens)
        if strategy is ContextStrategy.TRUNCATE:
            start = self.first_fitting(fixed, limit)
            if start < 0:
                raise self._overflow(self._smallest(fixed, 0))
            return cut(start, None, 0)
        # A new or longer summary: cut far enough for the next rounds to fit too.
        after = summary_end or 0
        target = int(limit * SUMMARY_TARGET)
        start = self.first_fitting(fixed, target, summary_budget, after)
        if start < 0:
            start = self.first_fitting(fixed, limit, summary_budget, after)
        if start < 0:
            raise self._overflow(self._smallest(fixed, summary_budget))
        return cut(start, start, summary_budget)

    def _smallest(self, fixed: int, summary_tokens: int) -> int:
        last = self._users[-1] if self._users else 0
        return self.sent_tokens(last, fixed, summary_tokens)

    def _overflow(self, estimated: int) -> ContextOverflow:
        return ContextOverflow(
            f"the conversation needs about {estimated} input tokens; the model's context "
            f"window leaves {self.limit} for input."
        )


def summary_message(text: str, end: int) -> ChatMessage:
    """The system message a summary of the first ``end`` messages is sent as."""
    return ChatMessage.system(f"Summary of the first {end} messages of this conversation:\n{text}")


def summary_tokens(text: str, end: int, count: Counter = heuristic_tokens) -> int:
    """Estimated tokens of :func:`summary_message`."""
    return MESSAGE_OVERHEAD + count(summary_message(text, end).content)
