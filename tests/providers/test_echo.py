import json

import pytest

from llm_conversations.core.completions import FinishReason, Usage
from llm_conversations.core.messages import ChatMessage, ToolCall
from llm_conversations.providers import (
    EchoProvider,
    InvalidRequestError,
    ResponseCompleted,
    TextDelta,
    ToolCallCompleted,
)

from .conftest import CONVERSATION


def test_repeats_the_last_user_message():
    response = EchoProvider().complete(
        [{"role": "system", "content": "s"}, {"role": "user", "content": "hello"}]
    )
    assert response.content == "hello"
    assert response.finish_reason is FinishReason.STOP
    assert response.usage == Usage(input_tokens=6, output_tokens=5)  # characters
    assert (response.provider, response.model) == ("echo", "echo")


def test_json_tool_calls_become_calls_with_generated_ids():
    text = json.dumps(
        {
            "content": "calling",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "add", "arguments": {"a": 1}},
                },
                {"function": {"name": "now", "arguments": "{}"}},
            ],
        }
    )
    response = EchoProvider().complete([ChatMessage.user(text)])
    first, second = response.tool_calls
    assert first == ToolCall("c1", "add", {"a": 1})
    assert (second.name, second.arguments) == ("now", {})
    assert second.id
    assert second.id != "c1"
    assert response.content == "calling"
    assert response.finish_reason is FinishReason.TOOL_CALLS


def test_invalid_tool_call_is_refused_like_a_bad_request():
    text = json.dumps({"tool_calls": [{"function": {"arguments": "{}"}}]})
    with pytest.raises(InvalidRequestError, match=r"tool_calls\[0\]"):
        EchoProvider().complete([ChatMessage.user(text)])


def test_after_tool_results_it_quotes_them():
    response = EchoProvider().complete(CONVERSATION[:5])
    assert response.content == (
        'Tool results: get_weather returned "18C, cloudy"; get_time failed "clock unavailable".'
    )
    assert response.tool_calls == ()


def test_stream_splits_text_and_ends_with_the_response():
    events = list(EchoProvider().stream([ChatMessage.user("a longer sentence to split")]))
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) == 3
    assert "".join(deltas) == "a longer sentence to split"
    assert isinstance(events[-1], ResponseCompleted)
    assert events[-1].response.content == "a longer sentence to split"


def test_stream_yields_calls():
    text = json.dumps({"tool_calls": [{"function": {"name": "now", "arguments": {}}}]})
    events = list(EchoProvider().stream([ChatMessage.user(text)]))
    calls = [e.tool_call for e in events if isinstance(e, ToolCallCompleted)]
    assert [c.name for c in calls] == ["now"]
    assert events[-1].response.tool_calls == tuple(calls)
