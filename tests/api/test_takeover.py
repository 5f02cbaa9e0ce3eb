"""A request whose run another worker takes over tells the truth about it.

While the model answers, the request's lease lapses and another worker claims
the run (here: its lease owner changes, and that worker ends the run a moment
later). The streamed start follows the run's log to the other worker's real
end instead of making one up; a non-streamed start answers 202 with the run
still executing elsewhere, as a background start does.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connections
from rest_framework.test import APIClient

from llm_conversations.core.completions import CompletionResponse
from llm_conversations.models import Conversation, Run, RunStatus, TerminationReason
from llm_conversations.providers import Provider, ResponseCompleted, StreamEvent
from llm_conversations.runs.transitions import finish
from tests.api.conftest import API_SETTINGS, parse_sse

pytestmark = pytest.mark.django_db(transaction=True)

finished_elsewhere: list[threading.Thread] = []


class TakenOver(Provider):
    """Answers, but meanwhile another worker has claimed the run."""

    backend = "taken-over"
    uses_http = False
    # Whether the other worker ends the run soon after (else it keeps executing).
    ends_it = True

    def send(self, request: Any) -> CompletionResponse:
        run = Run.objects.get(status=RunStatus.RUNNING)
        Run.objects.filter(pk=run.pk).update(lease_owner="other-host:1:worker")

        def other_worker() -> None:
            try:
                threading.Event().wait(0.5)
                finish(Run.objects.get(pk=run.pk), RunStatus.COMPLETED, TerminationReason.COMPLETED)
            finally:
                # A thread's connection is its own: left open, it outlives the test database.
                connections.close_all()

        if self.ends_it:
            thread = threading.Thread(target=other_worker)
            finished_elsewhere.append(thread)
            thread.start()
        return CompletionResponse("an answer nobody keeps")

    def send_stream(self, request: Any) -> Iterator[StreamEvent]:
        yield ResponseCompleted(self.send(request))


class TakenOverForGood(TakenOver):
    ends_it = False


@pytest.fixture(autouse=True)
def providers(settings: Any) -> None:
    settings.LLM_CONVERSATIONS = {
        **API_SETTINGS,
        "PROVIDERS": {
            **API_SETTINGS["PROVIDERS"],
            "taken": {"BACKEND": "tests.api.test_takeover.TakenOver", "MODEL": "t"},
            "gone": {"BACKEND": "tests.api.test_takeover.TakenOverForGood", "MODEL": "t"},
        },
    }


def test_a_streamed_start_follows_the_other_workers_execution_to_its_end(
    client: APIClient, conversation: Conversation
) -> None:
    response = client.post(
        f"/api/conversations/{conversation.pk}/runs/",
        {"message": "hi", "provider": "taken", "stream": True},
        format="json",
    )
    events = parse_sse(b"".join(response.streaming_content))
    for thread in finished_elsewhere:
        thread.join(5)
    ends = [name for name, _ in events if name.startswith("run.") and name != "run.running"]
    assert ends == ["run.completed"]
    assert events[-1][1]["run"]["status"] == "completed"


def test_a_plain_start_answers_202_while_the_run_goes_on_elsewhere(
    client: APIClient, conversation: Conversation
) -> None:
    response = client.post(
        f"/api/conversations/{conversation.pk}/runs/",
        {"message": "hi", "provider": "gone"},
        format="json",
    )
    assert response.status_code == 202
    assert response.json()["status"] == "running"
    run = Run.objects.get()
    assert run.lease_owner == "other-host:1:worker"
    # Nothing of the lost execution was stored: its lease was gone.
    assert not run.messages.filter(role="assistant").exists()
