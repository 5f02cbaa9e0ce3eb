"""Messages: cursor-paged history and appends in the OpenAI message shape."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from llm_conversations.api.representations import message_data, message_row
from llm_conversations.api.serializers import MessageSerializer
from llm_conversations.conversations import append_completion, create_conversation, load_messages
from llm_conversations.conversations.feedback import rate_message
from llm_conversations.conversations.lifecycle import hide_message
from llm_conversations.core.completions import CompletionResponse, Usage
from llm_conversations.core.messages import ChatMessage, Reasoning, ReasoningKind, Role, ToolCall
from llm_conversations.models import Conversation, Message, Run, RunStatus
from tests.api.conftest import calls_text

pytestmark = pytest.mark.django_db


def url(conversation: Conversation) -> str:
    return f"/api/conversations/{conversation.pk}/messages/"


@pytest.fixture
def history(user: User) -> Conversation:
    conversation = create_conversation(
        owner=user,
        messages=[
            ChatMessage.system("Be brief."),
            ChatMessage.user("Weather in Paris?"),
        ],
    )
    append_completion(
        conversation,
        CompletionResponse(
            "",
            (ToolCall("c1", "get_weather", {"city": "Paris"}), ToolCall("c2", "get_time")),
            usage=Usage(10, 5),
            model="gpt-test",
            provider="openai",
        ),
        cost=Decimal("0.000075"),
    )
    from llm_conversations.conversations import append_messages

    append_messages(
        conversation,
        [
            ChatMessage.tool_result("c1", '{"temperature": 18}'),
            ChatMessage.tool_result("c2", "clock unavailable", is_error=True),
            ChatMessage.assistant("18 degrees."),
        ],
    )
    return conversation


def test_representation_is_the_openai_form_plus_stored_fields(
    client: APIClient, history: Conversation
) -> None:
    body = client.get(url(history), {"order": "asc"}).json()
    data = body["data"]
    assert [m["position"] for m in data] == list(range(6))
    assert data[0] | {} == {
        "role": "system",
        "content": "Be brief.",
        "id": data[0]["id"],
        "position": 0,
        "is_error": False,
        "run": None,
        "created_at": data[0]["created_at"],
        "model": None,
        "finish_reason": None,
        "usage": None,
        "parsed": None,
        "cost": None,
        "feedback": None,
        "reasoning": None,
        "compacted_by": None,
        "hidden_at": None,
        "hidden_reason": "",
    }
    call_turn = data[2]
    assert call_turn["content"] is None
    assert call_turn["tool_calls"] == [
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
        },
        {"id": "c2", "type": "function", "function": {"name": "get_time", "arguments": "{}"}},
    ]
    assert (call_turn["model"], call_turn["finish_reason"]) == ("gpt-test", "stop")
    assert call_turn["usage"] == {
        "input_tokens": 10,
        "output_tokens": 5,
        "total_tokens": 15,
        "cached_tokens": None,
        "cache_write_tokens": None,
        "reasoning_tokens": None,
    }
    assert call_turn["cost"] == "0.0000750000"
    assert (data[4]["tool_call_id"], data[4]["is_error"]) == ("c2", True)
    assert "tool_call_id" not in data[5]
    assert "tool_calls" not in data[5]
    # An assistant turn that no provider answered has no model or usage.
    assert (data[5]["model"], data[5]["usage"], data[5]["finish_reason"]) == (None, None, None)
    assert data[5]["cost"] is None
    # The wire fields read back into the same message.
    stored = load_messages(history)
    wire = [
        {k: m[k] for k in ("role", "content", "tool_calls", "tool_call_id") if k in m} for m in data
    ]
    assert [ChatMessage.from_dict(w) for w in wire[:4]] == stored[:4]


@pytest.mark.parametrize("show", [False, True])
def test_reasoning_text_is_shown_by_the_setting_and_opaque_data_never(
    client: APIClient, user: User, settings: Any, show: bool
) -> None:
    settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "SHOW_REASONING": show}
    conversation = create_conversation(owner=user, messages=[ChatMessage.user("q")])
    reasoning = (
        Reasoning("anthropic", ReasoningKind.THINKING, "Weigh it.", "SIGNATURE-SECRET"),
        Reasoning("anthropic", ReasoningKind.REDACTED, data="REDACTED-SECRET"),
        # A compacted state is not reasoning: only marked, never shown.
        Reasoning("anthropic", ReasoningKind.COMPACTION, "COMPACTED-SECRET"),
    )
    append_completion(conversation, CompletionResponse("a", reasoning=reasoning))
    response = client.get(url(conversation), {"order": "asc"})
    assert "SECRET" not in response.content.decode()
    user_turn, turn = response.json()["data"]
    assert turn["reasoning"] == ([{"kind": "thinking", "text": "Weigh it."}] if show else None)
    assert (user_turn["compacted_by"], turn["compacted_by"]) == (None, "anthropic")
    stored = Message.objects.get(conversation=conversation, position=1)
    assert stored.to_chat_message().reasoning == reasoning


def test_cursor_pages_forwards_and_backwards(client: APIClient, history: Conversation) -> None:
    first = client.get(url(history), {"order": "asc", "limit": 4}).json()
    assert [m["position"] for m in first["data"]] == [0, 1, 2, 3]
    assert first["has_more"] is True
    assert (first["first_id"], first["last_id"]) == (first["data"][0]["id"], first["data"][3]["id"])
    second = client.get(
        url(history), {"order": "asc", "limit": 4, "after": first["last_id"]}
    ).json()
    assert [m["position"] for m in second["data"]] == [4, 5]
    assert second["has_more"] is False
    newest = client.get(url(history), {"limit": 2}).json()  # default order: desc
    assert [m["position"] for m in newest["data"]] == [5, 4]
    older = client.get(url(history), {"limit": 2, "after": newest["last_id"]}).json()
    assert [m["position"] for m in older["data"]] == [3, 2]
    last = client.get(url(history), {"order": "asc", "after": second["last_id"]}).json()
    assert last == {"data": [], "first_id": None, "last_id": None, "has_more": False}


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 101}, "limit"),
        ({"limit": "x"}, "limit"),
        ({"order": "up"}, "order"),
        ({"after": "not-a-uuid"}, "after"),
        ({"after": "00000000-0000-0000-0000-000000000000"}, "after"),
    ],
)
def test_bad_list_parameters_are_400(
    client: APIClient, history: Conversation, params: dict[str, Any], field: str
) -> None:
    response = client.get(url(history), params)
    assert response.status_code == 400
    assert (response.json()["error"]["code"], response.json()["error"]["field"]) == (
        "invalid",
        field,
    )


def test_a_cursor_from_another_conversation_is_refused(
    client: APIClient, history: Conversation, user: User
) -> None:
    other = create_conversation(owner=user, messages=[ChatMessage.user("x")])
    foreign = Message.objects.get(conversation=other).pk
    response = client.get(url(history), {"after": str(foreign)})
    assert response.json()["error"]["field"] == "after"


@pytest.mark.parametrize("limit", [5, 100])
def test_list_query_count_is_constant_in_page_size(
    client: APIClient, user: User, limit: int
) -> None:
    messages = []
    for index in range(60):
        messages += [
            ChatMessage.user(f"q{index}"),
            ChatMessage.assistant_tool_calls([ToolCall(f"c{index}", "get_time")]),
            ChatMessage.tool_result(f"c{index}", "09:00"),
        ]
    conversation = create_conversation(owner=user, messages=messages[:150])
    after = str(Message.objects.get(conversation=conversation, position=10).pk)
    with CaptureQueriesContext(connection) as queries:
        first = client.get(url(conversation), {"limit": limit, "order": "asc"}).json()
    with CaptureQueriesContext(connection) as cursor_queries:
        client.get(url(conversation), {"limit": limit, "order": "asc", "after": after}).json()
    assert len(first["data"]) == limit
    # The conversation (owner check) and one page of rows, its cursor looked up in it.
    assert len(queries) == 2
    assert len(cursor_queries) == 2


def test_every_read_path_represents_a_message_alike(
    client: APIClient, user: User, history: Conversation
) -> None:
    """The page's prepared statement, the search's ORM query and a model instance
    (an append's answer, a stream's message) give each message the same JSON."""
    answer = Message.objects.get(conversation=history, position=5)
    rate_message(answer, user, 1, "Good.")
    hide_message(history, Message.objects.get(conversation=history, position=0), "noise")
    page = client.get(url(history), {"order": "asc", "limit": 100}).json()["data"]
    searched = client.get(url(history), {"order": "asc", "search": "degrees"}).json()["data"]
    instances = Message.objects.filter(conversation=history).order_by("position")
    built = json.loads(json.dumps([message_data(message_row(m)) for m in instances]))
    for entry in built:
        entry["feedback"] = page[entry["position"]]["feedback"]
    assert page == built
    assert searched == [page[5]]
    assert page[5]["feedback"] == {"rating": 1, "comment": "Good."}
    assert page[0]["hidden_reason"] == "noise"
    assert page[0]["hidden_at"].endswith("Z")
    assert page[2]["cost"] == "0.0000750000"
    assert page[2]["usage"]["input_tokens"] == 10


def test_post_one_message_object(client: APIClient, history: Conversation) -> None:
    response = client.post(
        url(history), {"role": "user", "content": "And tomorrow?"}, format="json"
    )
    assert response.status_code == 201
    body = response.json()
    assert [m["position"] for m in body["data"]] == [6]
    assert body["first_id"] == body["last_id"] == body["data"][0]["id"]
    assert load_messages(history)[-1] == ChatMessage.user("And tomorrow?")


def test_post_a_list_with_arguments_as_text_or_object(
    client: APIClient, conversation: Conversation
) -> None:
    turns = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "a",
                    "type": "function",
                    "function": {"name": "get_time", "arguments": "{}"},
                },
                {
                    "id": "b",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": {"city": "Oslo"}},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "09:00"},
        {"role": "tool", "tool_call_id": "b", "content": "rain", "is_error": True},
    ]
    response = client.post(url(conversation), turns, format="json")
    assert response.status_code == 201
    data = response.json()["data"]
    assert [m["position"] for m in data] == [1, 2, 3]
    assert data[0]["tool_calls"][1]["function"]["arguments"] == '{"city":"Oslo"}'
    assert data[2]["is_error"] is True
    stored = load_messages(conversation)
    assert stored[1].tool_calls[1].arguments == {"city": "Oslo"}  # type: ignore[index]


@pytest.mark.parametrize(
    ("payload", "code", "field"),
    [
        ({"role": "user", "content": ""}, "missing_content", "content"),
        ({"role": "wizard", "content": "x"}, "invalid_role", "role"),
        ({"role": "user", "content": "x", "name": "bob"}, "unknown_field", "name"),
        ({"role": "tool", "content": "x"}, "missing_tool_call_id", "tool_call_id"),
        (
            {"role": "tool", "content": "x", "tool_call_id": "nope"},
            "unexpected_tool_result",
            "tool_call_id",
        ),
        (
            {
                "role": "assistant",
                "tool_calls": [{"id": "a", "type": "function", "function": {"name": ""}}],
            },
            "invalid_tool_name",
            "tool_calls[0].function.name",
        ),
        (
            [
                {"role": "user", "content": "ok"},
                {"role": "user", "content": "x", "tool_call_id": "a"},
            ],
            "tool_call_id_not_allowed",
            "messages[1].tool_call_id",
        ),
        (
            [
                {"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f"}}]},
                {"role": "user", "content": "too early"},
            ],
            "unanswered_tool_calls",
            "messages[1]",
        ),
        ({"role": "user", "content": "x" * 1001}, "too_large", "content"),
        (
            [{"role": "user", "content": "ok"}, {"role": "user", "content": "x" * 1001}],
            "too_large",
            "messages[1].content",
        ),
        ([{"role": "user", "content": "x"}] * 6, "too_many_messages", None),
        ({"role": "user", "content": "nul\x00"}, "invalid_text", "content"),
        ([], "invalid", None),
        ("text", "invalid", None),
        (
            {"role": "tool", "content": "x", "tool_call_id": "i" * 256},
            "invalid_tool_call_id",
            "tool_call_id",
        ),
    ],
)
def test_post_errors_carry_code_and_field_and_store_nothing(
    client: APIClient, conversation: Conversation, payload: Any, code: str, field: str | None
) -> None:
    response = client.post(url(conversation), payload, format="json")
    assert response.status_code == 400, response.json()
    error = response.json()["error"]
    assert (error["code"], error["field"]) == (code, field)
    assert Message.objects.filter(conversation=conversation).count() == 1


def test_post_is_refused_while_a_run_is_active(
    client: APIClient, conversation: Conversation
) -> None:
    Run.objects.create(conversation=conversation, status=RunStatus.RUNNING)
    response = client.post(url(conversation), {"role": "user", "content": "x"}, format="json")
    assert (response.status_code, response.json()["error"]["code"]) == (409, "conversation_busy")
    assert Message.objects.filter(conversation=conversation).count() == 1


def test_message_json_is_valid_json_text(client: APIClient, history: Conversation) -> None:
    for message in client.get(url(history)).json()["data"]:
        for call in message.get("tool_calls", []):
            assert isinstance(json.loads(call["function"]["arguments"]), dict)


def test_a_body_over_djangos_upload_limit_is_413_too_large(
    client: APIClient, conversation: Conversation, settings: Any
) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    response = client.post(
        url(conversation), {"role": "user", "content": "x" * 20_000}, format="json"
    )
    assert (response.status_code, response.json()["error"]["code"]) == (413, "too_large")


def test_post_during_an_active_run_is_409_and_stores_nothing(
    client: APIClient, conversation: Conversation
) -> None:
    # A real paused run: the store, not the view, refuses the append.
    started = client.post(
        f"/api/conversations/{conversation.pk}/runs/",
        {"message": calls_text(("d", "delete_file", {"path": "/"}))},
        format="json",
    ).json()
    assert started["status"] == "requires_action"
    stored = Message.objects.filter(conversation=conversation).count()
    for body in (
        {"role": "user", "content": "x"},
        [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}],
        {"role": "tool", "tool_call_id": "d", "content": "done"},
    ):
        response = client.post(url(conversation), body, format="json")
        assert response.status_code == 409, response.json()
        assert response.json()["error"]["code"] == "conversation_busy"
    assert Message.objects.filter(conversation=conversation).count() == stored
    conversation.refresh_from_db()
    assert conversation.message_count == stored


def test_serializer_fields_equal_the_fast_path_keys_for_every_role(user: User) -> None:
    conversation = create_conversation(
        owner=user,
        messages=[
            ChatMessage.system("Be brief."),
            ChatMessage.user("Time?"),
            ChatMessage.assistant_tool_calls([ToolCall("c1", "get_time")]),
            ChatMessage.tool_result("c1", "09:00"),
            ChatMessage.assistant("09:00."),
        ],
    )
    append_completion(
        conversation, CompletionResponse("Noted.", usage=Usage(3, 2), model="m", provider="echo")
    )
    declared = MessageSerializer().fields
    always = {name for name, field in declared.items() if field.required}
    seen: set[str] = set()
    rows = Message.objects.filter(conversation=conversation).order_by("position")
    assert {row.role for row in rows} == set(Role)
    for row in rows:
        keys = set(message_data(message_row(row)))
        # Every key is declared, and every field the schema calls required is there.
        assert keys <= set(declared), (row.role, keys - set(declared))
        assert always <= keys, (row.role, always - keys)
        assert MessageSerializer(row).data.keys() == keys
        seen |= keys
    # The optional fields (tool_calls, tool_call_id) are each produced by some role.
    assert seen == set(declared)
