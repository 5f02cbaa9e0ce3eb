"""Final answers of a run that asks for structured output (a ``response_format``).

The loop hands each final answer here. It is judged against the schema
(:meth:`~llm_conversations.core.structured.ResponseFormat.judge`) and stored with
its parsed value, or, when it does not match, with the problem in its
``metadata["invalid_output"]``. An answer that does not match gets a repair
round: a user turn (``metadata["repair"]``) telling the model what was wrong,
up to ``STRUCTURED_OUTPUT_REPAIRS`` of them; then the run fails with
``invalid_output``.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

from django.db.models import Q

from llm_conversations.conf import conf
from llm_conversations.core.completions import CompletionResponse, FinishReason
from llm_conversations.core.messages import ChatMessage, Role
from llm_conversations.core.parameters import RunParameters
from llm_conversations.core.structured import Judgment, ResponseFormat, repairs_so_far
from llm_conversations.exceptions import InvalidOutput
from llm_conversations.models import Run, RunStatus, TerminationReason
from llm_conversations.runs import transitions
from llm_conversations.runs.events import LoopEvent, MessageStored, RunCompleted, RunFailed

__all__ = ["ends_with_answer", "judge", "repair_or_fail", "repairs", "resume_with_answer", "stored"]

# A model that stopped for one of these reasons gave no answer to judge; the
# run ends with that reason, as it does without a response_format.
_NOT_AN_ANSWER = (FinishReason.CONTENT_FILTER, FinishReason.LENGTH)

Steps = Generator[LoopEvent, None, bool]
"""Events to yield; the return value says whether the loop goes on."""


def judge(parameters: RunParameters, response: CompletionResponse) -> Judgment | None:
    """The judgment on a final answer; ``None`` without a ``response_format``, or when
    the model was cut off or refused."""
    schema = parameters.response_format
    if schema is None or response.finish_reason in _NOT_AN_ANSWER:
        return None
    return schema.judge(response.content)


def stored(judgment: Judgment | None) -> dict[str, Any]:
    """What the answer's row keeps: its parsed value, or why it has none."""
    if judgment is None:
        return {}
    if judgment.valid:
        return {"parsed": judgment.value}
    return {"metadata": {"invalid_output": judgment.problem}}


def repairs(parameters: RunParameters, history: Sequence[ChatMessage], iterations: int) -> int:
    """The repair rounds a run has had so far (always 0 without a ``response_format``)."""
    if parameters.response_format is None:
        return 0
    return repairs_so_far(history, iterations)


def repair_or_fail(run: Run, judgment: Judgment, done: int, *, where: Q) -> Steps:
    """Store a repair prompt while repair rounds are left (the loop goes on), else fail.

    An answer that could not be checked in time fails at once: the schema, not
    the answer, is what takes too long.
    """
    if done < conf.STRUCTURED_OUTPUT_REPAIRS and not judgment.timed_out:
        return (yield from _ask_again(run, judgment))
    return (yield from _fail(run, judgment, done, where=where))


def _fail(run: Run, judgment: Judgment, done: int, *, where: Q) -> Steps:
    if judgment.timed_out:
        error = InvalidOutput(f"the response_format could not judge the answer: {judgment.problem}")
    else:
        error = InvalidOutput(
            f"the answer did not match the response_format after {done} repair round(s): "
            f"{judgment.problem}"
        )
    reason = TerminationReason.INVALID_OUTPUT
    yield RunFailed(transitions.finish(run, RunStatus.FAILED, reason, error, where=where))
    return False


def ends_with_answer(run: Run, history: Sequence[ChatMessage]) -> bool:
    """Whether the run is resumed with its final answer already stored."""
    last = history[-1] if history else None
    return (
        run.iterations > 0
        and last is not None
        and last.role is Role.ASSISTANT
        and not (last.tool_calls)
    )


def resume_with_answer(run: Run, schema: ResponseFormat, answer: ChatMessage, *, where: Q) -> Steps:
    """A run resumed after its final answer was stored: a retry after ``invalid_output``
    (which asks for one more repair round), or a crash before the run ended."""
    judgment = schema.judge(answer.content)
    if judgment.valid:
        reason = TerminationReason.COMPLETED
        yield RunCompleted(transitions.finish(run, RunStatus.COMPLETED, reason, where=where))
        return False
    if judgment.timed_out:
        return (yield from _fail(run, judgment, 0, where=where))
    return (yield from _ask_again(run, judgment))


def _ask_again(run: Run, judgment: Judgment) -> Steps:
    """Store the repair prompt for ``judgment``; False when the run stopped meanwhile."""
    row = transitions.store_repair_prompt(run, ChatMessage.user(judgment.repair_prompt()))
    if row is None:
        return False
    yield MessageStored(row)
    return True
