"""The Responses API adapter: request bytes, replies, streams, usage, finish reasons, errors."""

import json

import httpx
import pytest

from llm_conversations.core.completions import FinishReason, Usage
from llm_conversations.core.content_parts import FilePart, ImagePart, TextPart
from llm_conversations.core.messages import ChatMessage, Reasoning, ReasoningKind, ToolCall
from llm_conversations.exceptions import (
    InvalidRequestError,
    InvalidResponseError,
    ProviderUnavailableError,
    RateLimitError,
)
from llm_conversations.providers import (
    OpenAIProvider,
    OpenAIResponsesProvider,
    ReasoningDelta,
    ResponseCompleted,
    TextDelta,
    ToolCallCompleted,
)
from llm_conversations.providers.caching import prefix_key

from .conftest import API_KEY, CONVERSATION, TOOLS, WEATHER_SCHEMA, Recorder, sse

REASONING_ITEM = {
    "id": "rs_1",
    "type": "reasoning",
    "encrypted_content": "ENC-1==",
    "summary": [{"type": "summary_text", "text": "Need the weather."}],
}
USAGE = {
    "input_tokens": 120,
    "input_tokens_details": {"cached_tokens": 64},
    "output_tokens": 40,
    "output_tokens_details": {"reasoning_tokens": 32},
    "total_tokens": 160,
}


def response_body(*output: dict, status: str = "completed", reason: str | None = None) -> dict:
    return {
        "id": "resp_1",
        "object": "response",
        "model": "gpt-5-2025-08-07",
        "status": status,
        "incomplete_details": {"reason": reason} if reason else None,
        "output": list(output),
        "usage": USAGE,
    }


def message(text: str) -> dict:
    return {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def function_call(call_id: str = "call_9", arguments: str = '{"city":"Paris"}') -> dict:
    return {
        "type": "function_call",
        "id": "fc_1",
        "call_id": call_id,
        "name": "get_weather",
        "arguments": arguments,
        "status": "completed",
    }


def provider_for(make_provider, *responses, **kwargs):
    recorder = Recorder(*responses)
    kwargs.setdefault("model", "gpt-5")
    provider, _ = make_provider(OpenAIResponsesProvider, recorder, **kwargs)
    return provider, recorder


def test_exact_request(make_provider):
    provider, recorder = provider_for(
        make_provider, httpx.Response(200, json=response_body(message("No."))), temperature=0.2
    )
    provider.complete(CONVERSATION, tools=TOOLS)
    request = recorder.requests[0]
    assert str(request.url) == "https://api.openai.com/v1/responses"
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    assert recorder.body == {
        "model": "gpt-5",
        "prompt_cache_key": prefix_key(CONVERSATION),
        "instructions": "You are terse.",
        "input": [
            {"role": "user", "content": "Weather in Paris, and the time?"},
            {"role": "assistant", "content": "Checking."},
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": '{"city":"Paris"}',
            },
            {"type": "function_call", "call_id": "call_2", "name": "get_time", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "18C, cloudy"},
            {"type": "function_call_output", "call_id": "call_2", "output": "clock unavailable"},
            {"role": "user", "content": "Thanks. Anything else?"},
        ],
        "tools": [
            {
                "type": "function",
                "name": "get_weather",
                "description": "Current weather",
                "parameters": WEATHER_SCHEMA,
            },
            {
                "type": "function",
                "name": "get_time",
                "description": "Current time",
                "parameters": {"type": "object", "properties": {}},
            },
        ],
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "temperature": 0.2,
    }


