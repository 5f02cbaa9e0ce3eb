"""What answers the tool calls a run leaves unanswered when it ends.

Whatever ends a run, every call it stored gets exactly one result, so the
conversation accepts the next turn: the engine (``runs/transitions.finish``)
answers the calls still open when a run is cancelled, times out or fails, and
an import answers those of a run exported unfinished, both with
:func:`unanswered_results`.
"""

from __future__ import annotations

from collections.abc import Iterable

from llm_conversations.core.messages import ChatMessage
from llm_conversations.models import TerminationReason
from llm_conversations.tools import tool_result_message

__all__ = ["UNANSWERED", "UNANSWERED_DEFAULT", "unanswered_results"]

# The error result of a call still unanswered when its run ends, by reason.
UNANSWERED = {
    TerminationReason.CANCELLED: "The run was cancelled before this tool call ran.",
    TerminationReason.INTERRUPTED: "A new run interrupted this one before this tool call ran.",
    TerminationReason.TIMEOUT: "The run ran out of time before this tool call ran.",
    TerminationReason.IMPORTED_UNFINISHED: (
        "The run was unfinished when it was exported; this tool call was never answered."
    ),
}
UNANSWERED_DEFAULT = "The run failed before this tool call was answered."


def unanswered_results(call_ids: Iterable[str], reason: TerminationReason) -> list[ChatMessage]:
    """One error result per call in ``call_ids``, saying why the run ended without it."""
    text = UNANSWERED.get(reason, UNANSWERED_DEFAULT)
    return [tool_result_message(call_id, text, is_error=True) for call_id in call_ids]
