"""RUN_START_CONCURRENCY: requests that start or resume runs take one of the
process's slots once authenticated and throttled, before their run's database
work; the rest of the site does not."""

from __future__ import annotations

import base64
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from llm_conversations.conversations import create_conversation
from llm_conversations.exceptions import ServerBusy
from llm_conversations.models import Conversation, IdempotencyKey, Message, Run
from llm_conversations.runs import ToolLoopService, start_slots
from llm_conversations.runs.start_slots import StartSlots, slots
from llm_conversations.tools import tool
from tests.api.conftest import API_SETTINGS, TOOLS, calls_text
from tests.api.test_runs import start
from tests.conftest import requires_postgresql, run_together
from tests.runs.test_loop import TRANSACTION_CONTROL

pytestmark = pytest.mark.django_db

# Slots held while the tool below ran.
taken_during_tools: list[int] = []


@tool
def count_slots() -> int:
    """How many start slots are held while a run executes."""
    taken_during_tools.append(slots.taken)
    return slots.taken


@pytest.fixture
def one_slot(settings: Any) -> dict[str, Any]:
    settings.LLM_CONVERSATIONS = {
        **API_SETTINGS,
        "TOOLS": [*TOOLS, "tests.api.test_start_slots.count_slots"],
        "RUN_START_CONCURRENCY": 1,
        "RUN_START_WAIT_SECONDS": 0.05,
    }
    return dict(settings.LLM_CONVERSATIONS)


@pytest.fixture
def held(one_slot: dict[str, Any]) -> Iterator[start_slots.Slot]:
    """The only slot, held as another request preparing a run would hold it."""
    slot = slots.take()
    yield slot
    slot.close()


def base(conversation: Conversation) -> str:
    return f"/api/conversations/{conversation.pk}/"


def test_a_start_waiting_longer_than_the_wait_is_503_server_busy_and_stores_nothing(
    client: APIClient, conversation: Conversation, held: start_slots.Slot
) -> None:
    messages = Message.objects.count()
    url = f"{base(conversation)}runs/"
    body = {"message": "Hello"}
    with CaptureQueriesContext(connection) as queries:
        response = client.post(url, body, format="json", HTTP_IDEMPOTENCY_KEY="start-1")
    assert response.status_code == 503
    assert response["Retry-After"] == "1"
    error = response.json()["error"]
    assert (error["code"], error["details"]) == ("server_busy", {"retry_after": 1})
    assert "1 run(s)" in error["message"]
    # Refused before the first query: a waiting request holds no connection.
    assert len(queries) == 0
    assert (Message.objects.count(), Run.objects.count()) == (messages, 0)
    assert not IdempotencyKey.objects.exists()
    assert slots.taken == 1

    # The same request, sent again with its key once a slot is free, starts the run.
    held.close()
    again = client.post(url, body, format="json", HTTP_IDEMPOTENCY_KEY="start-1")
    assert again.status_code == 201
    assert Run.objects.count() == 1
    assert slots.taken == 0


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("post", "runs/"),
        ("post", "runs/{run}/retry/"),
        ("post", "runs/{run}/approve/"),
        ("post", "runs/{run}/deny/"),
        ("post", "runs/{run}/submit_tool_outputs/"),
        ("post", "edit/"),
        ("post", "regenerate/"),
        ("post", "chat/"),
    ],
)
def test_every_request_that_starts_or_resumes_a_run_takes_a_slot(
    client: APIClient, conversation: Conversation, held: start_slots.Slot, method: str, path: str
) -> None:
    # The slot comes before the run is looked up, so any run id shows it.
    url = base(conversation) + path.format(run=uuid.uuid4())
    refused = getattr(client, method)(url, {}, format="json")
    assert (refused.status_code, refused.json()["error"]["code"]) == (503, "server_busy")
    held.close()
    admitted = getattr(client, method)(url, {}, format="json")
    assert admitted.status_code in (400, 404), admitted.content
    assert slots.taken == 0


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [
        ("get", "", 200),
        ("get", "runs/", 200),
        ("get", "messages/", 200),
        ("post", "messages/", 201),
        ("post", "runs/{run}/cancel/", 404),
        ("get", "runs/{run}/events/", 404),
        ("post", "fork/", 201),
    ],
)
def test_reads_appends_and_cancels_do_not_wait_for_a_slot(
    client: APIClient,
    conversation: Conversation,
    held: start_slots.Slot,
    method: str,
    path: str,
    expected: int,
) -> None:
    url = base(conversation) + path.format(run=uuid.uuid4())
    body: Any = [{"role": "user", "content": "More"}] if path == "messages/" else {}
    response = getattr(client, method)(url, body, format="json")
    assert response.status_code == expected, response.content
    assert slots.taken == 1