def test_a_thinking_and_tools_round_trip_sends_the_reasoning_item_back_before_its_call(
    make_provider,
):
    first = response_body(REASONING_ITEM, function_call())
    provider, recorder = provider_for(
        make_provider,
        httpx.Response(200, json=first),
        httpx.Response(200, json=response_body(message("18C in Paris."))),
    )
    question = [ChatMessage.user("Weather in Paris?")]
    reply = provider.complete(question, tools=TOOLS[:1], parameters={"reasoning_effort": "low"})
    assert reply.finish_reason == FinishReason.TOOL_CALLS
    assert reply.reasoning == (
        Reasoning("openai_responses", ReasoningKind.SUMMARY, "Need the weather."),
        Reasoning(
            "openai_responses",
            ReasoningKind.ENCRYPTED,
            data=json.dumps(
                {"id": "rs_1", "encrypted_content": "ENC-1==", "summary": REASONING_ITEM["summary"]}
            ),
        ),
        # The id of the call item that followed the reasoning item, to send it back with it.
        Reasoning("openai_responses", ReasoningKind.SIGNATURE, data="fc_1", call_id="call_9"),
    )
    turn = reply.to_message()
    conversation = [*question, turn, ChatMessage.tool_result("call_9", "18C")]
    provider.complete(conversation, tools=TOOLS[:1], parameters={"reasoning_effort": "low"})
    first_body = json.loads(recorder.requests[0].content)
    assert first_body["reasoning"] == {"effort": "low"}
    assert first_body["store"] is False
    # The exact bytes of the second request: the reasoning item verbatim, then its call.
    second = recorder.requests[1].content
    expected_input = [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "type": "reasoning",
            "id": "rs_1",
            "encrypted_content": "ENC-1==",
            "summary": [{"type": "summary_text", "text": "Need the weather."}],
        },
        {
            "type": "function_call",
            "call_id": "call_9",
            "name": "get_weather",
            "arguments": '{"city":"Paris"}',
            "id": "fc_1",
        },
        {"type": "function_call_output", "call_id": "call_9", "output": "18C"},
    ]
    assert json.loads(second)["input"] == expected_input
    # The bytes themselves, key order included (what a prompt cache compares).
    expected = {
        "model": "gpt-5",
        "tools": first_body["tools"],
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": first_body["prompt_cache_key"],
        "reasoning": {"effort": "low"},
        "input": expected_input,  # last: the next round's bytes extend these
    }
    assert second == json.dumps(expected, ensure_ascii=False, separators=(",", ":")).encode()


def test_a_text_turn_after_reasoning_goes_back_as_its_output_message(make_provider):
    provider, recorder = provider_for(
        make_provider,
        httpx.Response(200, json=response_body(REASONING_ITEM, message("Sunny."))),
        httpx.Response(200, json=response_body(message("Yes."))),
    )
    reply = provider.complete([ChatMessage.user("Weather?")])
    provider.complete([ChatMessage.user("Weather?"), reply.to_message(), ChatMessage.user("Sure?")])
    assert recorder.body["input"][1:] == [
        REASONING_ITEM,
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Sunny.", "annotations": []}],
        },
        {"role": "user", "content": "Sure?"},
    ]


def test_item_ids_are_not_kept_without_reasoning(make_provider):
    provider, _ = provider_for(
        make_provider, httpx.Response(200, json=response_body(message("Hi."), function_call()))
    )
    assert provider.complete([ChatMessage.user("x")], tools=TOOLS[:1]).reasoning == ()


def test_reasoning_from_another_backend_is_never_sent(make_provider):
    provider, recorder = provider_for(
        make_provider, httpx.Response(200, json=response_body(message("ok")))
    )
    turn = ChatMessage.assistant_tool_calls(
        [ToolCall("call_1", "get_time", {})],
        reasoning=[
            Reasoning("anthropic", ReasoningKind.THINKING, "hidden", "sig"),
            Reasoning("openai", ReasoningKind.THINKING, "also hidden"),
            Reasoning("openai_responses", ReasoningKind.SUMMARY, "summary alone"),
        ],
    )
    provider.complete([ChatMessage.user("time?"), turn, ChatMessage.tool_result("call_1", "9")])
    assert [item.get("type", item.get("role")) for item in recorder.body["input"]] == [
        "user",
        "function_call",
        "function_call_output",
    ]
    assert "hidden" not in recorder.requests[0].content.decode()


def test_the_chat_completions_adapter_never_sends_responses_reasoning(make_provider):
    recorder = Recorder(
        httpx.Response(
            200,
            json={
                "model": "m",
                "choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}],
            },
        )
    )
    provider, _ = make_provider(OpenAIProvider, recorder, replay_reasoning_content=True)
    turn = ChatMessage.assistant_tool_calls(
        [ToolCall("call_1", "get_time", {})],
        reasoning=[Reasoning("openai_responses", ReasoningKind.ENCRYPTED, data='{"id": "rs"}')],
    )
    provider.complete([ChatMessage.user("t?"), turn, ChatMessage.tool_result("call_1", "9")])
    assert "rs" not in json.dumps(recorder.body["messages"][1])


