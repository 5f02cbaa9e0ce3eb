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


DANGLING = {
    "a pointer to nothing": schema_with(a={"$ref": "#/$defs/missing"}),
    "an anchor that is not there": schema_with(a={"$ref": "#nowhere"}),
    "a dynamic anchor that is not there": schema_with(a={"$dynamicRef": "#meta"}),
    "a pointer within a subschema's own $id": schema_with(
        a={"$id": "http://127.0.0.1:9/sub", "$ref": "#/x"}
    ),
    "draft 7 definitions": {
        "$schema": "http://json-schema.org/draft-07/schema#",
        **schema_with(a={"$ref": "#/definitions/zz"}),
    },
    "a schema that is its own reference": schema_with(a={"$ref": "#/properties/a"}),
    "two definitions that refer to each other": {
        **schema_with(a={"$ref": "#/$defs/x"}),
        "$defs": {"x": {"allOf": [{"$ref": "#/$defs/y"}]}, "y": {"$ref": "#/$defs/x"}},
    },
    "a chain of references too long to evaluate": {
        **schema_with(a={"$ref": "#/$defs/d0"}),
        "$defs": {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(200)}
        | {"d200": {"type": "string"}},
    },
}


@pytest.mark.parametrize("schema", DANGLING.values(), ids=DANGLING.keys())
def test_a_reference_that_cannot_be_followed_is_refused_at_run_start(
    schema: dict[str, Any],
) -> None:
    # jsonschema follows references only when an answer reaches them: unchecked,
    # these ended the run as a server error once the model had answered.
    with pytest.raises(ParameterError) as info:
        ResponseFormat(schema)
    assert (info.value.code, info.value.field) == ("invalid_response_format", "response_format")


RESOLVABLE = {
    "a recursive tree": {
        **schema_with(root={"$ref": "#/$defs/Node"}),
        "$defs": {
            "Node": schema_with(children={"type": "array", "items": {"$ref": "#/$defs/Node"}})
        },
    },
    "the root, for a part of the answer": schema_with(a={"$ref": "#"}),
    "an anchor": {**schema_with(a={"$ref": "#name"}), "$defs": {"n": {"$anchor": "name"}}},
    "escaped pointers": {
        **schema_with(x={"$ref": "#/$defs/a~1b"}, y={"$ref": "#/$defs/c~0d"}),
        "$defs": {"a/b": {"type": "string"}, "c~d": {"type": "string"}},
    },
    "a shared base in allOf": {
        **schema_with(),
        "allOf": [{"$ref": "#/$defs/B"}],
        "$defs": {"B": schema_with()},
    },
}


@pytest.mark.parametrize("schema", RESOLVABLE.values(), ids=RESOLVABLE.keys())
def test_references_that_resolve_are_kept(schema: dict[str, Any]) -> None:
    answer = {"root": {"children": [{"children": []}]}, "a": {}, "x": "1", "y": "2"}
    assert ResponseFormat(schema).judge(json.dumps(answer)).valid


def test_the_api_refuses_a_dangling_reference_and_stores_nothing(django_user_model: Any) -> None:
    user = django_user_model.objects.create_user("dangling")
    client = APIClient()
    client.force_authenticate(user)
    conversation = create_conversation(owner=user)
    response = client.post(
        f"/api/conversations/{conversation.pk}/runs/",
        {"message": "Weather?", "response_format": DANGLING["a pointer to nothing"]},
        format="json",
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("invalid_response_format", "response_format")
    assert "points at nothing" in error["message"]
    assert (Run.objects.count(), Message.objects.count()) == (0, 0)


def test_a_catastrophic_pattern_ends_the_check_by_its_deadline() -> None:
    started = time.monotonic()
    judgment = ResponseFormat(schema_with(a={"type": "string", "pattern": CATASTROPHIC})).judge(
        json.dumps({"a": HOSTILE_TEXT})
    )
    elapsed = time.monotonic() - started
    assert judgment.timed_out
    assert judgment.problem == f"the answer could not be checked within {VALIDATION_SECONDS:g} s."
    # Python's re took minutes on this text; the deadline bounds it (with room for a slow machine).
    assert elapsed < VALIDATION_SECONDS * 10


def test_pattern_properties_run_under_the_same_deadline() -> None:
    schema = {"type": "object", "patternProperties": {CATASTROPHIC: {"type": "string"}}}
    assert ResponseFormat(schema).judge(json.dumps({HOSTILE_TEXT: "x"})).timed_out


def test_a_schema_exponential_in_the_answers_depth_ends_by_its_deadline() -> None:
    # Each level tries both branches in full: 2**depth keyword checks before
    # the first error, half a minute at depth 18. The deadline holds at every keyword.
    branch = {"type": "array", "items": {"$ref": "#/$defs/n"}}
    schema = {
        **schema_with(a={"$ref": "#/$defs/n"}),
        "$defs": {"n": {"anyOf": [{**branch, "minItems": 99}, branch]}},
    }
    started = time.monotonic()
    judgment = ResponseFormat(schema).judge(json.dumps({"a": json.loads("[" * 30 + "]" * 30)}))
    assert judgment.timed_out
    assert time.monotonic() - started < VALIDATION_SECONDS * 10


def test_unique_items_of_many_objects_are_judged_in_one_pass() -> None:
    # jsonschema compares unhashable items pairwise: 3,000 objects took 18 s.
    judged = ResponseFormat(schema_with(a={"type": "array", "uniqueItems": True}))
    many = [{"k": i} for i in range(5_000)]
    # Pairwise, 5,000 objects take about a minute: far past the judge's own
    # deadline (VALIDATION_SECONDS), which would say timed_out.
    assert judged.judge(json.dumps({"a": many})).valid
    duplicated = judged.judge(json.dumps({"a": [*many, {"k": 7}]}))
    assert not duplicated.timed_out
    assert duplicated.problem == "at /a: has non-unique elements: item 5000 repeats an earlier one."


@pytest.mark.parametrize(
    "items",
    [
        [1, 1.0],
        [True, 1],
        [0, False],
        [None, 0],
        ["1", 1],
        [{"a": 1, "b": [1]}, {"b": [1.0], "a": 1}],
        [[1, 2], [2, 1]],
        [{"a": None}, {"a": False}],
    ],
)
def test_unique_items_agree_with_json_schemas_equality(items: list[Any]) -> None:
    schema = schema_with(a={"type": "array", "uniqueItems": True})
    expected = jsonschema.Draft202012Validator(schema).is_valid({"a": items})
    assert ResponseFormat(schema).judge(json.dumps({"a": items})).valid is expected


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