def test_a_foreground_run_executes_without_its_slot(
    client: APIClient, conversation: Conversation, one_slot: dict[str, Any]
) -> None:
    taken_during_tools.clear()
    response = start(client, conversation, message=calls_text(("a", "count_slots", {})))
    assert response.status_code == 201, response.content
    assert response.json()["status"] == "completed"
    # Claimed, the run gave the request's slot back before its tool ran.
    assert taken_during_tools == [0]
    assert slots.taken == 0


@pytest.mark.parametrize(
    "body",
    [
        {"message": "Hi", "background": True},
        {"message": "Hi", "stream": True},
        {"message": {"role": "assistant", "content": "no"}},
        {"message": "Hi", "provider": "nope"},
    ],
)
def test_the_slot_is_given_back_however_the_request_ends(
    client: APIClient, conversation: Conversation, one_slot: dict[str, Any], body: dict[str, Any]
) -> None:
    response = start(client, conversation, **body)
    assert response.status_code in (200, 201, 202, 400)
    if response.streaming:
        b"".join(response.streaming_content)
    assert slots.taken == 0
    # The one slot is free for the next start.
    assert (
        start(client, create_conversation(owner=conversation.owner), message="Hi").status_code
        == 201
    )


@requires_postgresql
def test_a_burst_of_starts_prepares_at_most_the_limit_at_once(
    transactional_db: None, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.LLM_CONVERSATIONS = {
        **API_SETTINGS,
        "RUN_START_CONCURRENCY": 2,
        "RUN_START_WAIT_SECONDS": 30,
    }
    user = User.objects.create_user("burst", password="burst-pw")
    conversations = [create_conversation(owner=user) for _ in range(12)]
    seen: list[int] = []
    original = ToolLoopService.start

    def counting_start(self: ToolLoopService, *args: Any, **kwargs: Any) -> Run:
        seen.append(slots.taken)
        time.sleep(0.02)  # long enough for the others to pile up
        return original(self, *args, **kwargs)

    monkeypatch.setattr(ToolLoopService, "start", counting_start)

    def work(n: int) -> int:
        api = APIClient()
        api.force_authenticate(user)
        return int(start(api, conversations[n], message=f"hello {n}").status_code)

    outcomes = run_together(len(conversations), work)
    assert outcomes == [201] * len(conversations)
    assert len(seen) == len(conversations)
    # Never more than two at once, and the limit was reached: they did wait.
    assert max(seen) == 2
    assert slots.taken == 0


def test_no_limit_takes_no_turn(settings: Any) -> None:
    settings.LLM_CONVERSATIONS = {"RUN_START_CONCURRENCY": None, "RUN_START_WAIT_SECONDS": 0.01}
    gate = StartSlots()
    taken = [gate.take() for _ in range(50)]
    assert gate.taken == 50
    for slot in taken:
        slot.close()
    assert gate.taken == 0


def test_a_waiting_request_gets_the_slot_given_back(settings: Any) -> None:
    settings.LLM_CONVERSATIONS = {"RUN_START_CONCURRENCY": 1, "RUN_START_WAIT_SECONDS": 5}
    gate = StartSlots()
    first = gate.take()
    got: list[float] = []

    def wait() -> None:
        began = time.monotonic()
        gate.take().close()
        got.append(time.monotonic() - began)

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.2)
    assert got == []  # still waiting
    first.release()
    first.release()  # once only: a second release gives nothing back
    waiter.join(5)
    assert len(got) == 1
    assert 0.15 < got[0] < 5
    assert gate.taken == 0
    first.close()
    assert gate.taken == 0


def test_a_full_gate_refuses_after_the_wait(settings: Any) -> None:
    settings.LLM_CONVERSATIONS = {"RUN_START_CONCURRENCY": 1, "RUN_START_WAIT_SECONDS": 0.1}
    gate = StartSlots()
    slot = gate.take()
    began = time.monotonic()
    with pytest.raises(ServerBusy) as refused:
        gate.take()
    assert refused.value.code == "server_busy"
    assert time.monotonic() - began >= 0.1
    slot.close()


def test_give_back_without_a_slot_does_nothing() -> None:
    before = slots.taken
    start_slots.give_back()
    assert slots.taken == before


def test_a_background_start_is_six_statements(
    client: APIClient, conversation: Conversation, django_capture_on_commit_callbacks: Any
) -> None:
    # What each start of a burst costs the database: find the conversation,
    # lock it by counting the turn in, see no active run, insert the run (marked
    # enqueued), read the tail, insert the turn. The task is enqueued once committed.
    with (
        django_capture_on_commit_callbacks(execute=False) as callbacks,
        CaptureQueriesContext(connection) as captured,
    ):
        response = start(client, conversation, message="Hello", background=True)
    assert response.status_code == 202
    statements = [q["sql"] for q in captured if not q["sql"].startswith(TRANSACTION_CONTROL)]
    assert len(statements) == 6, statements
    assert len(callbacks) == 2  # message_appended, then the task
    assert Run.objects.get().enqueued_at is not None