def test_parameters_map_to_responses_fields(make_provider):
    provider, recorder = provider_for(
        make_provider, httpx.Response(200, json=response_body(message("{}")))
    )
    schema = {"title": "answer", "type": "object", "properties": {}, "additionalProperties": False}
    provider.complete(
        [ChatMessage.user("x")],
        tools=TOOLS,
        parameters={
            "max_output_tokens": 100,
            "top_p": 0.5,
            "tool_choice": {"name": "get_time"},
            "parallel_tool_calls": False,
            "response_format": schema,
        },
    )
    body = recorder.body
    assert body["max_output_tokens"] == 100
    assert body["top_p"] == 0.5
    assert body["tool_choice"] == {"type": "function", "name": "get_time"}
    assert body["parallel_tool_calls"] is False
    assert body["text"] == {
        "format": {"type": "json_schema", "name": "answer", "schema": schema, "strict": True}
    }


def test_a_runs_effort_keeps_the_entrys_other_reasoning_keys(make_provider):
    provider, recorder = provider_for(
        make_provider,
        httpx.Response(200, json=response_body(message("ok"))),
        reasoning={"effort": "high", "summary": "auto"},
    )
    provider.complete([ChatMessage.user("x")], parameters={"reasoning_effort": "minimal"})
    assert recorder.body["reasoning"] == {"effort": "minimal", "summary": "auto"}


def test_a_runs_tool_choice_replaces_the_entrys_whole(make_provider):
    entry_choice = {"type": "allowed_tools", "mode": "auto", "tools": []}
    provider, recorder = provider_for(
        make_provider,
        httpx.Response(200, json=response_body(message("ok"))),
        tool_choice=entry_choice,
    )
    provider.complete(
        [ChatMessage.user("x")], tools=TOOLS, parameters={"tool_choice": {"name": "get_time"}}
    )
    assert recorder.body["tool_choice"] == {"type": "function", "name": "get_time"}


@pytest.mark.parametrize("mode", ["auto", "none", "required"])
def test_tool_choice_modes_are_sent_as_words(make_provider, mode):
    provider, recorder = provider_for(
        make_provider, httpx.Response(200, json=response_body(message("ok")))
    )
    provider.complete([ChatMessage.user("x")], tools=TOOLS, parameters={"tool_choice": mode})
    assert recorder.body["tool_choice"] == mode


def test_stop_sequences_are_refused_before_sending(make_provider):
    provider, recorder = provider_for(make_provider)
    with pytest.raises(Exception, match="stop"):
        provider.complete([ChatMessage.user("x")], parameters={"stop": ["END"]})
    assert recorder.requests == []


def test_an_entry_may_keep_responses_stored_and_add_includes(make_provider):
    provider, recorder = provider_for(
        make_provider,
        httpx.Response(200, json=response_body(message("ok"))),
        store=True,
        include=["message.output_text.logprobs"],
    )
    provider.complete([ChatMessage.user("x")])
    assert recorder.body["store"] is True
    assert recorder.body["include"] == [
        "message.output_text.logprobs",
        "reasoning.encrypted_content",
    ]


def test_an_include_given_as_one_string_is_one_entry(make_provider):
    provider, recorder = provider_for(
        make_provider,
        httpx.Response(200, json=response_body(message("ok"))),
        include="message.output_text.logprobs",
    )
    provider.complete([ChatMessage.user("x")])
    assert recorder.body["include"] == [
        "message.output_text.logprobs",
        "reasoning.encrypted_content",
    ]


