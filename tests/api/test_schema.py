"""The OpenAPI schema: valid, and true to the API (schemathesis, in-process WSGI).

The generated run takes 100 examples per operation, derandomized, so CI is
repeatable. ``SCHEMATHESIS_EXAMPLES`` runs it deeper and
``SCHEMATHESIS_SEED`` draws fresh, seeded examples instead of the fixed ones,
e.g. ``SCHEMATHESIS_EXAMPLES=1000 SCHEMATHESIS_SEED=7 pytest tests/api/test_schema.py``.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from django.test import override_settings
from drf_spectacular.settings import spectacular_settings
from hypothesis import HealthCheck, seed, settings
from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance

from llm_conversations.conversations import create_conversation
from llm_conversations.core.messages import ChatMessage, ToolCall
from llm_conversations.core.text import json_problem
from llm_conversations.models import Run
from llm_conversations.runs import ToolLoopService
from tests.api.conftest import calls_text


def test_schema_validates_without_warnings(tmp_path: Any) -> None:
    call_command(
        "spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml")
    )
    text = (tmp_path / "schema.yaml").read_text()
    assert "text/event-stream" in text
    assert "/api/conversations/{conversation_pk}/runs/{run_pk}/submit_tool_outputs/" in text
    assert "/api/conversations/{conversation_pk}/messages/{id}/feedback/" in text


schema = schemathesis.openapi.from_wsgi("/api/schema/", get_wsgi_application())
# Alice's credentials: schemathesis also sends wrong ones (ignored_auth).
schema.config.update(basic_auth=("alice", "alice-pw"))
# Text no database stores (NUL, lone surrogates) is refused as invalid_text, a
# rule JSON Schema does not state; tests/api/test_hostile.py covers it.
schema.config.generation.update(allow_x00=False, codec="utf-8")

# Operations whose schema-valid requests may still break a rule the schema
# cannot state: message pairing and roles, configured providers and tools,
# calls that are (not) waiting. There positive_data_acceptance is replaced by
# documented_rule_refusal: a 400 must carry a documented rule code.
RULE_BOUND = {
    "/api/conversations/{conversation_pk}/messages/": {"GET", "POST"},
    "/api/conversations/{conversation_pk}/runs/": {"POST"},
    # The message named must be one of the conversation's, of the right role and place.
    "/api/conversations/{conversation_pk}/fork/": {"POST"},
    "/api/conversations/{conversation_pk}/edit/": {"POST"},
    "/api/conversations/{conversation_pk}/regenerate/": {"POST"},
    # A share link's message must be one of the conversation's, outside a tool group,
    # and its expiry in the future.
    "/api/conversations/{conversation_pk}/shares/": {"POST"},
    "/api/conversations/{conversation_pk}/chat/": {"POST"},
    "/api/conversations/{conversation_pk}/runs/{run_pk}/approve/": {"POST"},
    "/api/conversations/{conversation_pk}/runs/{run_pk}/deny/": {"POST"},
    "/api/conversations/{conversation_pk}/runs/{run_pk}/submit_tool_outputs/": {"POST"},
    # An upload must be a file part whose bytes are an allowed, intact type.
    "/api/attachments/": {"POST"},
    # A resume point must be an event of this run (unknown_event).
    "/api/conversations/{conversation_pk}/runs/{run_pk}/events/": {"GET"},
    # A webhook URL must parse with a host (invalid_url), which a pattern cannot fully state.
    "/api/webhooks/": {"POST"},
    "/api/webhooks/{id}/": {"PUT", "PATCH"},
}
# Codes the services raise for rules, not shapes; "invalid" is a shape error
# the schema should have prevented.
RULE_CODES_EXCLUDED = {"invalid", "invalid_text", "invalid_number", "too_deep", "too_large"}


def _decoded(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _json_values(body: Any) -> Iterator[Any]:
    """``body``, and the JSON value of every tool call's ``arguments`` text in it."""
    yield body
    if isinstance(body, dict):
        arguments = body.get("arguments")
        if isinstance(arguments, str):
            decoded = _decoded(arguments)
            if decoded is not None:
                yield decoded
        for value in body.values():
            yield from _json_values(value)
    elif isinstance(body, list):
        for item in body:
            yield from _json_values(item)


