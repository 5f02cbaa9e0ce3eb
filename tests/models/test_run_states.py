"""The run-state table (``RUN_MOVES`` beside ``RunStatus``): the moves a run may make,
the event each end state's stream ends with, and what "executing" means."""

from __future__ import annotations

import pytest

from llm_conversations.conversations import create_conversation
from llm_conversations.models import (
    ACTIVE_RUN_STATUSES,
    ENDED_RUN_STATUSES,
    Run,
    RunEvent,
    RunEventType,
    RunStatus,
    TerminationReason,
)
from llm_conversations.models.run_states import RUN_MOVES
from llm_conversations.runs import ToolLoopService, transitions


def test_every_status_has_its_moves_and_ended_ones_have_none_but_a_retry() -> None:
    assert set(RUN_MOVES) == set(RunStatus)
    assert RunStatus.COMPLETED.moves == RunStatus.CANCELLED.moves == frozenset()
    assert RunStatus.FAILED.moves == {RunStatus.QUEUED}  # a retry
    assert all(status not in status.moves for status in RunStatus)


def test_each_end_state_has_the_event_its_stream_ends_with() -> None:
    ends = {status: status.end_event for status in RunStatus if status.end_event is not None}
    assert ends == {
        RunStatus.REQUIRES_ACTION: RunEventType.RUN_REQUIRES_ACTION,
        RunStatus.COMPLETED: RunEventType.RUN_COMPLETED,
        RunStatus.FAILED: RunEventType.RUN_FAILED,
        RunStatus.CANCELLED: RunEventType.RUN_CANCELLED,
    }
    assert all(event.ends_stream for event in ends.values())
    assert all(RunStatus.ended_by(event) is status for status, event in ends.items())


def test_executing_is_waiting_queued_or_running() -> None:
    executing = {status for status in RunStatus if status.executing}
    assert executing == {RunStatus.WAITING, RunStatus.QUEUED, RunStatus.RUNNING}
    assert set(ENDED_RUN_STATUSES).isdisjoint(executing)
    assert RunStatus.REQUIRES_ACTION in ACTIVE_RUN_STATUSES


def test_a_run_completes_only_from_running() -> None:
    assert RunStatus.COMPLETED.reached_from == {RunStatus.RUNNING}
    assert RunStatus.CANCELLED.reached_from == {
        RunStatus.WAITING,
        RunStatus.QUEUED,
        RunStatus.RUNNING,
        RunStatus.REQUIRES_ACTION,
    }


@pytest.mark.django_db
def test_finish_makes_only_the_moves_of_the_table() -> None:
    run = ToolLoopService().start(create_conversation(), "hi")  # queued
    kept = transitions.finish(run, RunStatus.COMPLETED, TerminationReason.COMPLETED)
    assert kept.status == RunStatus.QUEUED  # queued -> completed is not a move
    assert not RunEvent.objects.filter(run=run).exists()
    ended = transitions.finish(run, RunStatus.CANCELLED, TerminationReason.CANCELLED)
    assert ended.status == RunStatus.CANCELLED
    assert list(RunEvent.objects.filter(run=run).values_list("type", flat=True)) == [
        RunEventType.RUN_CANCELLED
    ]
    # An ended run is never revived, nor ended twice.
    again = transitions.finish(run, RunStatus.FAILED, TerminationReason.ERROR)
    assert (again.status, RunEvent.objects.filter(run=run).count()) == (RunStatus.CANCELLED, 1)


@pytest.mark.parametrize("status", [RunStatus.RUNNING, RunStatus.QUEUED, RunStatus.WAITING])
def test_finish_refuses_a_status_that_is_not_an_end(status: RunStatus) -> None:
    with pytest.raises(ValueError, match="does not end a run"):
        transitions.finish(Run(), status, TerminationReason.ERROR)
