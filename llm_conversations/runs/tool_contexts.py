"""Building the :class:`~llm_conversations.tools.ToolContext` of the calls a run answers.

The context is built from the run alone (its conversation and that
conversation's owner, read once per round and only when a tool asks for a
context, unless the run came with them from its start), so a worker executing
the run by id builds the same one. Progress
reports are live events: written only while the run still runs under the lease
this execution holds (:func:`~llm_conversations.runs.log.writer.record_live`),
from whichever thread the tool runs on (each uses its own connection).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from llm_conversations.core.messages import ToolCall
from llm_conversations.core.text import storable_text
from llm_conversations.models import Conversation, Run, RunEventType
from llm_conversations.runs.log.writer import record_live
from llm_conversations.tools import ToolContext, ToolRegistry

__all__ = ["MAX_PROGRESS_CHARS", "tool_contexts"]

# A progress report is a status line, not output: longer ones are cut.
MAX_PROGRESS_CHARS = 500


def _report(run: Run, call_id: str, message: str, fraction: float | None) -> bool:
    data = {
        "tool_call_id": call_id,
        # "text", not "message": in the log, "message" names a stored turn.
        "text": storable_text(message)[:MAX_PROGRESS_CHARS],
        "fraction": fraction,
    }
    return record_live(run, [(RunEventType.TOOL_CALL_PROGRESS, data)]) is not None


def tool_contexts(
    calls: Sequence[ToolCall], offered: ToolRegistry, run: Run
) -> dict[str, ToolContext]:
    """The context of each call whose tool declares one, by call id; no query when none does."""
    wanting = [c for c in calls if c.name in offered and offered.get(c.name).wants_tool_context]
    if not wanting:
        return {}
    if Run.conversation.is_cached(run) and Conversation.owner.is_cached(run.conversation):
        conversation = run.conversation  # the start's, in the request that executes it
    else:
        conversation = Conversation.objects.select_related("owner").get(pk=run.conversation_id)
    return {
        call.id: ToolContext(
            conversation.owner, conversation, run, call.id, partial(_report, run, call.id)
        )
        for call in wanting
    }