def documented_rule_refusal(ctx: Any, response: Any, case: Any) -> bool | None:
    """A schema-valid request refused with 400 names a rule, not a shape error."""
    if (
        response.status_code != 400
        or case.meta is None
        or not case.meta.generation.mode.is_positive
    ):
        return None
    error = response.json()["error"]
    # A cursor must be a message of the conversation: a rule, reported as invalid.
    if (error["code"], error["field"]) == ("invalid", "after"):
        return True
    # JSON Schema cannot say "finite": a generated number beyond a float's range
    # decodes to infinity, which no database stores, and is refused as such,
    # in the body or in a JSON text it holds (a tool call's arguments).
    if error["code"] == "invalid_number" and any(
        json_problem(value) is not None for value in _json_values(case.body)
    ):
        return True
    assert error["code"] not in RULE_CODES_EXCLUDED, f"schema-valid data refused: {error}"
    return True


@pytest.fixture(autouse=True)
def api_settings(settings: Any) -> Any:
    # The suite's own settings, with which the schema above was loaded: its
    # limits are the server's.
    return settings.LLM_CONVERSATIONS


@pytest.fixture
def api_data(db: None) -> dict[str, str]:
    """Alice's data: an idle conversation with tool turns, another with a run waiting for approval."""
    user = User.objects.create_user("alice", password="alice-pw")
    idle = create_conversation(
        owner=user,
        title="Trip",
        messages=[
            ChatMessage.user("Weather?"),
            ChatMessage.assistant_tool_calls([ToolCall("c1", "get_weather", {"city": "Oslo"})]),
            ChatMessage.tool_result("c1", "rain"),
            ChatMessage.assistant("Rain."),
        ],
    )
    busy = create_conversation(owner=user, title="Busy")
    service = ToolLoopService()
    run = service.execute(
        service.start(
            busy,
            {"role": "user", "content": calls_text(("d", "delete_file", {"path": "/"}))},
        ).pk
    )
    assert run.status == "requires_action"
    answer = idle.messages.get(position=3)
    return {
        "idle": str(idle.pk),
        "busy": str(busy.pk),
        "run": str(run.pk),
        "answer": str(answer.pk),
    }


@pytest.fixture
def in_process_requests() -> Iterator[None]:
    # The WSGI handler would close the test's connection at the end of each
    # request, as Django's test client also prevents.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


_cases = itertools.count()


def size_or_negative_data_rejection(ctx: Any, response: Any, case: Any) -> bool | None:
    """Schemathesis's check that invalid data is refused, 413 and 411 counted as refusals.

    A body over ``MAX_REQUEST_BYTES`` is refused with 413 before it is read,
    whatever it holds (and a chunked one that cannot be read safely, 411).
    """
    if response.status_code in (411, 413):
        return None
    result: bool | None = negative_data_rejection(ctx, response, case)
    return result


# Depth and seed of the generated run (see the module's docstring).
EXAMPLES = int(os.environ.get("SCHEMATHESIS_EXAMPLES") or 100)
SEED = os.environ.get("SCHEMATHESIS_SEED")


def _seeded(test: Any) -> Any:
    return seed(int(SEED))(test) if SEED else test


@_seeded
@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not SEED,
    suppress_health_check=list(HealthCheck),
)
def test_api_conforms_to_its_schema(
    case: Any, api_data: dict[str, str], in_process_requests: None
) -> None:
    # Mostly real ids, so requests reach the code behind the 404s; every
    # fifth case keeps the generated ids, and so does every negative case
    # (its ids may be the part that violates the schema).
    params = case.path_parameters
    positive = case.meta is None or case.meta.generation.mode.is_positive
    if params and positive and next(_cases) % 5:
        if "run_pk" in params:
            params.update(conversation_pk=api_data["busy"], run_pk=api_data["run"])
        elif "id" in params:  # a message: the idle conversation's answer
            params.update(conversation_pk=api_data["idle"], id=api_data["answer"])
        else:
            params[next(iter(params))] = api_data["idle"]
    if case.method in RULE_BOUND.get(case.path, ()):
        case.call_and_validate(
            excluded_checks=[positive_data_acceptance, negative_data_rejection],
            additional_checks=[documented_rule_refusal, size_or_negative_data_rejection],
        )
    else:
        case.call_and_validate(
            excluded_checks=[negative_data_rejection],
            additional_checks=[size_or_negative_data_rejection],
        )
    assert not Run.objects.filter(status="running").exists()


def test_schema_validates_under_openapi_3_0_too(tmp_path: Any) -> None:
    # Sites may keep drf-spectacular's default, Open API 3.0.
    try:
        with override_settings(SPECTACULAR_SETTINGS={"OAS_VERSION": "3.0.3"}):
            spectacular_settings.reload()
            call_command(
                "spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "s.yaml")
            )
    finally:
        # Back to the suite's own settings for the next tests.
        spectacular_settings.reload()
    text = (tmp_path / "s.yaml").read_text()
    assert text.startswith("openapi: 3.0.3")
    assert "x-contentSchema" in text
