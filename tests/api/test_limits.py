"""Each size limit of the API is declared once, on its serializer field: a setting
changes what the server refuses and what the schema states alike."""

from __future__ import annotations

from typing import Any

import pytest
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from llm_conversations.api.serializers import (
    ConversationSerializer,
    MessagesInputSerializer,
    RunCreateSerializer,
    SubmitToolOutputsSerializer,
    declared_limit,
)
from llm_conversations.conf import conf
from llm_conversations.models import Conversation
from llm_conversations.runs import ToolLoopService
from tests.api.conftest import API_SETTINGS, calls_text

pytestmark = pytest.mark.django_db


def error(response: Any) -> tuple[int, str, str | None]:
    body = response.json()["error"]
    return response.status_code, body["code"], body["field"]


def component(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """``node``, or the component its ``$ref`` names."""
    ref = node.get("$ref")
    found: dict[str, Any] = (
        node if ref is None else schema["components"]["schemas"][ref.rsplit("/", 1)[-1]]
    )
    return found


@pytest.fixture(params=[(6, 2, 1), (11, 3, 2)], ids=["small", "larger"])
def limits(request: Any, settings: Any) -> tuple[int, int, int]:
    """``MAX_MESSAGE_CHARS``, ``MAX_MESSAGES_PER_REQUEST``, ``MAX_METADATA_KEYS``."""
    chars, messages, keys = request.param
    settings.LLM_CONVERSATIONS = {
        **API_SETTINGS,
        "MAX_MESSAGE_CHARS": chars,
        "MAX_MESSAGES_PER_REQUEST": messages,
        "MAX_METADATA_KEYS": keys,
    }
    return chars, messages, keys


def test_the_schema_states_each_limit_the_settings_give(limits: tuple[int, int, int]) -> None:
    chars, messages, keys = limits
    schema = SchemaGenerator().get_schema(request=None, public=True)
    components = schema["components"]["schemas"]
    body = components["MessagesInput"]["oneOf"]
    one = component(schema, body[0])
    assert one["properties"]["content"]["oneOf"][0]["maxLength"] == chars
    assert body[1]["maxItems"] == messages
    run = components["RunCreate"]["properties"]
    assert run["message"]["oneOf"][0]["maxLength"] == chars
    assert run["instructions"]["maxLength"] == chars
    output = components["ToolOutput"]["properties"]["output"]
    assert {"type": "string", "maxLength": chars} in output["anyOf"]
    assert components["Conversation"]["properties"]["metadata"]["maxProperties"] == keys


def test_the_fields_declare_the_limits_the_settings_give(limits: tuple[int, int, int]) -> None:
    chars, messages, keys = limits
    message = MessagesInputSerializer().fields["messages"]
    assert declared_limit(message) == messages
    assert declared_limit(message.child.fields["content"]) == chars
    run = RunCreateSerializer().fields
    assert declared_limit(run["message"].text) == chars
    assert declared_limit(run["instructions"]) == chars
    outputs = SubmitToolOutputsSerializer().fields["tool_outputs"]
    assert declared_limit(outputs.child.fields["output"]) == chars
    assert declared_limit(ConversationSerializer().fields["metadata"]) == keys
    assert (chars, messages, keys) == (
        conf.MAX_MESSAGE_CHARS,
        conf.MAX_MESSAGES_PER_REQUEST,
        conf.MAX_METADATA_KEYS,
    )


def test_message_text_is_refused_over_the_limit_and_kept_at_it(
    client: APIClient, conversation: Conversation, limits: tuple[int, int, int]
) -> None:
    chars = limits[0]
    messages = f"/api/conversations/{conversation.pk}/messages/"
    at_limit = client.post(messages, {"role": "user", "content": "x" * chars}, format="json")
    assert at_limit.status_code == 201
    over = client.post(messages, {"role": "user", "content": "x" * (chars + 1)}, format="json")
    assert error(over) == (400, "too_large", "content")
    assert str(chars) in over.json()["error"]["message"]
    # The validation messages by field, named as the body sent them too.
    assert over.json()["error"]["details"] == {"content": [over.json()["error"]["message"]]}
    parts = [{"type": "text", "text": "x" * chars}, {"type": "text", "text": "y"}]
    listed = client.post(messages, [{"role": "user", "content": parts}], format="json")
    assert error(listed) == (400, "too_large", "messages[0].content")


def test_run_text_is_refused_over_the_limit(
    client: APIClient, conversation: Conversation, limits: tuple[int, int, int]
) -> None:
    chars = limits[0]
    runs = f"/api/conversations/{conversation.pk}/runs/"
    over = "x" * (chars + 1)
    assert error(client.post(runs, {"message": over}, format="json")) == (
        400,
        "too_large",
        "message",
    )
    body = {"message": {"role": "user", "content": over}}
    assert error(client.post(runs, body, format="json")) == (400, "too_large", "message.content")
    body = {"message": "hi", "instructions": over}
    assert error(client.post(runs, body, format="json")) == (400, "too_large", "instructions")
    chat = {"messages": [{"role": "user", "parts": [{"type": "text", "text": over}]}]}
    response = client.post(f"/api/conversations/{conversation.pk}/chat/", chat, format="json")
    assert error(response) == (400, "too_large", "messages")


def test_a_tool_output_is_refused_over_the_limit(
    client: APIClient, conversation: Conversation, settings: Any, limits: tuple[int, int, int]
) -> None:
    chars = limits[0]
    # A run waiting for a client-side output, started while text of any size was allowed.
    settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "MAX_MESSAGE_CHARS": 1000}
    service = ToolLoopService()
    run = service.execute(
        service.start(conversation, calls_text(("p", "pick_color", {"prompt": "Pick"})))
    )
    settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "MAX_MESSAGE_CHARS": chars}
    url = f"/api/conversations/{conversation.pk}/runs/{run.pk}/submit_tool_outputs/"
    body = {"tool_outputs": [{"tool_call_id": "p", "output": "x" * (chars + 1)}]}
    assert error(client.post(url, body, format="json")) == (
        400,
        "too_large",
        "tool_outputs[0].output",
    )
    body = {"tool_outputs": [{"tool_call_id": "p", "output": "x" * chars}]}
    assert client.post(url, body, format="json").status_code == 200


def test_counts_are_refused_over_the_limit_and_kept_at_it(
    client: APIClient, conversation: Conversation, limits: tuple[int, int, int]
) -> None:
    _, messages, keys = limits
    url = f"/api/conversations/{conversation.pk}/messages/"
    turns = [{"role": "user", "content": "x"}] * (messages + 1)
    response = client.post(url, turns, format="json")
    assert error(response) == (400, "too_many_messages", None)
    assert f"at most {messages} messages" in response.json()["error"]["message"]
    assert client.post(url, turns[:messages], format="json").status_code == 201
    metadata = {f"k{n}": n for n in range(keys + 1)}
    response = client.post("/api/conversations/", {"metadata": metadata}, format="json")
    assert error(response) == (400, "too_many_metadata_keys", "metadata")
    kept = dict(list(metadata.items())[:keys])
    assert client.post("/api/conversations/", {"metadata": kept}, format="json").status_code == 201
