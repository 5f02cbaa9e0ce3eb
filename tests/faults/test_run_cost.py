"""What one run costs the database: a two-round run with one tool (the model calls the
tool, then answers), started through the API against the fake provider server.

The figures are pinned: a change that adds a statement or a transaction to a
run fails here (bench/run_cost.py measures the same run's CPU beside a floor).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from llm_conversations.conversations import create_conversation
from llm_conversations.models import Run, RunStatus
from tests.runs.test_loop import TRANSACTION_CONTROL

from .conftest import Configure
from .server import Exchange, FakeProvider

pytestmark = pytest.mark.django_db(transaction=True)

# The conversation (1); the start (5: the lock, which counts the user turn in,
# and the active run read after it; the run, the user turn, run.running; an
# empty conversation has no history to read); the call's turn (4: the run counts it, the conversation's count, the
# turn, its events); its result (3: the count, conditional on the run's lease,
# the turn, its event); the answer (5: the run counts it and ends, the count, the
# turn, its events, the run waiting behind); the run's webhooks (1).
# (The client is authenticated without a query; a tool without a context reads
# nothing.)
STATEMENTS = 19
COMMITS = 4


def call_then_answer(ex: Exchange) -> None:
    if ex.body["messages"][-1]["role"] == "tool":
        ex.send(ex.render("It is sunny."))
    else:
        ex.send(ex.render(calls=[("c1", "lookup", '{"city": "Paris"}')], finish="tool"))


@pytest.mark.parametrize("stream", [False, True])
def test_a_two_round_run_costs_its_pinned_statements_and_commits(
    stream: bool, fake: FakeProvider, configure: Configure, client: APIClient, user: Any
) -> None:
    configure("openai")
    fake.play([], every_time=call_then_answer)
    conversation = create_conversation(owner=user)
    with CaptureQueriesContext(connection) as captured:
        response = client.post(
            f"/api/conversations/{conversation.pk}/runs/",
            {"message": "Weather in Paris?", "stream": stream},
            format="json",
        )
        if stream:
            b"".join(response.streaming_content)
    assert Run.objects.get().status == RunStatus.COMPLETED
    assert len(fake.requests) == 2
    sql = [q["sql"] for q in captured]
    statements = [s for s in sql if not s.startswith(TRANSACTION_CONTROL) and "pg_notify" not in s]
    commits = [s for s in sql if s.startswith("COMMIT")]
    # The stream follows the log by push; what it still reads is pinned with it.
    assert len(statements) == STATEMENTS + (STREAM_READS if stream else 0), "\n".join(statements)
    if connection.vendor == "sqlite":  # PostgreSQL's commits are not statements here
        assert len(commits) == COMMITS


# What the in-request stream reads of the log: nothing. The start's events, pushed
# before it subscribed, are handed to it; every later batch is pushed to it.
STREAM_READS = 0
