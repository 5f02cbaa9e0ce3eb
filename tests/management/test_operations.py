"""Operations commands: ``reap_runs`` and ``prune_run_events``, and the pruning service."""

from __future__ import annotations

import threading
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db.models import Count
from django.utils import timezone

from llm_conversations.conversations import create_conversation
from llm_conversations.conversations.retention import (
    prunable_events,
    prune_events,
    prune_run_events,
    retention_cutoff,
)
from llm_conversations.management.commands import reap_runs as reap_command
from llm_conversations.models import Run, RunEvent, RunEventType, RunStatus
from tests.conftest import task_backend

pytestmark = pytest.mark.django_db


def make_run(status: str = RunStatus.COMPLETED, **fields: Any) -> Run:
    return Run.objects.create(conversation=create_conversation(), status=status, **fields)


def add_events(run: Run, count: int, age_days: float) -> None:
    moment = timezone.now() - timedelta(days=age_days)
    RunEvent.objects.bulk_create(
        RunEvent(run=run, type=RunEventType.TEXT_DELTA, data={"delta": "x"}, created_at=moment)
        for _ in range(count)
    )


def lose(run: Run, attempts: int) -> None:
    """The run's worker died: its lease expired while it ran."""
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.RUNNING,
        attempts=attempts,
        lease_owner="gone-host:1:dead",
        lease_expires_at=timezone.now() - timedelta(seconds=5),
    )


def call(*args: str, **options: Any) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(*args, stdout=out, stderr=err, **options)
    return out.getvalue(), err.getvalue()


class TestReapRuns:
    def test_one_pass_requeues_and_fails_lost_runs_and_prints_counts(self, settings: Any) -> None:
        settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "MAX_ATTEMPTS": 2}
        # Requeued runs are enqueued once committed; a backend that does nothing
        # keeps them queued here.
        settings.TASKS = {"default": {"BACKEND": task_backend("dummy.DummyBackend")}}
        once, twice, live = make_run(), make_run(), make_run(RunStatus.RUNNING)
        lose(once, attempts=1)
        lose(twice, attempts=2)
        Run.objects.filter(pk=live.pk).update(
            lease_owner="alive:2:x", lease_expires_at=timezone.now() + timedelta(minutes=1)
        )
        out, _ = call("reap_runs")
        assert out.strip() == "Requeued 1 run(s), failed 1 run(s), enqueued 0 queued run(s) again."
        statuses = dict(Run.objects.values_list("pk", "status"))
        assert statuses == {once.pk: "queued", twice.pk: "failed", live.pk: "running"}
        assert (
            call("reap_runs")[0].strip()
            == "Requeued 0 run(s), failed 0 run(s), enqueued 0 queued run(s) again."
        )

    def test_loop_repeats_until_interrupted(self, monkeypatch: pytest.MonkeyPatch) -> None:
        run = make_run(RunStatus.RUNNING)
        passes: list[int] = []
        real_pass = reap_command.Command._pass

        def counting_pass(self: reap_command.Command) -> None:
            passes.append(1)
            if len(passes) == 2:
                # A worker dies between passes; the next pass fails the run.
                lose(run, attempts=99)
            if len(passes) == 3:
                real_pass(self)
                raise KeyboardInterrupt
            real_pass(self)

        monkeypatch.setattr(reap_command.Command, "_pass", counting_pass)
        monkeypatch.setattr(threading.Event, "wait", lambda self, timeout=None: False)
        # Between passes the command drops stale connections; the test's
        # transaction holds this one.
        monkeypatch.setattr(reap_command, "close_old_connections", lambda: None)
        out, _ = call("reap_runs", "--loop", "0.01")
        assert len(passes) == 3
        assert out.splitlines() == [
            "Reaping lost runs every 0.01 s; Ctrl-C stops.",
            "Requeued 0 run(s), failed 1 run(s), enqueued 0 queued run(s) again.",
            "Stopped reaping.",
        ]
        run.refresh_from_db()
        assert (run.status, run.termination_reason) == ("failed", "worker_lost")

    def test_loop_needs_positive_seconds(self) -> None:
        with pytest.raises(CommandError, match="positive"):
            call("reap_runs", "--loop", "0")


class TestPruneRunEvents:
    def test_old_events_of_ended_runs_go_and_the_rest_stay(self, settings: Any) -> None:
        settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "EVENT_RETENTION_DAYS": 7}
        ended, failed, active = make_run(), make_run(RunStatus.FAILED), make_run(RunStatus.RUNNING)
        add_events(ended, 3, age_days=8)
        add_events(ended, 2, age_days=6)  # recent: kept
        add_events(failed, 4, age_days=30)
        add_events(active, 5, age_days=30)  # the run is still active: kept

        out, err = call("prune_run_events", "--dry-run")
        assert out.startswith("Would delete 7 run event(s) older than 7 day(s)")
        assert "Nothing was deleted" in out
        assert err == ""
        assert RunEvent.objects.count() == 14

        out, err = call("prune_run_events")
        assert out.startswith("Deleted 7 run event(s) older than 7 day(s)")
        assert "7/7 (100%)" in err
        left = dict(RunEvent.objects.values_list("run_id").annotate(n=Count("id")))
        assert left == {ended.pk: 2, active.pk: 5}
        assert call("prune_run_events")[0].startswith("Deleted 0 run events: none older")

    def test_batches_report_progress_and_days_overrides_the_setting(self) -> None:
        run = make_run(RunStatus.CANCELLED)
        add_events(run, 25, age_days=3)
        out, err = call("prune_run_events", "--days", "5")
        assert "Deleted 0" in out
        out, err = call("prune_run_events", "--days", "2", "--batch-size", "10")
        assert "Deleted 25 run event(s) older than 2 day(s)" in out
        assert [line.split()[-2] for line in err.splitlines()] == ["10/25", "20/25", "25/25"]
        assert not RunEvent.objects.exists()

    def test_bad_options(self) -> None:
        with pytest.raises(CommandError, match="negative"):
            call("prune_run_events", "--days", "-1")
        with pytest.raises(CommandError, match="at least 1"):
            call("prune_run_events", "--batch-size", "0")


class TestPruneService:
    def test_prune_events_deletes_in_batches_and_returns_the_count(self) -> None:
        run = make_run()
        add_events(run, 2500, age_days=10)
        add_events(make_run(RunStatus.REQUIRES_ACTION), 3, age_days=10)
        seen: list[int] = []
        assert prune_events(progress=seen.append) == 2500
        assert seen == [1000, 2000, 2500]
        assert RunEvent.objects.count() == 3
        assert prune_events() == 0

    def test_cutoff_is_exclusive_and_follows_the_setting(self, settings: Any) -> None:
        settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "EVENT_RETENTION_DAYS": 1}
        now = timezone.now()
        assert retention_cutoff(now) == now - timedelta(days=1)
        run = make_run()
        add_events(run, 1, age_days=2)
        event = RunEvent.objects.get()
        assert prunable_events(event.created_at).count() == 0
        assert prune_events(event.created_at + timedelta(microseconds=1)) == 1

    def test_the_periodic_task_prunes(self) -> None:
        add_events(make_run(), 4, age_days=100)
        result = prune_run_events.enqueue()
        assert result.return_value == {"deleted": 4, "idempotency_keys": 0}
        assert not RunEvent.objects.exists()
