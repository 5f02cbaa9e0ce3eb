"""Shared fixtures: a tool conversation and a recording MockTransport."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from llm_conversations.core.messages import ChatMessage, ToolCall
from llm_conversations.core.tool_specs import ToolSpec
from llm_conversations.providers import Provider

API_KEY = "sk-test-SECRET-0123456789abcdef"

CONVERSATION = [
    ChatMessage.system("You are terse."),
    ChatMessage.user("Weather in Paris, and the time?"),
    ChatMessage.assistant_tool_calls(
        [
            ToolCall("call_1", "get_weather", {"city": "Paris"}),
            ToolCall("call_2", "get_time", {}),
        ],
        "Checking.",
    ),
    ChatMessage.tool_result("call_1", "18C, cloudy"),
    ChatMessage.tool_result("call_2", "clock unavailable", is_error=True),
    ChatMessage.user("Thanks. Anything else?"),
]

WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}
TOOLS = [
    ToolSpec("get_weather", "Current weather", WEATHER_SCHEMA),
    ToolSpec("get_time", "Current time"),
]


class Recorder:
    """A MockTransport handler that replays canned responses and keeps requests."""

    def __init__(self, *responses: httpx.Response | Exception) -> None:
        self.responses = list(responses)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        response = self.responses.pop(0)
        if isinstance(response, Exception):
            raise response
        return response

    @property
    def body(self) -> Any:
        return json.loads(self.requests[-1].content)


def sse(*events: tuple[str | None, Any]) -> httpx.Response:
    """A text/event-stream response; ``None`` as event name omits the field."""
    lines = []
    for name, data in events:
        if name:
            lines.append(f"event: {name}")
        lines.append(f"data: {data if isinstance(data, str) else json.dumps(data)}")
        lines.append("")
    return httpx.Response(
        200, content="\n".join(lines).encode(), headers={"content-type": "text/event-stream"}
    )


MakeProvider = Callable[..., tuple[Provider, list[float]]]


@pytest.fixture
def make_provider() -> MakeProvider:
    """Build ``cls`` over a MockTransport; returns the provider and its sleeps."""

    def make(cls: type[Provider], recorder: Recorder, **kwargs: Any) -> tuple[Provider, list]:
        sleeps: list[float] = []
        kwargs.setdefault("model", "test-model")
        kwargs.setdefault("api_key", API_KEY)
        provider = cls(
            http_client=httpx.Client(transport=httpx.MockTransport(recorder)),
            sleep=sleeps.append,
            **kwargs,
        )
        return provider, sleeps

    return make
