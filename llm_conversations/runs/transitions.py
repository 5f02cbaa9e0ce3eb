"""State changes of a run, each one conditional so races resolve in the database.

Every function here changes a run only when it is still in the state the change
expects (a conditional ``UPDATE`` or a row lock), so a run cancelled while its
provider or tools worked keeps no late turn, and a finished run is never
revived. ``run_finished`` is sent once the end is committed, and
``run_requires_action`` once a pause is.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext

from llm_conversations import telemetry
from llm_conversations.conversations.history import unanswered_call_ids
from llm_conversations.conversations.locks import lock_idle_conversation
from llm_conversations.conversations.store import (
    append_cancelled_reply,
    append_completion,
    append_for_run,
    append_messages,
)
from llm_conversations.conversations.unanswered import unanswered_results
from llm_conversations.core.completions import CompletionResponse
from llm_conversations.core.messages import ChatMessage, ToolCall
from llm_conversations.core.text import storable_text
from llm_conversations.exceptions import (
    ConversationBusy,
    RunStateError,
)
from llm_conversations.models import (
    ENDED_RUN_STATUSES,
    Decision,
    Message,
    Run,
    RunEventType,
    RunStatus,
    TerminationReason,
    WaitingCall,
)
from llm_conversations.providers.model_catalog import call_cost
from llm_conversations.runs import policy, waiting_runs
from llm_conversations.runs.live_connections import on_a_live_connection
from llm_conversations.runs.log.reader import unstored_text
from llm_conversations.runs.log.writer import EventItem, record
from llm_conversations.runs.run_columns import RELEASED, counted_fields, end_fields, lease_expiry
from llm_conversations.signals import run_finished, run_requires_action
from llm_conversations.users import AnyUser

__all__ = [
    "cancel_run",
    "finish",
    "held",
    "pause",
    "requeue_failed",
    "started_events",
    "store_repair_prompt",
    "store_reply",
    "store_results",
]


def held(run: Run) -> Q:
    """The run while this process holds its lease (any holder when it has none)."""
    return Q(pk=run.pk, lease_owner=run.lease_owner)


def pause(run: Run, waiting: Sequence[WaitingCall]) -> Run:
    """Wait for decisions or client-side outputs on ``waiting``; the lease is released.

    ``run_requires_action`` is sent once the pause is committed.
    """
    with transaction.atomic():
        paused = Run.objects.filter(held(run), status=RunStatus.RUNNING).update(
            status=RunStatus.REQUIRES_ACTION,
            waiting_calls=list(waiting),
            **RELEASED,
        )
        run.refresh_from_db()
        if paused:
            record(run, [(RunEventType.RUN_REQUIRES_ACTION, {})], state=run)
    if paused:
        transaction.on_commit(partial(run_requires_action.send, sender=Run, run=run))
    return run


def finish(
    run: Run,
    status: RunStatus,
    reason: TerminationReason,
    error: BaseException | None = None,
    *,
    where: Q | None = None,
    start_next: bool = True,
) -> Run:
    """End a run: every run ends here, logging ``status``'s end event; one that
    ended meanwhile keeps its state.

    ``where`` narrows which state may be ended (the loop passes its lease, the
    reaper an expired lease); the moves to ``status`` that ``RUN_MOVES`` allows
    are the rest. In the same transaction, every call the conversation leaves
    unanswered is answered with an error result, so the conversation stays
    valid and usable whatever ended the run; a cancelled run keeps the text its
    model had streamed as its assistant turn (finish reason ``cancelled``),
    exactly what its streams showed. Then the oldest run waiting behind it is
    queued (:func:`_start_next`) unless ``start_next`` is false: the caller
    starts a run of its own in its place. A run that was waiting for its turn
    (``run.status``, read under its lock) stored nothing, and ends alone.
    """
    end_event = status.end_event
    if end_event is None or status not in ENDED_RUN_STATUSES:
        raise ValueError(f"{status!r} does not end a run.")
    stored_turns = run.status != RunStatus.WAITING
    fields = end_fields(status, reason, error)
    with transaction.atomic():
        ended = Run.objects.filter(where or Q(), pk=run.pk, status__in=status.reached_from).update(
            **fields
        )
        rows: list[Message] = []
        if ended and stored_turns:
            rows += _answer_left_calls(run, reason)
            if status is RunStatus.CANCELLED:
                rows += _keep_streamed_text(run)
        run.refresh_from_db()
        if ended:
            record(run, [*map(_stored_event, rows), (end_event, {})], messages=rows, state=run)
            _ended(run, start_next=start_next and stored_turns)
    return run


def _ended(run: Run, *, start_next: bool, count: int | None = None) -> None:
    """In the transaction that ended ``run`` (its end logged): the run waiting behind
    it starts, and ``run_finished`` is sent once committed. ``count``: the messages
    of the conversation, whose row this transaction locked already."""
    if start_next:
        _start_next(run.conversation_id, count)
    transaction.on_commit(partial(run_finished.send, sender=Run, run=run))


def _answer_left_calls(run: Run, reason: TerminationReason) -> list[Message]:
    """Answer every call the conversation leaves unanswered with an error result
    (streams close these calls as they close any other)."""
    unanswered = unanswered_call_ids(run.conversation_id)
    if not unanswered:
        return []
    return append_messages(run.conversation_id, unanswered_results(unanswered, reason), run=run)


def _keep_streamed_text(run: Run) -> list[Message]:
    """Store the text a cancelled run's model had streamed as its assistant turn."""
    streamed = unstored_text(run.pk)
    if not streamed:
        return []
    return [append_cancelled_reply(run.conversation_id, streamed, run=run)]


