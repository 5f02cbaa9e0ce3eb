"""Events of a run of the tool loop, in the order they happen.

``ToolLoopService.events()`` yields them; the API turns them into
Server-Sent Events. Stored rows are passed as ``Message`` and ``Run`` objects.
"""

from __future__ import annotations

from dataclasses import dataclass

from llm_conversations.core.messages import ToolCall
from llm_conversations.models import Message, Run

# The provider's own event: a piece of the assistant's text as it streams.
from llm_conversations.providers.stream_events import TextDelta

__all__ = [
    "LoopEvent",
    "MessageStored",
    "RunCompleted",
    "RunEvent",
    "RunFailed",
    "RunRequiresAction",
    "TextDelta",
    "ToolCallStarted",
    "ToolResultStored",
]


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    """A tool call is about to run on the server."""

    tool_call: ToolCall


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
class RunEvent:
    """Where a run stands once the loop stops executing it (``run``)."""

    run: Run


class RunRequiresAction(RunEvent):
    """The run paused: ``run.waiting_calls`` need approval or outputs."""

    __slots__ = ()


class RunCompleted(RunEvent):
    """The run ended normally (``termination_reason`` says how)."""

    __slots__ = ()


class RunFailed(RunEvent):
    """The run ended with an error (``run.error_type``, ``run.error_message``)."""

    __slots__ = ()


LoopEvent = (
    TextDelta
    | ToolCallStarted
    | ToolResultStored
    | MessageStored
    | RunRequiresAction
    | RunCompleted
    | RunFailed
)
