"""The OpenAPI schema: valid, and true to the API (schemathesis, in-process WSGI)."""

from __future__ import annotations

import base64
import itertools
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
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from llm_conversations.messages import ChatMessage, ToolCall
from llm_conversations.models import Run
from llm_conversations.services import ToolLoopService, create_conversation
from tests.api.conftest import calls_text


def test_schema_validates_without_warnings(tmp_path: Any) -> None:
    call_command(
        "spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml")
    )
    text = (tmp_path / "schema.yaml").read_text()
    assert "text/event-stream" in text
    assert "/api/conversations/{conversation_pk}/runs/{run_pk}/submit_tool_outputs/" in text


schema = schemathesis.openapi.from_wsgi("/api/schema/", get_wsgi_application())

CHECKS = [
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
    content_type_conformance,
]


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
    return {"idle": str(idle.pk), "busy": str(busy.pk), "run": str(run.pk)}


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

AUTH = "Basic " + base64.b64encode(b"alice:alice-pw").decode()


@schema.parametrize()
@settings(
    max_examples=15,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_api_conforms_to_its_schema(
    case: Any, api_data: dict[str, str], in_process_requests: None
) -> None:
    # Mostly real ids, so requests reach the code behind the 404s; every
    # fifth case keeps the generated ids.
    params = case.path_parameters
    if params and next(_cases) % 5:
        if "run_pk" in params:
            params.update(conversation_pk=api_data["busy"], run_pk=api_data["run"])
        else:
            params[next(iter(params))] = api_data["idle"]
    case.call_and_validate(headers={"Authorization": AUTH}, checks=CHECKS)
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
