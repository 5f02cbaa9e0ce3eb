"""The Idempotency-Key header of POST messages/, POST runs/ and chat/, and pruning."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework.test import APIClient

from llm_conversations.conversations import create_conversation
from llm_conversations.conversations.retention import prune
from llm_conversations.models import Conversation, IdempotencyKey, Message, Run, RunEvent
from llm_conversations.runs import ToolLoopService
from tests.api.conftest import calls_text, parse_sse_ids
from tests.conftest import requires_postgresql, run_together

pytestmark = pytest.mark.django_db


def messages_url(conversation: Conversation) -> str:
    return f"/api/conversations/{conversation.pk}/messages/"


def runs_url(conversation: Conversation) -> str:
    return f"/api/conversations/{conversation.pk}/runs/"


def post(client: APIClient, url: str, body: Any, key: str = "k-1") -> Any:
    return client.post(url, body, format="json", HTTP_IDEMPOTENCY_KEY=key)


def test_a_repeated_message_post_replays_the_first_answer(
    client: APIClient, conversation: Conversation
) -> None:
    body = {"role": "user", "content": "again?"}
    first = post(client, messages_url(conversation), body)
    second = post(client, messages_url(conversation), body)
    assert first.status_code == second.status_code == 201
    assert first.json() == second.json()
    assert Message.objects.filter(content="again?").count() == 1


def test_a_repeated_run_start_replays_the_run(
    client: APIClient, conversation: Conversation
) -> None:
    first = post(client, runs_url(conversation), {"message": "hi"})
    second = post(client, runs_url(conversation), {"message": "hi"})
    assert (first.status_code, second.status_code) == (201, 201)
    assert first.json() == second.json()
    assert Run.objects.count() == 1


def test_a_retry_without_the_trailing_slash_is_the_same_request(
    client: APIClient, conversation: Conversation
) -> None:
    first = post(client, runs_url(conversation), {"message": "hi"})
    second = post(client, runs_url(conversation).removesuffix("/"), {"message": "hi"})
    assert (first.status_code, second.status_code) == (201, 201)
    assert first.json() == second.json()
    assert Run.objects.count() == 1


def test_the_same_key_with_another_body_is_422(
    client: APIClient, conversation: Conversation
) -> None:
    post(client, runs_url(conversation), {"message": "hi"})
    response = post(client, runs_url(conversation), {"message": "other"})
    assert (response.status_code, response.json()["error"]["code"]) == (
        422,
        "idempotency_key_reused",
    )
    # Another path is another request too.
    response = post(client, messages_url(conversation), {"role": "user", "content": "x"})
    assert response.status_code == 422


def test_keys_are_per_user(client: APIClient, conversation: Conversation, other_user: User) -> None:
    post(client, runs_url(conversation), {"message": "hi"})
    other = APIClient()
    other.force_authenticate(other_user)
    mine = create_conversation(owner=other_user)
    assert post(other, runs_url(mine), {"message": "hi"}).status_code == 201
    assert Run.objects.count() == 2


def test_a_refused_request_releases_its_key(client: APIClient, conversation: Conversation) -> None:
    body = {"role": "assistant", "content": "", "tool_calls": []}
    assert post(client, messages_url(conversation), body).status_code == 400
    assert not IdempotencyKey.objects.exists()


def test_a_failed_run_is_replayed_not_run_again(
    client: APIClient, conversation: Conversation
) -> None:
    first = post(client, runs_url(conversation), {"message": "hi", "provider": "broken"})
    second = post(client, runs_url(conversation), {"message": "hi", "provider": "broken"})
    assert first.status_code == second.status_code == 502
    assert first.json() == second.json()
    assert Run.objects.count() == 1


def test_a_streamed_start_is_replayed_as_the_runs_log(
    client: APIClient, conversation: Conversation
) -> None:
    body = {"message": "hi", "stream": True}
    first = parse_sse_ids(b"".join(post(client, runs_url(conversation), body).streaming_content))
    again = post(client, runs_url(conversation), body)
    assert again.status_code == 200
    replayed = parse_sse_ids(b"".join(again.streaming_content))
    assert [(i, n) for i, n, _ in replayed] == [(i, n) for i, n, _ in first]
    assert Run.objects.count() == 1


def chat_url(conversation: Conversation) -> str:
    return f"/api/conversations/{conversation.pk}/chat/"


def chat_body(*parts: dict[str, Any], role: str = "user") -> dict[str, Any]:
    message = {"id": "m", "role": role, "parts": list(parts)}
    return {"id": "c", "messages": [message], "trigger": "submit-message", "messageId": None}


def test_a_repeated_chat_post_replays_its_run_as_ui_message_chunks(
    client: APIClient, conversation: Conversation
) -> None:
    body = chat_body({"type": "text", "text": "once"})
    first = post(client, chat_url(conversation), body)
    first_text = b"".join(first.streaming_content)
    again = post(client, chat_url(conversation), body)
    assert again.status_code == 200
    assert again["x-vercel-ai-ui-message-stream"] == "v1"
    replayed = b"".join(again.streaming_content)
    assert replayed.endswith(b"data: [DONE]\n\n")
    assert b'"type":"finish"' in replayed.replace(b" ", b"")
    assert Run.objects.count() == 1
    assert Message.objects.filter(content="once").count() == 2  # the turn and its echo
    assert replayed.count(b"data: ") == first_text.count(b"data: ")
    other = post(client, chat_url(conversation), chat_body({"type": "text", "text": "other"}))
    assert (other.status_code, other.json()["error"]["code"]) == (422, "idempotency_key_reused")


def test_a_repeated_chat_decision_replays_instead_of_refusing(
    client: APIClient, conversation: Conversation
) -> None:
    paused = ToolLoopService().send(conversation, calls_text(("d", "delete_file", {"path": "x"})))
    assert paused.status == "requires_action"
    decision = chat_body(
        {
            "type": "tool-delete_file",
            "toolCallId": "d",
            "state": "approval-responded",
            "input": {"path": "x"},
            "approval": {"id": "d", "approved": True},
        },
        role="assistant",
    )
    first = post(client, chat_url(conversation), decision, key="decide-1")
    b"".join(first.streaming_content)
    again = post(client, chat_url(conversation), decision, key="decide-1")
    assert again.status_code == 200
    b"".join(again.streaming_content)
    assert Run.objects.get().status == "completed"
    assert Message.objects.filter(role="tool").count() == 1


def test_an_expired_key_is_forgotten(
    client: APIClient, conversation: Conversation, settings: Any
) -> None:
    post(client, messages_url(conversation), {"role": "user", "content": "a"})
    IdempotencyKey.objects.update(created_at=timezone.now() - timedelta(days=2))
    response = post(client, messages_url(conversation), {"role": "user", "content": "b"})
    assert response.status_code == 201
    assert Message.objects.filter(content__in=["a", "b"]).count() == 2


@pytest.mark.parametrize("key", ["", "x" * 256, "caf\u00e9"])
def test_a_malformed_key_is_a_400(client: APIClient, conversation: Conversation, key: str) -> None:
    response = client.post(
        messages_url(conversation),
        {"role": "user", "content": "a"},
        format="json",
        headers={"Idempotency-Key": key},
    )
    assert (response.status_code, response.json()["error"]["field"]) == (400, "Idempotency-Key")


def test_a_key_being_answered_is_409(
    client: APIClient, conversation: Conversation, user: User
) -> None:
    body = {"role": "user", "content": "a"}
    post(client, messages_url(conversation), body)
    IdempotencyKey.objects.update(status=None, response=None)  # as if still being answered
    response = post(client, messages_url(conversation), body)
    assert (response.status_code, response.json()["error"]["code"]) == (
        409,
        "idempotency_key_in_use",
    )


@requires_postgresql
@pytest.mark.django_db(transaction=True)
def test_concurrent_duplicates_store_once() -> None:
    user = User.objects.create_user("hana")
    conversation = create_conversation(owner=user)

    def send(_: int) -> int:
        client = APIClient()
        client.force_authenticate(user)
        response = post(client, messages_url(conversation), {"role": "user", "content": "once"})
        return int(response.status_code)

    statuses = run_together(4, send)
    assert set(statuses) <= {201, 409}
    assert 201 in statuses
    assert Message.objects.filter(content="once").count() == 1


def test_prune_deletes_expired_keys_and_old_events_of_finished_runs(
    client: APIClient, conversation: Conversation
) -> None:
    post(client, messages_url(conversation), {"role": "user", "content": "a"})
    run = ToolLoopService().send(conversation, "hi")
    active = ToolLoopService().start(create_conversation(owner=conversation.owner), "hi")
    RunEvent.objects.create(run=active, type="run.running", data={})
    later = timezone.now() + timedelta(days=8)
    pruned = prune(later)
    assert (pruned.idempotency_keys, pruned.events) == (
        1,
        RunEvent.objects.count() + pruned.events - 1,
    )
    assert not RunEvent.objects.filter(run=run).exists()
    assert RunEvent.objects.filter(run=active).count() == 1
    assert not IdempotencyKey.objects.exists()
