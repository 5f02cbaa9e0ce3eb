"""Events of a run of the tool loop, in the order they happen.

``ToolLoopService.events()`` yields them as it executes a run; the run's
durable log (:class:`~llm_conversations.models.RunEvent` rows, which the API
serves) records the same happenings under the same types: :func:`log_type`
names the :class:`~llm_conversations.models.RunEventType` of each. Stored rows
are passed as ``Message`` and ``Run`` objects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from llm_conversations.core.messages import ToolCall
from llm_conversations.models import Message, Run, RunEventType

# The provider's own events: a piece of the assistant's text, or of its
# reasoning text, as it streams.
from llm_conversations.providers.stream_events import ReasoningDelta, TextDelta

__all__ = [
    "FellBack",
    "LoopEvent",
    "MessageStored",
    "ReasoningDelta",
    "RunCompleted",
    "RunEnded",
    "RunFailed",
    "RunRequiresAction",
    "TextDelta",
    "ToolCallStarted",
    "ToolResultStored",
    "delta_event",
    "log_type",
]


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    """A tool call is about to run on the server."""

    tool_call: ToolCall


@dataclass(frozen=True, slots=True)
class FellBack:
    """A model call moves to another provider entry (``to_entry``): ``from_entry``
    failed (``reason``) or was skipped by its circuit breaker (``circuit_open``).

    ``superseded``: text the failed call streamed (``TextDelta`` events yielded
    since the last stored turn) is not the answer; the new entry answers anew.
    """

    from_entry: str
    to_entry: str
    reason: str
    superseded: bool = False


@dataclass(frozen=True, slots=True)
class _Stored:
    message: Message


class ToolResultStored(_Stored):
    """A tool turn answering a call was stored (``message``)."""

    __slots__ = ()


class MessageStored(_Stored):
    """An assistant turn was stored (``message``)."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class RunEnded:
    """Where a run stands once the loop stops executing it (``run``): it ended or waits."""

    run: Run


class RunRequiresAction(RunEnded):
    """The run paused: ``run.waiting_calls`` need approval or outputs."""

    __slots__ = ()


class RunCompleted(RunEnded):
    """The run ended normally (``termination_reason`` says how)."""

    __slots__ = ()


class RunFailed(RunEnded):
    """The run ended with an error (``run.error_type``, ``run.error_message``)."""

    __slots__ = ()


LoopEvent = (
    ReasoningDelta
    | TextDelta
    | FellBack
    | ToolCallStarted
    | ToolResultStored
    | MessageStored
    | RunRequiresAction
    | RunCompleted
    | RunFailed
)
"""Any event the loop yields."""

_LOG_TYPES: Final[dict[type[LoopEvent], RunEventType]] = {
    ReasoningDelta: RunEventType.REASONING_DELTA,
    TextDelta: RunEventType.TEXT_DELTA,
    FellBack: RunEventType.RUN_FALLBACK,
    ToolCallStarted: RunEventType.TOOL_CALL_STARTED,
    ToolResultStored: RunEventType.TOOL_RESULT_STORED,
    MessageStored: RunEventType.MESSAGE_STORED,
    RunRequiresAction: RunEventType.RUN_REQUIRES_ACTION,
    RunCompleted: RunEventType.RUN_COMPLETED,
    RunFailed: RunEventType.RUN_FAILED,
}


def log_type(event: LoopEvent) -> RunEventType:
    """The type under which the run's log records what ``event`` says."""
    return _LOG_TYPES[type(event)]


def delta_event(item: tuple[RunEventType, dict[str, Any]]) -> TextDelta | ReasoningDelta:
    """The loop's event of a logged delta (``text.delta`` or ``reasoning.delta``)."""
    kind, data = item
    text = str(data.get("delta", ""))
    return ReasoningDelta(text) if kind is RunEventType.REASONING_DELTA else TextDelta(text)
