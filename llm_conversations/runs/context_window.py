"""Fitting each model call of a run into the model's context window.

The strategy is the run's own (``context_strategy``) or its provider entry's
``CONTEXT_STRATEGY``; none means every call sends the whole conversation, as
before. :class:`ContextWindow` lives for one execution of a run: it counts the
conversation once (:class:`~llm_conversations.core.fitting.ContextFitter`), then only
what each round adds, anchors estimates on the provider's reported input
tokens, and, for ``summarize``, reads the conversation's latest stored summary
once and asks ``SUMMARY_PROVIDER`` for a longer one only when a cut passes it.
For ``compact`` the provider compacts: each call starts at the user turn its
latest compacted state answered (:func:`compacted_start`); an entry whose
protocol cannot compact summarizes (or, without ``SUMMARY_PROVIDER``, truncates),
and so does a call that a fallback of another protocol answers
(:meth:`ContextWindow.for_backend`).
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from django.db import IntegrityError, transaction

from llm_conversations.conf import conf
from llm_conversations.core.fitting import (
    ContextFitter,
    ContextStrategy,
    Cut,
    summary_message,
    summary_tokens,
)
from llm_conversations.core.messages import ChatMessage, Role
from llm_conversations.core.parameters import RunParameters
from llm_conversations.core.reasoning import compactions
from llm_conversations.core.text import storable_text
from llm_conversations.core.tokens import (
    MESSAGE_OVERHEAD,
    REPLY_OVERHEAD,
    Anchor,
    heuristic_tokens,
    tools_tokens,
)
from llm_conversations.core.tool_specs import ToolSpec
from llm_conversations.exceptions import RunStateError
from llm_conversations.models import ConversationSummary, Message, Run
from llm_conversations.providers import get_provider
from llm_conversations.providers.model_catalog import call_cost, model_info

__all__ = [
    "SUMMARY_INSTRUCTIONS",
    "SUMMARY_TOKENS",
    "ContextWindow",
    "check_strategy",
    "compacted_start",
    "entry_strategy",
    "make_summary",
    "summary_transcript",
]

logger = logging.getLogger("llm_conversations")

SUMMARY_INSTRUCTIONS = (
    "Summarize the conversation below for the assistant that will continue it "
    "without seeing these turns. Keep facts, decisions, names, numbers, what tools "
    "returned and open questions. Answer with the summary only."
)
SUMMARY_TOKENS = 1024
"""The room a new summary is given in the window (and the most it is asked to write)."""


def entry_strategy(provider: str | None) -> ContextStrategy | None:
    """The ``CONTEXT_STRATEGY`` of the ``PROVIDERS`` entry ``provider``, if valid."""
    entry = conf.PROVIDERS.get(provider if provider is not None else conf.DEFAULT_PROVIDER)
    value = entry.get("CONTEXT_STRATEGY") if isinstance(entry, Mapping) else None
    try:
        return None if value is None else ContextStrategy(value)
    except ValueError:
        return None  # the system check (E041) reports it


def check_strategy(value: object, provider: str | None = None, model: str = "") -> str:
    """A run's ``context_strategy`` input as stored ("" for the entry's own).

    Raises :class:`RunStateError` ``invalid_context_strategy`` for an unknown
    value, ``summary_provider_missing`` for ``summarize`` without a
    ``SUMMARY_PROVIDER``, and ``context_window_unknown`` when ``model`` of the
    entry ``provider`` has no known context window to fit to.
    """
    if value is None or value == "":
        return ""
    # "compact" is an entry's choice: its provider is built asking for compaction.
    allowed = [s.value for s in ContextStrategy if s is not ContextStrategy.COMPACT]
    choices = ", ".join(allowed)
    if not isinstance(value, str) or value not in allowed:
        raise RunStateError(
            "invalid_context_strategy",
            f"context_strategy must be one of {choices}.",
            field="context_strategy",
        )
    if value == ContextStrategy.SUMMARIZE and not conf.SUMMARY_PROVIDER:
        raise RunStateError(
            "summary_provider_missing",
            "context_strategy 'summarize' needs the SUMMARY_PROVIDER setting.",
            field="context_strategy",
        )
    info = model_info(provider, model) if model else None
    if model and (info is None or info.context_window is None):
        raise RunStateError(
            "context_window_unknown",
            f"no context window is known for the model {model!r}: set 'context_window' "
            "in its provider entry's MODEL_INFO.",
            field="context_strategy",
        )
    return value


def compacted_start(history: Sequence[ChatMessage], backend: str, starts: Sequence[int]) -> int:
    """Where a call to ``backend`` starts under ``compact``: the user turn (of
    ``starts``) before the latest turn carrying ``backend``'s compacted state,
    which the provider reads in place of everything before it; 0 when none does."""
    for index in range(len(history) - 1, -1, -1):
        if compactions(history[index].reasoning, backend):
            before = bisect.bisect_left(starts, index)
            return starts[before - 1] if before else 0
    return 0


def summary_transcript(history: Sequence[ChatMessage], previous: str | None) -> str:
    """The text a summary is made from: the previous summary, then the turns."""
    lines = [] if previous is None else [f"Summary so far:\n{previous}\n", "Later turns:"]
    for message in history:
        if message.role is Role.TOOL:
            lines.append(f"tool result ({message.tool_call_id}): {message.content}")
            continue
        if message.content:
            lines.append(f"{message.role.value}: {message.content}")
        for call in message.tool_calls or ():
            lines.append(f"assistant called {call.name}({call.arguments_json})")
    return "\n".join(lines)


def make_summary(
    conversation_id: Any,
    history: Sequence[ChatMessage],
    end: int,
    previous: ConversationSummary | None,
    hidden: frozenset[int] = frozenset(),
) -> ConversationSummary:
    """Ask ``SUMMARY_PROVIDER`` for a summary of ``history[:end]`` and store it.

    Made from ``previous`` and the turns after it, so each dropped range is
    read once, less the ``hidden`` positions. A summary of the same range
    stored meanwhile by another run is kept and returned.
    """
    name = conf.SUMMARY_PROVIDER
    provider = get_provider(name)
    begin = 0 if previous is None else previous.end_position
    turns = [m for i, m in enumerate(history[begin:end], begin) if i not in hidden]
    text = summary_transcript(turns, None if previous is None else previous.content)
    response = provider.complete(
        [ChatMessage.user(text)],
        parameters={"instructions": SUMMARY_INSTRUCTIONS, "max_output_tokens": SUMMARY_TOKENS},
    )
    usage = response.usage
    try:
        with transaction.atomic():
            return ConversationSummary.objects.create(
                conversation_id=conversation_id,
                end_position=end,
                content=storable_text(response.content),
                provider=name or "",
                model=response.model,
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cost=call_cost(name, response.model, usage),
            )
    except IntegrityError:
        return ConversationSummary.objects.get(conversation_id=conversation_id, end_position=end)


class ContextWindow:
    """What each model call of one execution of a run sends."""

    def __init__(self, run: Run, strategy: ContextStrategy, limit: int, backend: str = "") -> None:
        self.run = run
        self.strategy = strategy
        self.backend = backend  # whose compacted state a compact call starts from
        self.fitter = ContextFitter(limit)
        self.anchor: Anchor | None = None
        self.cut: Cut | None = None
        self._summary: ConversationSummary | None = None
        self._summary_read = False
        self._anchor_read = False
        self._fixed: dict[tuple[str, ...], int] = {}
        self._uncompacted: ContextWindow | None = None

    @classmethod
    def for_run(cls, run: Run, model: str, parameters: RunParameters) -> ContextWindow | None:
        """The window of ``run`` calling ``model``; ``None`` when it does not fit
        calls (no strategy, or no known context window: check W041)."""
        strategy = (
            ContextStrategy(run.context_strategy)
            if run.context_strategy
            else entry_strategy(run.provider or None)
        )
        info = model_info(run.provider or None, model)
        if strategy is None or info is None or info.context_window is None:
            return None
        window = info.context_window
        reserve = min(parameters.max_output_tokens or info.max_output_tokens or 0, window // 2)
        backend = ""
        if strategy is ContextStrategy.COMPACT:
            provider = get_provider(run.provider or None)
            backend = provider.backend if provider.compaction else ""
            if not backend:
                summarizes = conf.SUMMARY_PROVIDER
                strategy = ContextStrategy.SUMMARIZE if summarizes else ContextStrategy.TRUNCATE
        return cls(run, strategy, window - reserve, backend)

    def for_backend(self, backend: str) -> ContextWindow:
        """The window a call to ``backend`` is fitted in: this one, or, under
        ``compact`` for a backend that cannot read the compacted state (a
        fallback of another protocol), one that summarizes (without
        ``SUMMARY_PROVIDER``, truncates) the whole history to the same limit."""
        if self.strategy is not ContextStrategy.COMPACT or backend == self.backend:
            return self
        if self._uncompacted is None:
            strategy = (
                ContextStrategy.SUMMARIZE if conf.SUMMARY_PROVIDER else ContextStrategy.TRUNCATE
            )
            self._uncompacted = ContextWindow(self.run, strategy, self.fitter.limit)
            # The conversation's last report counted what a compacted call read: no anchor.
            self._uncompacted._anchor_read = True
        return self._uncompacted

    def _fixed_tokens(self, tools: Sequence[ToolSpec], instructions: str | None) -> int:
        key = tuple(spec.name for spec in tools)
        if key not in self._fixed:
            self._fixed[key] = REPLY_OVERHEAD + tools_tokens(tools)
        extra = MESSAGE_OVERHEAD + heuristic_tokens(instructions) if instructions else 0
        return self._fixed[key] + extra

    def _stored_summary(self, end: int) -> ConversationSummary | None:
        if not self._summary_read:
            self._summary_read = True
            self._summary = (
                ConversationSummary.objects.filter(
                    conversation_id=self.run.conversation_id, end_position__lte=end
                )
                .order_by("-end_position")
                .first()
            )
        return self._summary

    def _earlier_anchor(self, end: int, fixed: int) -> Anchor | None:
        """The anchor of the conversation's latest answered call before this
        execution: its reply's ``input_tokens`` against what it sent (from its
        run's first position sent up to the reply), estimated now. ``None``
        when it sent a summary (its size then is not kept) or reported nothing.
        One query, once per execution."""
        self._anchor_read = True
        latest = (
            Message.objects.filter(
                conversation_id=self.run.conversation_id, role=Role.ASSISTANT, position__lt=end
            )
            .order_by("-position")
            .values(
                "position", "input_tokens", "run__context_first_position", "run__context_summary"
            )
            .first()
        )
        if latest is None or not latest["input_tokens"] or latest["run__context_summary"]:
            return None
        start = latest["run__context_first_position"] or 0
        position = latest["position"]
        # What it sent, estimated: from its start to the end, less what came after.
        raw = self.fitter.sent_tokens(start, fixed) - self.fitter.tokens(position)
        return Anchor(latest["input_tokens"], max(1, raw), start, position)

    def messages(
        self,
        history: Sequence[ChatMessage],
        tools: Sequence[ToolSpec],
        parameters: RunParameters,
        *,
        before_summary: Callable[[], None] | None = None,
        hidden: frozenset[int] = frozenset(),
    ) -> list[ChatMessage]:
        """What the next call sends; raises ``ContextOverflow`` when nothing fits.

        ``before_summary`` is called before ``SUMMARY_PROVIDER`` is asked for a
        summary (the budgets: a spent one raises, and no provider is called).
        A summary leaves out the ``hidden`` positions; the caller leaves them out
        of what is sent (counted, they only make the fit err on the safe side).
        """
        self.fitter.extend(history)
        fixed = self._fixed_tokens(tools, parameters.instructions)
        if self.anchor is None and not self._anchor_read:
            self.anchor = self._earlier_anchor(len(history), fixed)
        summary = None
        known: dict[str, Any] = {}
        if self.strategy is ContextStrategy.SUMMARIZE:
            last_user = self.fitter.starts()[-1] if self.fitter.starts() else 0
            summary = self._stored_summary(last_user)
            if summary is not None:
                known = {
                    "summary_end": summary.end_position,
                    "summary_tokens": summary_tokens(summary.content, summary.end_position),
                }
        if self.strategy is ContextStrategy.COMPACT:
            known = {"compacted": compacted_start(history, self.backend, self.fitter.starts())}
        cut = self.fitter.fit(
            fixed,
            strategy=self.strategy,
            anchor=self.anchor,
            summary_budget=SUMMARY_TOKENS,
            **known,
        )
        if cut.summary_end is not None and (summary is None or summary.end_position != cut.start):
            if before_summary is not None:
                before_summary()
            summary = make_summary(self.run.conversation_id, history, cut.start, summary, hidden)
            self._summary = summary
            # The estimate counted the budget; count the summary as written.
            change = summary_tokens(summary.content, summary.end_position) - SUMMARY_TOKENS
            cut = Cut(cut.start, cut.estimated + change, cut.summary_end, cut.raw + change)
        self.cut = cut
        sent = None if cut.summary_end is None or summary is None else summary
        message = None if sent is None else summary_message(sent.content, sent.end_position)
        return cut.messages(history, message)

    def fields(self, input_tokens: int) -> dict[str, Any]:
        """What the run records of the last call (columns of ``Run``), and
        the anchor for the next: ``input_tokens`` is the provider's count."""
        cut = self.cut
        if cut is None:
            return {}
        if input_tokens:
            self.anchor = Anchor(input_tokens, max(1, cut.raw), cut.start, len(self.fitter))
        summary = self._summary if cut.summary_end is not None else None
        return {
            "context_first_position": cut.start,
            "context_summary_id": None if summary is None else summary.pk,
            "context_estimated_tokens": cut.estimated,
            "context_reported_tokens": input_tokens or None,
        }