def _stored_event(row: Message, *, denied: bool = False) -> EventItem:
    """The event of a stored turn: a tool result (``denied``: the result of a call a
    person denied, which streams show as such), or another turn."""
    if row.role != "tool":
        return (RunEventType.MESSAGE_STORED, {"message": str(row.pk)})
    data: dict[str, Any] = {"message": str(row.pk)}
    if denied:
        data["denied"] = True
    return (RunEventType.TOOL_RESULT_STORED, data)


def _start_next(conversation_id: uuid.UUID, count: int | None = None) -> None:
    """Queue the oldest run waiting behind the one that ended; one whose user turn can
    no longer be stored fails with the reason, and the next one is tried."""
    while (oldest := waiting_runs.queue_oldest(conversation_id, count)) is not None:
        count = None  # read again under the lock after a refused one
        waiting, refused = oldest
        if refused is None:
            return
        finish(
            waiting,
            RunStatus.FAILED,
            TerminationReason.ERROR,
            refused,
            where=Q(status=RunStatus.WAITING),
            start_next=False,
        )


def store_reply(
    run: Run,
    response: CompletionResponse,
    *,
    history: Sequence[ChatMessage] | None = None,
    starting: Sequence[ToolCall] = (),
    parsed: Any = None,
    metadata: dict[str, Any] | None = None,
    context: Mapping[str, Any] | None = None,
    entry: str | None = None,
    model: str | None = None,
    unlogged: Sequence[EventItem] = (),
    ending: TerminationReason | None = None,
) -> Message | None:
    """Count the model call and store its turn; ``None`` if the run stopped meanwhile.

    One transaction: the conditional update that counts the call also renews
    the lease, and ``starting`` (calls of this turn about to run) are logged
    as ``tool_call.started`` with the turn. ``history``, the conversation as
    the loop holds it, spares the store re-reading it. ``parsed`` and
    ``metadata`` are what a judged final answer adds; ``context``, the ``Run``
    columns recording what the call sent (``ContextWindow.fields``), are set in
    the same update. ``entry`` is the ``PROVIDERS`` entry that answered (the
    run's own when ``None``), whose prices apply, recorded as ``answered_by``;
    ``model`` the model that answered, recorded as the run's ``model`` (a
    fallback answers with its own). ``unlogged``: the deltas of the reply's text
    not logged yet, logged before the turn. With ``ending`` the turn is the run's
    final answer: the same transaction completes the run (why: ``ending``), as
    :func:`finish` would, and ``run`` is read back as it ended.
    """
    usage = response.usage
    answered_by = entry or run.provider
    # Priced before the transaction: the prices in force when the reply came.
    cost = call_cost(answered_by or None, response.model, usage)
    telemetry.record_cost(cost, entry=answered_by, response=response)

    counted = counted_fields(run, usage, cost, answered_by, model, context)

    def write() -> Message | None:
        with transaction.atomic():
            # The conditional update locks the run; a run cancelled while the
            # provider answered matches nothing and keeps no late reply. A final
            # answer ends the run in the same update.
            ended = {} if ending is None else end_fields(RunStatus.COMPLETED, ending)
            # Renewed by a turn stored; released by the end.
            fields = {**counted, "lease_expires_at": lease_expiry(), **ended}
            if not Run.objects.filter(held(run), status=RunStatus.RUNNING).update(**fields):
                return None
            row = append_completion(
                run.conversation_id,
                response,
                run=run,
                history=history,
                parsed=parsed,
                metadata=metadata,
                cost=cost,
                run_locked=True,
            )
            events = [*unlogged, _stored_event(row), *started_events(starting)]
            if ending is None:
                record(run, events, messages=[row])
                return row
            # The row as the update left it (this run's lease held, nobody else wrote it).
            for name, value in fields.items():
                setattr(run, name, value)
            record(run, [*events, (RunEventType.RUN_COMPLETED, {})], messages=[row], state=run)
            # The append locked the conversation: the run waiting behind it is seen.
            _ended(run, start_next=True, count=row.position + 1)
        return row

    row = on_a_live_connection(write)
    if row is not None and ending is None:
        for name, value in counted.items():
            setattr(run, name, value)
    return row


