"""Schemas that try to make the server reach out or burn a core.

A run's ``response_format`` comes from a client: a remote ``$ref`` is refused
before anything is stored (and no reference is ever retrieved, so a real
server on 127.0.0.1 sees no request), and a catastrophic ``pattern`` ends the
run by its deadline instead of pinning a core. Tool argument schemas share
the same validator.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import jsonschema
import pytest
from rest_framework.test import APIClient

from llm_conversations.conversations import create_conversation
from llm_conversations.core.messages import ToolCall
from llm_conversations.core.structured import (
    VALIDATION_SECONDS,
    ResponseFormat,
    json_schema_validator,
)
from llm_conversations.exceptions import ParameterError, ToolArgumentsError
from llm_conversations.models import Message, Run
from llm_conversations.tools import tool
from tests.runs.test_loop_parameters import answers, rows, service
from tests.support.http_server import serving

pytestmark = pytest.mark.django_db

# Backtracks exponentially on Python's re and on the regex engine alike.
CATASTROPHIC = "^(a|a)*$"
HOSTILE_TEXT = "a" * 40 + "!"


def schema_with(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


@pytest.fixture
def watched_server() -> Iterator[tuple[str, list[str]]]:
    """A live HTTP server on 127.0.0.1 that records every request it gets."""
    seen: list[str] = []

    def handler(request: BaseHTTPRequestHandler) -> None:
        seen.append(request.path)
        body = json.dumps({"type": "integer"}).encode()
        request.send_response(200)
        request.send_header("content-length", str(len(body)))
        request.end_headers()
        request.wfile.write(body)

    with serving(handler) as server:
        yield server.root, seen


@pytest.mark.parametrize(
    "reference",
    [
        {"$ref": "{url}/schema.json"},
        {"$ref": "file:///etc/passwd"},
        {"$ref": "other.json#/x"},
        {"$dynamicRef": "{url}/dynamic"},
        {"$ref": 5},
    ],
)
def test_a_reference_outside_the_schema_is_refused(
    watched_server: Any, reference: dict[str, Any]
) -> None:
    url, seen = watched_server
    value = {
        key: v.replace("{url}", url) if isinstance(v, str) else v for key, v in reference.items()
    }
    with pytest.raises(ParameterError) as info:
        ResponseFormat(schema_with(city=value))
    assert (info.value.code, info.value.field) == ("remote_schema_reference", "response_format")
    with pytest.raises(jsonschema.SchemaError, match="only references to the schema's own"):
        json_schema_validator(schema_with(city=value))
    assert seen == []


def test_local_references_still_resolve_without_a_request(watched_server: Any) -> None:
    url, seen = watched_server
    schema = {
        "$id": f"{url}/root.json",
        "type": "object",
        "$defs": {"celsius": {"type": "number"}},
        "properties": {"celsius": {"$ref": "#/$defs/celsius"}},
    }
    judged = ResponseFormat(schema)
    assert judged.judge('{"celsius": 18}').value == {"celsius": 18}
    assert (
        judged.judge('{"celsius": "warm"}').problem
        == "at /celsius: 'warm' is not of type 'number'."
    )
    assert seen == []


def test_the_api_refuses_a_remote_reference_and_stores_nothing(
    watched_server: Any, django_user_model: Any
) -> None:
    url, seen = watched_server
    user = django_user_model.objects.create_user("ref")
    client = APIClient()
    client.force_authenticate(user)
    conversation = create_conversation(owner=user)
    response = client.post(
        f"/api/conversations/{conversation.pk}/runs/",
        {
            "message": "Weather?",
            "response_format": schema_with(city={"$ref": f"{url}/schema.json"}),
        },
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "remote_schema_reference"
    assert (Run.objects.count(), Message.objects.count(), seen) == (0, 0, [])


def test_a_catastrophic_pattern_ends_the_check_by_its_deadline() -> None:
    started = time.monotonic()
    verdict = ResponseFormat(schema_with(a={"type": "string", "pattern": CATASTROPHIC})).judge(
        json.dumps({"a": HOSTILE_TEXT})
    )
    elapsed = time.monotonic() - started
    assert verdict.timed_out
    assert verdict.problem == f"the answer could not be checked within {VALIDATION_SECONDS:g} s."
    # Python's re took minutes on this text; the deadline bounds it (with room for a slow machine).
    assert elapsed < VALIDATION_SECONDS * 10


def test_pattern_properties_run_under_the_same_deadline() -> None:
    schema = {"type": "object", "patternProperties": {CATASTROPHIC: {"type": "string"}}}
    assert ResponseFormat(schema).judge(json.dumps({HOSTILE_TEXT: "x"})).timed_out


def test_patterns_still_judge_answers_that_are_quick_to_check() -> None:
    judged = ResponseFormat(schema_with(code={"type": "string", "pattern": "^[A-Z]{3}$"}))
    assert judged.judge('{"code": "OSL"}').valid
    assert (
        judged.judge('{"code": "Oslo"}').problem == "at /code: 'Oslo' does not match '^[A-Z]{3}$'."
    )


def test_a_run_whose_answer_cannot_be_checked_in_time_fails_without_repair_rounds() -> None:
    bodies: list[dict[str, Any]] = []
    hostile = json.dumps({"a": HOSTILE_TEXT})
    loop = service(answers(hostile, hostile, hostile), bodies)
    run = loop.send(
        create_conversation(),
        "Echo it",
        response_format=schema_with(a={"type": "string", "pattern": CATASTROPHIC}),
    )
    assert (run.status, run.termination_reason) == ("failed", "invalid_output")
    assert "could not be checked within" in run.error_message
    assert len(bodies) == 1  # no repair round: another answer would fare no better
    assert [m.role for m in rows(run)] == ["user", "assistant"]


def test_tool_arguments_are_checked_under_the_deadline() -> None:
    @tool(schema=schema_with(name={"type": "string", "pattern": CATASTROPHIC}))
    def greet(name: str) -> str:
        """Greet someone."""
        return f"hello {name}"

    with pytest.raises(ToolArgumentsError, match="could not be checked within"):
        greet.validate_call(ToolCall("c1", "greet", {"name": HOSTILE_TEXT}))