def test_images_and_pdfs_are_input_parts(make_provider):
    provider, recorder = provider_for(
        make_provider, httpx.Response(200, json=response_body(message("A cat.")))
    )
    image = ImagePart(mime_type="image/png", data=b"\x89PNG")
    pdf = FilePart(mime_type="application/pdf", filename="a.pdf", data=b"%PDF")
    turn = ChatMessage.assistant_tool_calls([ToolCall("call_1", "snap", {})])
    provider.complete(
        [
            ChatMessage.user([TextPart("What is this?"), image, pdf]),
            turn,
            ChatMessage.tool_result("call_1", [TextPart("shot"), image]),
        ]
    )
    user, _, output = recorder.body["input"]
    assert user == {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "What is this?"},
            {"type": "input_image", "image_url": "data:image/png;base64,iVBORw=="},
            {
                "type": "input_file",
                "filename": "a.pdf",
                "file_data": "data:application/pdf;base64,JVBERg==",
            },
        ],
    }
    assert output["output"] == [
        {"type": "input_text", "text": "shot"},
        {"type": "input_image", "image_url": "data:image/png;base64,iVBORw=="},
    ]


def test_usage_reads_cached_and_reasoning_tokens(make_provider):
    provider, _ = provider_for(make_provider, httpx.Response(200, json=response_body(message("x"))))
    reply = provider.complete([ChatMessage.user("x")])
    assert reply.usage == Usage(
        input_tokens=120, output_tokens=40, total_tokens=160, cached_tokens=64, reasoning_tokens=32
    )
    assert reply.content == "x"
    assert reply.model == "gpt-5-2025-08-07"
    assert reply.provider == "openai_responses"


@pytest.mark.parametrize(
    ("reason", "finish"),
    [("max_output_tokens", FinishReason.LENGTH), ("content_filter", FinishReason.CONTENT_FILTER)],
)
def test_incomplete_responses_finish_by_their_reason(make_provider, reason, finish):
    body = response_body(message("cut"), status="incomplete", reason=reason)
    provider, _ = provider_for(make_provider, httpx.Response(200, json=body))
    reply = provider.complete([ChatMessage.user("x")])
    assert (reply.finish_reason, reply.raw_finish_reason, reply.content) == (finish, reason, "cut")


def test_a_refusal_is_kept_as_text_and_finishes_as_content_filter(make_provider):
    refusal = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "refusal", "refusal": "I can't help with that."}],
    }
    provider, _ = provider_for(make_provider, httpx.Response(200, json=response_body(refusal)))
    reply = provider.complete([ChatMessage.user("x")])
    assert (reply.content, reply.finish_reason) == (
        "I can't help with that.",
        FinishReason.CONTENT_FILTER,
    )


def test_a_failed_response_raises_its_error(make_provider):
    body = {**response_body(), "status": "failed"}
    body["error"] = {"code": "rate_limit_exceeded", "message": "Slow down."}
    provider, _ = provider_for(make_provider, httpx.Response(200, json=body))
    with pytest.raises(RateLimitError, match="Slow down"):
        provider.complete([ChatMessage.user("x")])


def test_a_body_without_output_is_an_invalid_response(make_provider):
    provider, _ = provider_for(make_provider, httpx.Response(200, json={"id": "resp_1"}))
    with pytest.raises(InvalidResponseError):
        provider.complete([ChatMessage.user("x")])


def test_http_errors_are_typed_with_the_providers_message(make_provider):
    error = {"error": {"message": "Bad temperature.", "type": "invalid_request_error"}}
    provider, _ = provider_for(make_provider, httpx.Response(400, json=error))
    with pytest.raises(InvalidRequestError, match="HTTP 400: Bad temperature"):
        provider.complete([ChatMessage.user("x")])


# Streams ---------------------------------------------------------------------------


def event(kind: str, **fields) -> tuple[str, dict]:
    return kind, {"type": kind, **fields}


def streamed_tool_turn() -> list[tuple[str, dict]]:
    added = {**function_call(), "arguments": "", "status": "in_progress"}
    return [
        event("response.created", response={**response_body(), "status": "in_progress"}),
        event(
            "response.output_item.added", output_index=0, item={"type": "reasoning", "id": "rs_1"}
        ),
        event("response.reasoning_summary_text.delta", output_index=0, delta="Need the "),
        event("response.reasoning_summary_text.delta", output_index=0, delta="weather."),
        event("response.output_item.done", output_index=0, item=REASONING_ITEM),
        event("response.output_item.added", output_index=1, item=message("")),
        event("response.output_text.delta", output_index=1, delta="Let me "),
        event("response.output_text.delta", output_index=1, delta="check."),
        event("response.output_item.done", output_index=1, item=message("Let me check.")),
        event("response.output_item.added", output_index=2, item=added),
        event("response.function_call_arguments.delta", output_index=2, delta='{"city":'),
        event("response.function_call_arguments.delta", output_index=2, delta='"Paris"}'),
        event(
            "response.function_call_arguments.done", output_index=2, arguments='{"city":"Paris"}'
        ),
        event("response.output_item.done", output_index=2, item=function_call()),
        event(
            "response.completed",
            response=response_body(REASONING_ITEM, message("Let me check."), function_call()),
        ),
    ]


