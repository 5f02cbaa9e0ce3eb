"""What a run start does while another run of the conversation is active.

The strategies (``BUSY_STRATEGY``, or ``if_busy`` per start; docs/busy-conversations.md):

- ``reject``: refused with ``ConversationBusy`` (the API's 409 ``conversation_busy``).
- ``enqueue``: the new run waits behind the active one, holding its user turn's
  intent, and starts when the runs ahead of it have ended
  (:mod:`~llm_conversations.runs.waiting_runs`).
- ``interrupt``: the active run is cancelled (the text it had streamed kept as
  its answer, its unanswered calls answered) and the new run starts at once.
- ``rollback``: as ``interrupt``, and the cancelled run's turns are removed:
  its user turn and everything after it.

The active run is cancelled in the transaction that stores the new run, after
locking the active run first and the conversation second (the order the loop
takes them in), so a worker ending the run meanwhile and the start cannot
deadlock, and no other run can start in between.
"""

from __future__ import annotations

import uuid

from llm_conversations.conf import BUSY_STRATEGIES, BusyStrategy, conf
from llm_conversations.conversations.tail import remove_run_turns
from llm_conversations.exceptions import RunStateError
from llm_conversations.models import ACTIVE_RUN_STATUSES, Run, RunStatus, TerminationReason
from llm_conversations.runs import transitions

__all__ = ["REPLACING", "busy_strategy", "replace_active", "succeed_replaced"]

REPLACING: frozenset[BusyStrategy] = frozenset({"interrupt", "rollback"})
"""The strategies that cancel the active run for the new one."""


def busy_strategy(asked: str | None) -> BusyStrategy:
    """The strategy a start uses: ``asked``, or ``BUSY_STRATEGY`` when ``None``.

    Raises ``RunStateError`` ``invalid_if_busy`` (field ``if_busy``) for another name.
    """
    chosen = conf.BUSY_STRATEGY if asked is None else asked
    for strategy in BUSY_STRATEGIES:
        if chosen == strategy:
            return strategy
    raise RunStateError(
        "invalid_if_busy",
        f"if_busy must be one of {', '.join(BUSY_STRATEGIES)}.",
        field="if_busy",
    )


def replace_active(conversation_id: uuid.UUID, strategy: BusyStrategy) -> Run | None:
    """In the caller's transaction: cancel the conversation's active run so a new one can
    start in its place; the run cancelled, ``None`` when none was active (or it
    ended before its lock was had: the new run then simply starts).

    Its end is ``interrupted``, or with ``rollback`` ``rolled_back`` and its
    turns removed; a run whose turns cannot be removed (a turn after them is
    not its own) is left ``interrupted``. Runs waiting behind it stay waiting
    (:func:`succeed_replaced` puts them behind the new run).
    """
    active = (
        Run.objects.select_for_update()
        .filter(conversation_id=conversation_id, status__in=ACTIVE_RUN_STATUSES)
        .first()
    )
    if active is None:
        return None
    rollback = strategy == "rollback"
    reason = TerminationReason.ROLLED_BACK if rollback else TerminationReason.INTERRUPTED
    ended = transitions.finish(active, RunStatus.CANCELLED, reason, start_next=False)
    if rollback and remove_run_turns(conversation_id, ended) is None:
        Run.objects.filter(pk=ended.pk).update(termination_reason=TerminationReason.INTERRUPTED)
        ended.termination_reason = TerminationReason.INTERRUPTED
    return ended


def succeed_replaced(replaced: Run, run: Run) -> None:
    """Runs that waited behind ``replaced`` now wait behind ``run``, which took its place."""
    Run.objects.filter(waits_for=replaced, status=RunStatus.WAITING).update(waits_for=run)
