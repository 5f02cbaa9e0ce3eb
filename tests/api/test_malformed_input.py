"""Input the schema does not allow is refused with 400 and a code, storing nothing:
control characters in a tool name, a charset that is no text encoding, an
integer query parameter that is not written as an integer."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from llm_conversations.checks import check_mcp_servers
from llm_conversations.conversations import create_conversation
from llm_conversations.core.messages import ChatMessage, ToolCall
from llm_conversations.core.structured import ResponseFormat
from llm_conversations.core.tool_specs import ToolSpec
from llm_conversations.exceptions import InvalidMessage
from llm_conversations.models import Conversation, Message, Run
from llm_conversations.providers._wire import storable_call
from llm_conversations.runs import ToolLoopService
from tests.api.test_runs import runs_url

pytestmark = pytest.mark.django_db

CONTROL_NAMES = ["get_weather\n", "get\x07weather", "get\x7fweather", "get\x85weather"]


def stored() -> tuple[int, int]:
    return Message.objects.count(), Run.objects.count()


@pytest.mark.parametrize("name", CONTROL_NAMES)
def test_a_tool_call_naming_a_control_character_is_400_invalid_tool_name(
    client: APIClient, conversation: Conversation, name: str
) -> None:
    before = stored()
    call = {"id": "c9", "type": "function", "function": {"name": name, "arguments": "{}"}}
    response = client.post(
        f"/api/conversations/{conversation.pk}/messages/",
        {"role": "assistant", "content": None, "tool_calls": [call]},
        format="json",
    )
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid_tool_name"
    assert error["field"] == "tool_calls[0].function.name"
    assert stored() == before


@pytest.mark.parametrize("name", CONTROL_NAMES)
def test_a_tool_spec_name_holds_no_control_character_not_even_a_final_newline(
    name: str,
) -> None:
    # [A-Za-z0-9_-]{1,64} up to its very end ("$" also matched before a final newline).
    with pytest.raises(InvalidMessage) as refused:
        ToolSpec(name)
    assert refused.value.code == "invalid_tool_name"


def test_a_call_stored_before_the_rule_stays_readable(client: APIClient, user: Any) -> None:
    # The rule is the API's, on input: ToolCall itself still builds such a call, so rows
    # stored earlier load, and the conversation reads as before.
    call = ToolCall("c1", "get\x07weather", raw_arguments="not json")
    conversation = create_conversation(
        owner=user,
        messages=[
            ChatMessage.user("hi"),
            ChatMessage.assistant_tool_calls([call]),
            ChatMessage.tool_result("c1", "error", is_error=True),
        ],
    )
    response = client.get(f"/api/conversations/{conversation.pk}/messages/", {"order": "asc"})
    assert response.status_code == 200
    (stored,) = response.json()["data"][1]["tool_calls"]
    assert stored["function"]["name"] == "get\x07weather"


def test_a_models_call_naming_a_control_character_is_stored_as_an_unknown_tool() -> None:
    call, changed = storable_call("c1", "get_weather\n", "{}")
    assert (call.name, changed) == ("get_weather_", True)
    # Storable, and answered as a call of a tool that is not offered.
    assert ChatMessage.assistant_tool_calls([call]).tool_calls == (call,)


@pytest.mark.parametrize("charset", ["bogus", "base64", "utf-99"])
def test_a_charset_that_is_no_text_encoding_is_400_parse_error(
    client: APIClient, conversation: Conversation, charset: str
) -> None:
    before = stored()
    response = client.generic(
        "POST",
        runs_url(conversation),
        json.dumps({"message": "hi"}),
        content_type=f"application/json; charset={charset}",
    )
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "parse_error"
    assert repr(charset) in error["message"]
    assert stored() == before


def test_a_body_is_read_in_the_charset_it_names(
    client: APIClient, conversation: Conversation
) -> None:
    body = json.dumps({"role": "user", "content": "café"}, ensure_ascii=False)
    response = client.generic(
        "POST",
        f"/api/conversations/{conversation.pk}/messages/",
        body.encode("latin-1"),
        content_type="application/json; charset=latin-1",
    )
    assert response.status_code == 201, response.content
    assert Message.objects.order_by("-position").first().content == "café"  # type: ignore[union-attr]


@pytest.fixture
def run(conversation: Conversation) -> Run:
    service = ToolLoopService()
    return service.execute(service.start(conversation, "hi").pk)


@pytest.mark.parametrize("value", ["-1", "1.0", "+1", " 1", "1 ", "0x1", "\uff11"])
def test_an_events_resume_point_not_written_as_an_event_id_is_400(
    client: APIClient, conversation: Conversation, run: Run, value: str
) -> None:
    response = client.get(f"{runs_url(conversation)}{run.pk}/events/", {"after": value})
    assert response.status_code == 400, value
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("invalid", "after")


def test_a_bad_resume_point_beside_a_valid_last_event_id_is_400(
    client: APIClient, conversation: Conversation, run: Run
) -> None:
    first = run.events.order_by("id").first()
    assert first is not None
    url = f"{runs_url(conversation)}{run.pk}/events/"
    response = client.get(url, {"after": "-1"}, HTTP_LAST_EVENT_ID=str(first.pk))
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("invalid", "after")


@pytest.mark.parametrize(
    ("path", "parameter"),
    [
        ("/api/conversations/", "page"),
        ("/api/conversations/", "page_size"),
        ("/api/conversations/{pk}/messages/", "limit"),
        ("/api/conversations/{pk}/runs/", "limit"),
    ],
)
@pytest.mark.parametrize("value", ["1.0", "+1", " 1"])
def test_an_integer_query_parameter_not_written_as_an_integer_is_400(
    client: APIClient, conversation: Conversation, path: str, parameter: str, value: str
) -> None:
    response = client.get(path.format(pk=conversation.pk), {parameter: value})
    assert response.status_code == 400, (parameter, value, response.content)
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("invalid", parameter)


def test_integer_query_parameters_written_as_integers_are_read(
    client: APIClient, conversation: Conversation, run: Run
) -> None:
    response: Any = client.get(f"{runs_url(conversation)}{run.pk}/events/", {"after": "0"})
    assert response.status_code == 200
    assert client.get("/api/conversations/", {"page_size": "2"}).status_code == 200


def test_a_schema_title_with_a_final_newline_is_not_used_as_its_name() -> None:
    schema = {"type": "object", "properties": {}}
    assert ResponseFormat({**schema, "title": "Answer"}).name == "Answer"
    assert ResponseFormat({**schema, "title": "Answer\n"}).name == "response"


def test_an_mcp_server_name_with_a_final_newline_is_e030() -> None:
    with override_settings(LLM_CONVERSATIONS={"MCP_SERVERS": {"docs\n": {"COMMAND": "x"}}}):
        assert [error.id for error in check_mcp_servers()] == ["llm_conversations.E030"]


def test_a_page_past_the_last_is_not_found_however_large(
    client: APIClient, conversation: Conversation
) -> None:
    # Schema-valid (no maximum): refused as a page that does not exist, not as malformed.
    response = client.get("/api/conversations/", {"page": "23458780743149404697919488"})
    assert response.status_code == 404
