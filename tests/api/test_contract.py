"""The contract: strict input types, any JSON in metadata, strict query values,
and every limit the server enforces stated in the schema."""

from __future__ import annotations

from typing import Any

import pytest
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from llm_conversations.models import Conversation
from llm_conversations.runs import ToolLoopService
from tests.api.conftest import API_SETTINGS, calls_text

pytestmark = pytest.mark.django_db

URL = "/api/conversations/"


def error(response: Any) -> tuple[int, str, str | None]:
    body = response.json()["error"]
    return response.status_code, body["code"], body["field"]


def test_metadata_takes_any_json_value_null_included(client: APIClient) -> None:
    metadata = {"none": None, "list": [None, True, 1.5], "obj": {"x": None}}
    response = client.post(URL, {"title": "t", "metadata": metadata}, format="json")
    assert response.status_code == 201
    assert response.json()["metadata"] == metadata
    assert Conversation.objects.get().metadata == metadata


@pytest.mark.parametrize(
    ("url", "body", "field"),
    [
        (URL, {"title": 0}, "title"),
        (URL, {"title": ["x"]}, "title"),
        ("runs", {"message": "hi", "stream": "true"}, "stream"),
        ("runs", {"message": "hi", "stream": 1}, "stream"),
        ("runs", {"message": "hi", "max_iterations": "3"}, "max_iterations"),
        ("runs", {"message": "hi", "max_iterations": 2.5}, "max_iterations"),
        ("runs", {"message": "hi", "max_iterations": True}, "max_iterations"),
        ("runs", {"message": "hi", "provider": 1}, "provider"),
        ("runs", {"message": "hi", "tools": ["get_time", 3]}, "tools"),
        ("runs", {"message": "hi", "tools": "get_time"}, "tools"),
        ("runs", {"message": 5}, "message"),
    ],
)
def test_a_value_of_the_wrong_type_is_400_never_coerced(
    client: APIClient, conversation: Conversation, url: str, body: dict[str, Any], field: str
) -> None:
    target = f"/api/conversations/{conversation.pk}/runs/" if url == "runs" else url
    assert error(client.post(target, body, format="json")) == (400, "invalid", field)


def test_tool_outputs_are_strictly_typed(client: APIClient, conversation: Conversation) -> None:
    # A real run waiting for approval, so validation is reached.
    service = ToolLoopService()
    run = service.execute(
        service.start(conversation, calls_text(("d", "delete_file", {"path": "/"})))
    )
    url = f"/api/conversations/{conversation.pk}/runs/{run.pk}/"
    body = {"tool_outputs": [{"tool_call_id": 7, "output": "x"}]}
    assert error(client.post(url + "submit_tool_outputs/", body, format="json")) == (
        400,
        "invalid",
        "tool_outputs[0].tool_call_id",
    )
    body2 = {"tool_call_ids": ["d"], "stream": "no"}
    assert error(client.post(url + "approve/", body2, format="json")) == (400, "invalid", "stream")


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("page_size=null", "page_size"),
        ("page_size=", "page_size"),
        ("page_size=0", "page_size"),
        ("page_size=101", "page_size"),
        ("page=abc", "page"),
        ("page=", "page"),
        ("ordering=", "ordering"),
        ("ordering=password", "ordering"),
        ("ordering=title,-nope", "ordering"),
    ],
)
def test_bad_conversation_list_query_values_are_400(
    client: APIClient, query: str, field: str
) -> None:
    assert error(client.get(f"{URL}?{query}")) == (400, "invalid", field)


def test_good_conversation_list_query_values_still_work(client: APIClient) -> None:
    response = client.get(f"{URL}?page=1&page_size=100&ordering=-title,created_at&search=")
    assert response.status_code == 200


@pytest.mark.parametrize(
    ("query", "field"),
    [("order=", "order"), ("limit=", "limit"), ("limit=null", "limit"), ("after=", "after")],
)
def test_bad_message_list_query_values_are_400(
    client: APIClient, conversation: Conversation, query: str, field: str
) -> None:
    url = f"/api/conversations/{conversation.pk}/messages/?{query}"
    assert error(client.get(url)) == (400, "invalid", field)


def find(schema: dict[str, Any], path: str, method: str) -> dict[str, Any]:
    operation: dict[str, Any] = schema["paths"][path][method]
    return operation


def resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """``node``, or the component its ``$ref`` names."""
    ref = node.get("$ref")
    if ref is None:
        return node
    found: dict[str, Any] = schema["components"]["schemas"][ref.rsplit("/", 1)[-1]]
    return found


def test_the_schema_states_the_limits_of_the_current_settings(settings: Any) -> None:
    settings.LLM_CONVERSATIONS = {
        **API_SETTINGS,
        "MAX_MESSAGE_CHARS": 1234,
        "MAX_MESSAGES_PER_REQUEST": 7,
        "MAX_METADATA_KEYS": 9,
        "MAX_ITERATIONS_LIMIT": 11,
    }
    schema = SchemaGenerator().get_schema(request=None, public=True)
    components = schema["components"]["schemas"]
    messages = components["MessagesInput"]["oneOf"]
    one = resolve(schema, messages[0])
    assert one["properties"]["content"]["oneOf"][0]["maxLength"] == 1234
    assert one["properties"]["tool_call_id"]["maxLength"] == 255
    assert (messages[1]["minItems"], messages[1]["maxItems"]) == (1, 7)
    assert resolve(schema, messages[1]["items"]) == one
    conversation = components["Conversation"]["properties"]
    assert conversation["title"]["maxLength"] == 200
    assert conversation["metadata"]["maxProperties"] == 9
    assert conversation["metadata"]["additionalProperties"] == {}
    run = components["RunCreate"]["properties"]
    assert run["message"]["oneOf"][0]["maxLength"] == 1234
    assert resolve(schema, run["message"]["oneOf"][1]) == one
    assert run["instructions"]["maxLength"] == 1234
    assert (run["max_iterations"]["minimum"], run["max_iterations"]["maximum"]) == (1, 11)
    output = components["ToolOutput"]["properties"]["output"]
    assert {"type": "string", "maxLength": 1234} in output["anyOf"]
    parameters = {
        p["name"]: p["schema"] for p in find(schema, "/api/conversations/", "get")["parameters"]
    }
    assert (parameters["page_size"]["minimum"], parameters["page_size"]["maximum"]) == (1, 100)
    assert "pattern" in parameters["ordering"]