def test_a_stream_yields_reasoning_text_then_the_call_and_ends_with_the_whole_reply(
    make_provider,
):
    provider, recorder = provider_for(make_provider, sse(*streamed_tool_turn()))
    events = list(provider.stream([ChatMessage.user("Weather?")], tools=TOOLS[:1]))
    assert recorder.body["stream"] is True
    assert [type(e) for e in events] == [
        ReasoningDelta,
        ReasoningDelta,
        TextDelta,
        TextDelta,
        ToolCallCompleted,
        ResponseCompleted,
    ]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Let me check."
    # The summary as it streamed is the summary stored.
    thought = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    assert thought == "Need the weather." == events[-1].response.reasoning[0].text
    call = events[4].tool_call
    assert (call.id, call.name, call.arguments) == ("call_9", "get_weather", {"city": "Paris"})
    final = events[-1].response
    assert final.content == "Let me check."
    assert final.finish_reason == FinishReason.TOOL_CALLS
    assert final.usage.reasoning_tokens == 32
    assert final.usage.cached_tokens == 64
    assert [(part.kind, part.call_id) for part in final.reasoning] == [
        (ReasoningKind.SUMMARY, None),
        (ReasoningKind.ENCRYPTED, None),
        (ReasoningKind.SIGNATURE, None),  # the message item's id
        (ReasoningKind.SIGNATURE, "call_9"),  # the call item's id
    ]
    assert json.loads(final.reasoning[1].data)["encrypted_content"] == "ENC-1=="


def test_the_streamed_reply_replays_like_the_whole_one(make_provider):
    body = response_body(REASONING_ITEM, message("Let me check."), function_call())
    provider, _ = provider_for(
        make_provider, sse(*streamed_tool_turn()), httpx.Response(200, json=body)
    )
    streamed = list(provider.stream([ChatMessage.user("Weather?")], tools=TOOLS[:1]))[-1]
    whole = provider.complete([ChatMessage.user("Weather?")], tools=TOOLS[:1])
    assert streamed.response.reasoning == whole.reasoning
    assert streamed.response.tool_calls == whole.tool_calls


def test_items_only_in_the_final_response_are_read_from_it(make_provider):
    final = response_body(message("Hi."), function_call())
    provider, _ = provider_for(make_provider, sse(event("response.completed", response=final)))
    events = list(provider.stream([ChatMessage.user("x")], tools=TOOLS[:1]))
    assert [type(e) for e in events] == [TextDelta, ToolCallCompleted, ResponseCompleted]
    reply = events[-1].response
    assert (reply.content, [c.id for c in reply.tool_calls]) == ("Hi.", ["call_9"])


def test_streamed_text_is_not_read_twice_from_its_item(make_provider):
    provider, _ = provider_for(
        make_provider,
        sse(
            event("response.output_text.delta", output_index=0, delta="Hi."),
            event("response.completed", response=response_body(message("Hi."))),
        ),
    )
    assert list(provider.stream([ChatMessage.user("x")]))[-1].response.content == "Hi."


@pytest.mark.parametrize(
    ("reason", "finish"),
    [("max_output_tokens", FinishReason.LENGTH), ("content_filter", FinishReason.CONTENT_FILTER)],
)
def test_a_stream_ending_incomplete_finishes_by_its_reason(make_provider, reason, finish):
    body = response_body(message("cu"), status="incomplete", reason=reason)
    provider, _ = provider_for(
        make_provider,
        sse(
            event("response.output_text.delta", output_index=0, delta="cu"),
            event("response.incomplete", response=body),
        ),
    )
    final = list(provider.stream([ChatMessage.user("x")]))[-1].response
    assert (final.content, final.finish_reason, final.raw_finish_reason) == ("cu", finish, reason)


