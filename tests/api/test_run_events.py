"""Background starts, the run list, a run's log as events (replay, resume, follow), retry."""

from __future__ import annotations

import importlib
import importlib.util
import json
import threading
import time
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.db import connection
from django.test import AsyncClient
from rest_framework.test import APIClient

from llm_conversations.conversations import create_conversation
from llm_conversations.core.completions import CompletionResponse
from llm_conversations.models import Conversation, Message, Run, RunEvent, RunEventType
from llm_conversations.providers import CompletionRequest, EchoProvider
from llm_conversations.runs import ToolLoopService
from llm_conversations.runs.log import followers
from llm_conversations.runs.service import enqueue_run
from tests.api.conftest import API_SETTINGS, calls_text, parse_sse_ids

# django.tasks on Django 6.x, the django_tasks backport on 5.2.
TASKS_MODULE = "django.tasks" if importlib.util.find_spec("django.tasks") else "django_tasks"
DUMMY = f"{TASKS_MODULE}.backends.dummy.DummyBackend"


def enqueued() -> list[Any]:
    backend: Any = importlib.import_module(TASKS_MODULE).task_backends["default"]
    return list(backend.results)


pytestmark = pytest.mark.django_db

TWO_CALLS = calls_text(("a", "get_weather", {"city": "Oslo"}), ("b", "get_time", {}))


class FailsOnce(EchoProvider):
    """Fails its first call of the test, then echoes."""

    backend = "fails_once"
    failed = False

    def send(self, request: CompletionRequest) -> CompletionResponse:
        if not FailsOnce.failed:
            FailsOnce.failed = True
            raise RuntimeError("boom")
        return super().send(request)


@pytest.fixture(autouse=True)
def flaky_provider(settings: Any) -> None:
    FailsOnce.failed = False
    providers = {
        **API_SETTINGS["PROVIDERS"],
        "flaky": {"BACKEND": "tests.api.test_run_events.FailsOnce", "MODEL": "f"},
    }
    settings.LLM_CONVERSATIONS = {**API_SETTINGS, "PROVIDERS": providers}


def runs_url(conversation: Conversation) -> str:
    return f"/api/conversations/{conversation.pk}/runs/"


def events_url(run: Run | str) -> str:
    run = run if isinstance(run, Run) else Run.objects.get(pk=run)
    return f"/api/conversations/{run.conversation_id}/runs/{run.pk}/events/"


def logged(run: Run) -> list[tuple[int, str]]:
    return list(RunEvent.objects.filter(run=run).order_by("id").values_list("id", "type"))


def comparable(events: list[tuple[int | None, str, Any]]) -> list[Any]:
    """Events without the run's snapshot (the run as it stood when each was sent), but the last."""
    kept = [(i, n, {k: v for k, v in d.items() if k != "run"}) for i, n, d in events[:-1]]
    return kept + events[-1:]


def replay(client: APIClient, run: Run, **headers: Any) -> list[tuple[int | None, str, Any]]:
    response = client.get(events_url(run), **headers)
    assert response.status_code == 200
    assert response["Content-Type"] == "text/event-stream"
    return parse_sse_ids(b"".join(response.streaming_content))


# Background starts -----------------------------------------------------------


def test_a_background_start_answers_202_and_a_worker_completes_it(
    client: APIClient, conversation: Conversation, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = client.post(
            runs_url(conversation), {"message": TWO_CALLS, "background": True}, format="json"
        )
    assert response.status_code == 202
    assert response.json()["status"] == "queued"
    assert any(getattr(c, "func", None) is enqueue_run for c in callbacks)
    run = Run.objects.get()
    assert run.status == "completed"  # the immediate task backend ran it at commit


def test_background_runs_setting_is_the_default(
    client: APIClient, conversation: Conversation, settings: Any
) -> None:
    settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "BACKGROUND_RUNS": True}
    settings.TASKS = {"default": {"BACKEND": DUMMY}}
    response = client.post(runs_url(conversation), {"message": "hi"}, format="json")
    assert response.status_code == 202
    response = client.post(
        runs_url(create_conversation(owner=conversation.owner)),
        {"message": "hi", "background": False},
        format="json",
    )
    assert (response.status_code, response.json()["status"]) == (201, "completed")


def test_with_a_dummy_backend_the_run_stays_queued_and_one_task_is_enqueued(
    client: APIClient,
    conversation: Conversation,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    settings.TASKS = {"default": {"BACKEND": DUMMY}}
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            runs_url(conversation), {"message": "hi", "background": True}, format="json"
        )
    assert response.status_code == 202
    run = Run.objects.get()
    assert run.status == "queued"
    assert [r.args for r in enqueued()] == [[str(run.pk)]]