def started_events(calls: Iterable[ToolCall]) -> list[EventItem]:
    """The ``tool_call.started`` events of calls about to run."""
    return [(RunEventType.TOOL_CALL_STARTED, {"tool_call": call.to_wire()}) for call in calls]


def store_results(
    run: Run, results: list[ChatMessage], *, history: Sequence[ChatMessage] | None = None
) -> list[Message] | None:
    """Store tool turns; ``None`` if the run stopped meanwhile (its calls are answered).

    Output no database can store is made storable and the turn flagged
    ``metadata["sanitized"]``. The append checks that the run still runs under
    this lease (the heartbeat renews it); ``history`` as for :func:`store_reply`.
    """
    storable = [replace(m, content=storable_text(m.content)) for m in results]
    metadata = [
        {"sanitized": True} if s != m else {} for s, m in zip(storable, results, strict=True)
    ]

    def write() -> list[Message] | None:
        with transaction.atomic():
            # A run cancelled while its tools ran has answered the calls
            # already: these late results are dropped.
            rows = append_for_run(run, storable, metadata=metadata, history=history)
            if rows is None:
                return None
            events = [
                _stored_event(r, denied=run.decision(r.tool_call_id or "") is Decision.DENIED)
                for r in rows
            ]
            record(run, events, messages=rows)
        return rows

    # A tool may take long: the connection may have been dropped meanwhile.
    return on_a_live_connection(write)


def requeue_failed(run_id: uuid.UUID | str, *, user: AnyUser | None = None) -> Run:
    """Queue a failed run again; its error is cleared and the next claim is a new attempt.

    With a ``user``, ``MAX_ACTIVE_RUNS_PER_USER`` applies (``TooManyActiveRuns``).
    Refused in the trash (``ConversationTrashed``): the conversation's row lock,
    which moving it to the trash takes too, orders the two.
    """
    try:
        with transaction.atomic():
            policy.lock_active_runs(user)
            conversation_id = Run.objects.values_list("conversation_id", flat=True).get(pk=run_id)
            lock_idle_conversation(conversation_id)
            requeued = Run.objects.filter(pk=run_id, status=RunStatus.FAILED).update(
                status=RunStatus.QUEUED,
                queued_at=timezone.now(),
                # A retry gets the whole attempt budget again.
                attempts=0,
                termination_reason="",
                error_type="",
                error_message="",
                finished_at=None,
            )
    except IntegrityError as exc:
        if Run.violates_one_active_run(exc):
            raise ConversationBusy() from None  # another run of the conversation is active
        raise
    run = Run.objects.get(pk=run_id)
    if not requeued:
        raise RunStateError(
            "run_not_failed",
            gettext("only a failed run can be retried; this one is %(status)s.")
            % {"status": run.status},
        )
    return run


def cancel_run(run_id: uuid.UUID | str) -> Run:
    """Cancel an active run, answering its unanswered calls with an error result,
    or a run waiting behind the active one (it stored nothing yet)."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        if run.status == RunStatus.WAITING:
            waiting_runs.step_out_of_line(run)
            return finish(run, RunStatus.CANCELLED, TerminationReason.CANCELLED)
        if not run.is_active:
            raise RunStateError(
                "run_not_active",
                gettext("the run is already %(status)s.") % {"status": run.status},
            )
        return finish(run, RunStatus.CANCELLED, TerminationReason.CANCELLED)


def store_repair_prompt(run: Run, prompt: ChatMessage) -> Message | None:
    """Store the user turn of a repair round; ``None`` if the run stopped meanwhile."""
    with transaction.atomic():
        # Lock the run, as store_results does: a cancelled run gets no late turn.
        if not Run.objects.filter(held(run), status=RunStatus.RUNNING).update(
            updated_at=timezone.now()
        ):
            return None
        row = append_messages(run.conversation_id, [prompt], run=run, metadata={"repair": True})[0]
        record(run, [_stored_event(row)], messages=[row])
    return row