@pytest.mark.parametrize(
    ("error", "cls"),
    [
        ({"code": "rate_limit_exceeded", "message": "Slow down."}, RateLimitError),
        ({"code": "server_error", "message": "Oops."}, ProviderUnavailableError),
        ({"code": "invalid_prompt", "message": "Refused prompt."}, InvalidRequestError),
    ],
)
def test_a_failed_stream_raises_by_the_errors_code(make_provider, error, cls):
    failed = {**response_body(), "status": "failed", "error": error}
    provider, _ = provider_for(
        make_provider,
        sse(
            event("response.output_text.delta", output_index=0, delta="Hel"),
            event("response.failed", response=failed),
        ),
    )
    with pytest.raises(cls, match=error["message"]):
        list(provider.stream([ChatMessage.user("x")]))


@pytest.mark.parametrize(
    ("fields", "cls"),
    [
        ({"code": "rate_limit_exceeded", "message": "Too many.", "param": None}, RateLimitError),
        ({"code": "ERR_SOMETHING", "message": "Broke.", "param": None}, ProviderUnavailableError),
        (
            {"error": {"type": "invalid_request_error", "message": "No such model."}},
            InvalidRequestError,
        ),
    ],
)
def test_an_error_event_raises_by_its_own_code(make_provider, fields, cls):
    provider, _ = provider_for(make_provider, sse(event("error", sequence_number=1, **fields)))
    with pytest.raises(cls, match="in the stream"):
        list(provider.stream([ChatMessage.user("x")]))


def test_a_stream_closed_before_completed_ended_early(make_provider):
    provider, _ = provider_for(
        make_provider, sse(event("response.output_text.delta", output_index=0, delta="Hel"))
    )
    with pytest.raises(ProviderUnavailableError, match=r"ended early, before response\.completed"):
        list(provider.stream([ChatMessage.user("x")]))


def test_streamed_arguments_past_the_cap_stop_the_stream(make_provider):
    provider, _ = provider_for(
        make_provider,
        sse(
            event("response.function_call_arguments.delta", output_index=0, delta="x" * 50),
            event("response.completed", response=response_body()),
        ),
        max_reply_chars=20,
    )
    with pytest.raises(InvalidResponseError, match="tool call arguments"):
        list(provider.stream([ChatMessage.user("x")]))


def test_the_backend_is_registered(settings):
    from llm_conversations.providers import build_provider

    provider = build_provider(
        {"BACKEND": "openai_responses", "MODEL": "gpt-5", "API_KEY": "k"}, name="r"
    )
    assert isinstance(provider, OpenAIResponsesProvider)
    assert provider.base_url == "https://api.openai.com/v1"


def test_responses_reasoning_and_item_ids_never_reach_another_provider(make_provider):
    from llm_conversations.providers import AnthropicProvider, GeminiProvider, OllamaProvider

    turn = ChatMessage.assistant_tool_calls(
        [ToolCall("call_1", "get_time", {})],
        "Checking.",
        reasoning=[
            Reasoning("openai_responses", ReasoningKind.SUMMARY, "SUMMARY-TEXT"),
            Reasoning("openai_responses", ReasoningKind.ENCRYPTED, data='{"id": "rs_SECRET"}'),
            Reasoning("openai_responses", ReasoningKind.SIGNATURE, data="msg_SECRET"),
            Reasoning(
                "openai_responses", ReasoningKind.SIGNATURE, data="fc_SECRET", call_id="call_1"
            ),
        ],
    )
    conversation = [ChatMessage.user("t?"), turn, ChatMessage.tool_result("call_1", "9")]
    replies = {
        AnthropicProvider: {"content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn"},
        GeminiProvider: {
            "candidates": [{"content": {"parts": [{"text": "ok"}]}, "finishReason": "STOP"}]
        },
        OllamaProvider: {"message": {"content": "ok"}, "done": True, "done_reason": "stop"},
        OpenAIProvider: {"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]},
    }
    for cls, reply in replies.items():
        recorder = Recorder(httpx.Response(200, json=reply))
        provider, _ = make_provider(cls, recorder, model="m")
        provider.complete(conversation, tools=TOOLS)
        body = recorder.requests[0].content.decode()
        assert "SECRET" not in body, cls
        assert "SUMMARY-TEXT" not in body, cls