def test_a_streamed_start_names_its_run_before_any_event(
    client: APIClient, conversation: Conversation, settings: Any
) -> None:
    # No worker takes the run: its log stays empty, yet the client learns
    # which run to reattach to from the headers.
    settings.TASKS = {"default": {"BACKEND": DUMMY}}
    settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "SSE_HEARTBEAT_SECONDS": 0.05}
    response = client.post(
        runs_url(conversation), {"message": "hi", "background": True, "stream": True}, format="json"
    )
    assert response.status_code == 200
    run = Run.objects.get()
    assert response["X-Run-Id"] == str(run.pk)
    assert run.status == "queued"
    assert next(iter(response.streaming_content)) == b": keep-alive\n\n"
    events_url = f"{runs_url(conversation)}{run.pk}/events/"
    assert client.get(events_url)["X-Run-Id"] == str(run.pk)


def test_a_streamed_background_start_answers_the_runs_log(
    client: APIClient, conversation: Conversation, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            runs_url(conversation),
            {"message": TWO_CALLS, "background": True, "stream": True},
            format="json",
        )
    assert response.status_code == 200
    events = parse_sse_ids(b"".join(response.streaming_content))
    run = Run.objects.get()
    assert [(i, n) for i, n, _ in events] == logged(run)
    assert events[-1][1] == "run.completed"


# The run list ----------------------------------------------------------------


def test_runs_are_listed_newest_first_by_cursor(
    client: APIClient, conversation: Conversation
) -> None:
    service = ToolLoopService()
    made = [service.send(conversation, f"hi {n}").pk for n in range(5)]
    seen: list[str] = []
    url: str | None = runs_url(conversation) + "?limit=2"
    while url:
        response = client.get(url)
        assert response.status_code == 200
        body = response.json()
        seen += [run["id"] for run in body["results"]]
        url = body["next"]
    assert seen == [str(pk) for pk in reversed(made)]
    assert client.get(runs_url(conversation) + "?limit=0").status_code == 400
    assert client.get(runs_url(conversation) + "?cursor=nonsense").status_code == 404


@pytest.mark.parametrize("limit", [1, 50])
def test_a_page_of_runs_takes_two_queries(
    client: APIClient, conversation: Conversation, django_assert_num_queries: Any, limit: int
) -> None:
    service = ToolLoopService()
    for n in range(6):
        service.send(conversation, f"hi {n}")
    with django_assert_num_queries(2):
        response = client.get(runs_url(conversation) + f"?limit={limit}")
    assert len(response.json()["results"]) == min(limit, 6)


# A run's log as events ---------------------------------------------------------


def test_a_finished_run_is_replayed_completely_with_its_log_ids(
    client: APIClient, conversation: Conversation
) -> None:
    run = ToolLoopService().send(conversation, TWO_CALLS)
    events = replay(client, run)
    assert [(i, n) for i, n, _ in events] == logged(run)
    assert all(data["run_id"] == str(run.pk) for _, _, data in events)
    stored = [data["message"] for _, name, data in events if name.endswith(".stored")]
    expected = Message.objects.filter(run=run).exclude(role="user").order_by("position")
    assert [m["id"] for m in stored] == [str(pk) for pk in expected.values_list("pk", flat=True)]
    assert events[-1][2]["run"]["status"] == "completed"
    assert events[0][2]["attempt"] == 1


def test_the_foreground_stream_is_the_replay(client: APIClient, conversation: Conversation) -> None:
    response = client.post(
        runs_url(conversation), {"message": TWO_CALLS, "stream": True}, format="json"
    )
    live = parse_sse_ids(b"".join(response.streaming_content))
    run = Run.objects.get()
    assert [(i, n) for i, n, _ in live] == logged(run)
    assert comparable(live) == comparable(replay(client, run))


@pytest.mark.parametrize("how", ["header", "query"])
def test_a_reader_resumes_after_the_last_event_it_saw(
    client: APIClient, conversation: Conversation, how: str
) -> None:
    run = ToolLoopService().send(conversation, TWO_CALLS)
    everything = replay(client, run)
    middle = everything[3][0]
    if how == "header":
        rest = replay(client, run, HTTP_LAST_EVENT_ID=str(middle))
    else:
        response = client.get(events_url(run) + f"?after={middle}")
        rest = parse_sse_ids(b"".join(response.streaming_content))
    assert rest == everything[4:]
    # After the last event of a finished run: nothing more, the stream ends.
    assert client.get(events_url(run), HTTP_LAST_EVENT_ID=str(everything[-1][0])).getvalue() == b""