@pytest.fixture
def long_wait(one_slot: dict[str, Any], settings: Any) -> None:
    """A wait long enough that a request refused only after it would show."""
    settings.LLM_CONVERSATIONS = {**one_slot, "RUN_START_WAIT_SECONDS": 5}


def basic(username: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()


@pytest.mark.usefixtures("long_wait")
def test_a_wrong_password_is_refused_without_waiting_for_a_slot(
    conversation: Conversation, held: start_slots.Slot
) -> None:
    began = time.monotonic()
    response = APIClient().post(
        f"{base(conversation)}runs/",
        {"message": "Hello"},
        format="json",
        HTTP_AUTHORIZATION=basic("alice", "wrong"),
    )
    # Refused by authentication at once, not after RUN_START_WAIT_SECONDS as server_busy.
    assert time.monotonic() - began < 2
    assert response.status_code in (401, 403), response.content
    assert response.json()["error"]["code"] == "authentication_failed"
    assert slots.taken == 1
    assert not Run.objects.exists()


@pytest.mark.usefixtures("long_wait", "empty_cache")
def test_a_throttled_start_is_refused_without_waiting_for_a_slot(
    client: APIClient, conversation: Conversation, settings: Any
) -> None:
    settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "RUN_RATE": "1/min"}
    assert start(client, conversation, message="Hello").status_code == 201
    slot = slots.take()  # another request preparing its run
    try:
        began = time.monotonic()
        again = start(client, conversation, message="Again")
        assert time.monotonic() - began < 2
        assert (again.status_code, again.json()["error"]["code"]) == (429, "throttled")
        assert slots.taken == 1
    finally:
        slot.close()
    assert Run.objects.count() == 1


@requires_postgresql
def test_a_start_waiting_for_a_slot_gives_its_pooled_connection_back(
    transactional_db: None, settings: Any
) -> None:
    settings.LLM_CONVERSATIONS = {
        **API_SETTINGS,
        "RUN_START_CONCURRENCY": 1,
        "RUN_START_WAIT_SECONDS": 30,
    }
    user = User.objects.create_user("pooled", password="pooled-pw")
    conversation = create_conversation(owner=user)
    outcome: list[int] = []
    pools: list[Any] = []

    def request() -> None:
        # This thread's connections come from a pool of their own (as under DJANGO_DB_POOL).
        pooled = connections.create_connection(DEFAULT_DB_ALIAS)
        pooled.settings_dict = {
            **pooled.settings_dict,
            "CONN_MAX_AGE": 0,
            "OPTIONS": {**pooled.settings_dict["OPTIONS"], "pool": {"min_size": 0, "max_size": 2}},
        }
        connections[DEFAULT_DB_ALIAS] = pooled
        pools.append(pooled.pool)
        try:
            response = APIClient().post(
                f"{base(conversation)}runs/",
                {"message": "Hello"},
                format="json",
                HTTP_AUTHORIZATION=basic("pooled", "pooled-pw"),
            )
            outcome.append(response.status_code)
        finally:
            pooled.close()
            pooled.close_pool()

    slot = slots.take()
    thread = threading.Thread(target=request)
    try:
        thread.start()
        # Authenticated (a query on a pooled connection), then waiting for the slot.
        deadline = time.monotonic() + 10
        while not pools or pools[0].get_stats().get("requests_num", 0) < 1:
            assert time.monotonic() < deadline, "the request never authenticated"
            time.sleep(0.01)
        time.sleep(0.2)
        stats = pools[0].get_stats()
        assert outcome == []  # still waiting
        assert stats["pool_size"] - stats["pool_available"] == 0, stats
    finally:
        slot.close()
        thread.join(30)
    assert outcome == [201]


def test_a_full_line_refuses_at_once_and_the_one_in_line_is_admitted(settings: Any) -> None:
    settings.LLM_CONVERSATIONS = {
        "RUN_START_CONCURRENCY": 1,
        "RUN_START_QUEUE": 1,
        "RUN_START_WAIT_SECONDS": 5,
    }
    gate = StartSlots()
    first = gate.take()
    admitted: list[start_slots.Slot] = []
    waiter = threading.Thread(target=lambda: admitted.append(gate.take()))
    waiter.start()
    deadline = time.monotonic() + 5
    while gate.waiting < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert gate.waiting == 1
    began = time.monotonic()
    with pytest.raises(ServerBusy) as refused:
        gate.take()  # the line is full: refused without waiting
    assert time.monotonic() - began < 1
    assert "wait in line" in str(refused.value)
    first.close()
    waiter.join(5)
    assert len(admitted) == 1
    assert gate.waiting == 0
    admitted[0].release()
    assert gate.taken == 0