def test_a_resume_point_of_another_run_or_the_future_is_a_400(
    client: APIClient, conversation: Conversation
) -> None:
    first = ToolLoopService().send(conversation, "hi")
    second = ToolLoopService().send(conversation, "again")
    others = list(RunEvent.objects.filter(run=first).values_list("pk", flat=True))
    future = RunEvent.objects.order_by("-pk").values_list("pk", flat=True).first() + 1000
    for after in (others[1], future):
        response = client.get(events_url(second), HTTP_LAST_EVENT_ID=str(after))
        error = response.json()["error"]
        assert (response.status_code, error["code"], error["field"]) == (
            400,
            "unknown_event",
            "Last-Event-ID",
        )
        response = client.get(events_url(second) + f"?after={after}")
        assert (response.status_code, response.json()["error"]["field"]) == (400, "after")


@pytest.mark.parametrize("bad", ["x", "-1", "1.5", "9" * 40])
def test_a_malformed_resume_point_is_a_400(
    client: APIClient, conversation: Conversation, bad: str
) -> None:
    run = ToolLoopService().send(conversation, "hi")
    response = client.get(events_url(run), HTTP_LAST_EVENT_ID=bad)
    assert (response.status_code, response.json()["error"]["field"]) == (400, "Last-Event-ID")
    response = client.get(events_url(run) + f"?after={bad}")
    assert (response.status_code, response.json()["error"]["field"]) == (400, "after")


def test_a_run_waiting_for_approval_ends_its_stream_at_requires_action(
    client: APIClient, conversation: Conversation
) -> None:
    run = ToolLoopService().send(conversation, calls_text(("d", "delete_file", {"path": "/"})))
    assert run.status == "requires_action"
    events = replay(client, run)
    assert [n for _, n, _ in events] == ["run.running", "message.stored", "run.requires_action"]
    assert events[-1][2]["run"]["waiting_calls"][0]["id"] == "d"
    # Resumed after it, the stream ends at once: nothing more comes until someone acts.
    assert client.get(events_url(run), HTTP_LAST_EVENT_ID=str(events[-1][0])).getvalue() == b""


def test_another_users_run_does_not_exist(conversation: Conversation, other_user: User) -> None:
    run = ToolLoopService().send(conversation, "hi")
    other = APIClient()
    other.force_authenticate(other_user)
    assert other.get(events_url(run)).status_code == 404


@pytest.mark.parametrize("calls", [1, 8])
def test_a_replay_reads_a_pages_messages_in_one_query(
    client: APIClient,
    conversation: Conversation,
    django_assert_num_queries: Any,
    calls: int,
) -> None:
    text = calls_text(*[(f"c{n}", "get_time", {}) for n in range(calls)])
    run = ToolLoopService().send(conversation, text)
    # Conversation, run; then the page: events, run, messages.
    with django_assert_num_queries(5):
        events = replay(client, run)
    assert sum(1 for _, n, _ in events if n == "tool_result.stored") == calls


def test_a_waiting_reader_gets_keep_alive_comments(
    client: APIClient, conversation: Conversation, settings: Any
) -> None:
    settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "SSE_HEARTBEAT_SECONDS": 0.3}
    run = ToolLoopService().start(conversation, "hi")  # queued; nobody executes it
    response = client.get(events_url(run))
    iterator = iter(response.streaming_content)
    began = time.monotonic()
    assert next(iterator) == b": keep-alive\n\n"
    assert 0.25 <= time.monotonic() - began < 3
    response.close()


def test_keep_alive_comments_cost_no_query(
    client: APIClient,
    conversation: Conversation,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    django_assert_num_queries: Any,
) -> None:
    # Only the heartbeat is due while the test waits: the poll is far away.
    monkeypatch.setattr(followers, "POLL_SECONDS", 60.0)
    settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "SSE_HEARTBEAT_SECONDS": 0.1}
    run = ToolLoopService().start(conversation, "hi")  # queued; nobody executes it
    response = client.get(events_url(run))
    iterator = iter(response.streaming_content)
    assert next(iterator) == b": keep-alive\n\n"  # after the stream's first read
    with django_assert_num_queries(0):
        assert [next(iterator) for _ in range(3)] == [b": keep-alive\n\n"] * 3
    response.close()


def test_event_names_are_the_logs_types() -> None:
    assert [name for name in RunEventType if name.ends_stream] == [
        "run.requires_action",
        "run.completed",
        "run.failed",
        "run.cancelled",
    ]


# Following a run executed elsewhere ----------------------------------------------


# In-memory SQLite shares one cache between threads, with table locks that fail
# at once ("database table is locked") instead of waiting: a reader polling
# while another thread writes needs a real database.
needs_concurrent_reads = pytest.mark.skipif(
    connection.vendor == "sqlite" and connection.is_in_memory_db(),
    reason="in-memory SQLite locks tables across threads",
)


def execute_later(run_id: Any, delay: float = 0.3) -> threading.Thread:
    def work() -> None:
        from django.db import connections

        try:
            time.sleep(delay)
            ToolLoopService().execute(run_id)
        finally:
            connections.close_all()

    thread = threading.Thread(target=work)
    thread.start()
    return thread


@needs_concurrent_reads
@pytest.mark.django_db(transaction=True)
def test_a_wsgi_reader_follows_a_run_executed_in_another_thread() -> None:
    user = User.objects.create_user("erin")
    run = ToolLoopService().start(create_conversation(owner=user), TWO_CALLS)
    client = APIClient()
    client.force_authenticate(user)
    response = client.get(events_url(run))
    thread = execute_later(run.pk)
    events = parse_sse_ids(b"".join(response.streaming_content))
    thread.join()
    run.refresh_from_db()
    assert run.status == "completed"
    assert [(i, n) for i, n, _ in events] == logged(run)
    assert comparable(events) == comparable(replay(client, run))


@needs_concurrent_reads
@pytest.mark.django_db(transaction=True)
def test_an_asgi_reader_follows_a_run_executed_in_another_thread() -> None:
    user = User.objects.create_user("frank")
    run = ToolLoopService().start(create_conversation(owner=user), TWO_CALLS)

    async def read() -> tuple[bool, bytes]:
        client = AsyncClient()
        await client.aforce_login(user)
        response = await client.get(events_url_of(run))
        thread = execute_later(run.pk)
        chunks = [chunk async for chunk in response.streaming_content]
        thread.join()
        return response.is_async, b"".join(chunks)

    is_async, body = async_to_sync(read)()
    assert is_async  # an async iterator: no thread is held while it waits
    events = parse_sse_ids(body)
    assert [(i, n) for i, n, _ in events] == logged(run)
    assert events[-1][1] == "run.completed"


def events_url_of(run: Run) -> str:
    return f"/api/conversations/{run.conversation_id}/runs/{run.pk}/events/"


@pytest.mark.django_db(transaction=True)
def test_a_client_that_drops_a_foreground_stream_reattaches_and_gets_exactly_the_rest() -> None:
    user = User.objects.create_user("gina")
    conversation = create_conversation(owner=user)
    client = APIClient()
    client.force_authenticate(user)
    response = client.post(
        runs_url(conversation), {"message": TWO_CALLS, "stream": True}, format="json"
    )
    iterator = iter(response.streaming_content)
    first = parse_sse_ids(next(iterator) + next(iterator))
    response.close()  # dropped: the run is finished without streaming
    rest = replay(client, Run.objects.get(), HTTP_LAST_EVENT_ID=str(first[-1][0]))
    everything = replay(client, Run.objects.get())
    assert comparable(first + rest) == comparable(everything)
    assert everything[-1][1] == "run.completed"


def test_the_reader_waits_by_polling_without_postgresql() -> None:
    assert followers.POLL_SECONDS == 0.2


# Retry --------------------------------------------------------------------------


def test_retry_runs_a_failed_run_again(client: APIClient, conversation: Conversation) -> None:
    failed = client.post(
        runs_url(conversation), {"message": "hi", "provider": "flaky"}, format="json"
    )
    assert failed.status_code == 500
    run_id = failed.json()["error"]["details"]["run"]["id"]
    url = f"{runs_url(conversation)}{run_id}/retry/"
    response = client.post(url, {}, format="json")
    assert response.status_code == 200
    # A retry counts its attempts afresh.
    assert (response.json()["status"], Run.objects.get().attempts) == ("completed", 1)
    response = client.post(url, {}, format="json")
    assert (response.status_code, response.json()["error"]["code"]) == (409, "run_not_failed")


def test_a_background_retry_answers_202(
    client: APIClient, conversation: Conversation, django_capture_on_commit_callbacks: Any
) -> None:
    failed = client.post(
        runs_url(conversation), {"message": "hi", "provider": "flaky"}, format="json"
    )
    run_id = failed.json()["error"]["details"]["run"]["id"]
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            f"{runs_url(conversation)}{run_id}/retry/", {"background": True}, format="json"
        )
    assert (response.status_code, response.json()["status"]) == (202, "queued")
    assert Run.objects.get().status == "completed"


def test_retry_while_another_run_is_active_is_busy(
    client: APIClient, conversation: Conversation
) -> None:
    failed = client.post(
        runs_url(conversation), {"message": "hi", "provider": "flaky"}, format="json"
    )
    run_id = failed.json()["error"]["details"]["run"]["id"]
    ToolLoopService().start(conversation, "again")  # queued: active
    response = client.post(f"{runs_url(conversation)}{run_id}/retry/", {}, format="json")
    assert (response.status_code, response.json()["error"]["code"]) == (409, "conversation_busy")


def test_the_streams_data_lines_are_json_objects(
    client: APIClient, conversation: Conversation
) -> None:
    run = ToolLoopService().send(conversation, TWO_CALLS)
    body = client.get(events_url(run)).getvalue().decode()
    for block in body.split("\n\n")[:-1]:
        data = block.split("\n")[2].removeprefix("data: ")
        assert isinstance(json.loads(data), dict)
