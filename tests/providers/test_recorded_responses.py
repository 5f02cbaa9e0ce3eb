"""Real Responses API exchanges, recorded by pydantic-ai, replayed through our adapter.

Each cassette (shared/recorded/, sources in recorded/SOURCES.md) is served back
at the HTTP boundary in order. What the adapter reads is compared with what the
recording holds, read here on its own; where a cassette holds a second request
made after a reply, the request our adapter builds from that reply is compared
with the recorded one (the reasoning item verbatim, then the call and its output).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from llm_conversations.core.messages import ChatMessage
from llm_conversations.core.reasoning import ReasoningKind
from llm_conversations.core.tool_specs import ToolSpec
from llm_conversations.exceptions import InvalidRequestError
from llm_conversations.providers import (
    OpenAIResponsesProvider,
    ResponseCompleted,
    TextDelta,
    ToolCallCompleted,
)

from .recordings import interactions, served

HOST = "api.openai.com"


class Replay:
    """Serves a cassette's responses in order and keeps what our adapter sent."""

    def __init__(self, name: str) -> None:
        self.exchanges = interactions(f"{name}.yaml", HOST)
        self.sent: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(json.loads(request.content))
        return served(self.exchanges[len(self.sent) - 1]["response"])

    def provider(self) -> OpenAIResponsesProvider:
        model = self.exchanges[0]["request"]["parsed_body"]["model"]
        return OpenAIResponsesProvider(
            model=model,
            api_key="recorded",
            max_retries=0,
            http_client=httpx.Client(transport=httpx.MockTransport(self)),
        )

    def recorded(self, index: int) -> dict[str, Any]:
        """The response object of exchange ``index``: the body, or a stream's final event."""
        response = self.exchanges[index]["response"]
        body: dict[str, Any]
        if "parsed_body" in response:
            body = response["parsed_body"]
            return body
        (final,) = [e for e in self.events(index) if e["type"] == "response.completed"]
        body = final["response"]
        return body

    def events(self, index: int) -> list[dict[str, Any]]:
        body = self.exchanges[index]["response"]["body"]["string"]
        return [
            json.loads(line.removeprefix("data: "))
            for line in body.splitlines()
            if line.startswith("data: ")
        ]

    def request(self, index: int) -> dict[str, Any]:
        body: dict[str, Any] = self.exchanges[index]["request"]["parsed_body"]
        return body


def tools_of(request: dict[str, Any]) -> list[ToolSpec]:
    return [
        ToolSpec(t["name"], t.get("description") or "", t["parameters"]) for t in request["tools"]
    ]


def texts(response: dict[str, Any]) -> str:
    return "".join(
        part["text"]
        for item in response["output"]
        if item["type"] == "message"
        for part in item["content"]
        if part["type"] == "output_text"
    )


def items(response: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [item for item in response["output"] if item["type"] == kind]


def usage_of(response: dict[str, Any]) -> tuple[int, int, int, int]:
    usage = response["usage"]
    return (
        usage["input_tokens"],
        usage["output_tokens"],
        usage["input_tokens_details"]["cached_tokens"],
        usage["output_tokens_details"]["reasoning_tokens"],
    )


def read_usage(reply: Any) -> tuple[int, int, int | None, int | None]:
    usage = reply.usage
    return (usage.input_tokens, usage.output_tokens, usage.cached_tokens, usage.reasoning_tokens)


def without_ids(items: list[dict[str, Any]], *keys: str) -> list[dict[str, Any]]:
    """Input items as compared: the output-only ``id`` and ``status`` of calls left out,
    and any other ``keys``."""
    dropped = {"id", "status"}
    return [{k: v for k, v in item.items() if k not in keys} for item in _without(items, dropped)]


def _without(items: list[dict[str, Any]], dropped: set[str]) -> list[dict[str, Any]]:
    return [
        {
            k: v
            for k, v in item.items()
            if not (item.get("type") == "function_call" and k in dropped)
        }
        for item in items
    ]


def reply_to(replay: Replay, index: int, conversation: list[ChatMessage], stream: bool) -> Any:
    provider = replay.provider()
    tools = tools_of(replay.request(index)) if "tools" in replay.request(index) else None
    if not stream:
        return provider.complete(conversation, tools=tools)
    events = list(provider.stream(conversation, tools=tools))
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    streamed = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert streamed == final.response.content
    calls = [e.tool_call for e in events if isinstance(e, ToolCallCompleted)]
    assert tuple(calls) == final.response.tool_calls
    return final.response


def replay_second_request(name: str) -> list[dict[str, Any]]:
    """The input items our adapter sends after replaying the first reply of ``name``."""
    replay = Replay(name)
    tool_round_trip_with(replay, stream=False, compare_call_ids=True)
    sent: list[dict[str, Any]] = replay.sent[1]["input"]
    return sent


def tool_round_trip(name: str, *, stream: bool, compare_call_ids: bool = True) -> None:
    tool_round_trip_with(Replay(name), stream=stream, compare_call_ids=compare_call_ids)


def tool_round_trip_with(replay: Replay, *, stream: bool, compare_call_ids: bool) -> None:
    """A call, its recorded result, and the answer: both replies and the second request.

    ``compare_call_ids`` false leaves the ``call_id`` of the recorded second
    request out of the comparison (an older client sent the item id there).
    """
    first_input = replay.request(0)["input"]
    conversation = [ChatMessage.user(first_input[0]["content"])]
    instructions = replay.request(0).get("instructions")
    if instructions:
        conversation.insert(0, ChatMessage.system(instructions))
    reply = reply_to(replay, 0, conversation, stream)
    recorded = replay.recorded(0)
    (call,) = items(recorded, "function_call")
    (ours,) = reply.tool_calls
    assert (ours.id, ours.name, ours.arguments) == (
        call["call_id"],
        call["name"],
        json.loads(call["arguments"]),
    )
    assert read_usage(reply) == usage_of(recorded)
    (output,) = [i for i in replay.request(1)["input"] if i.get("type") == "function_call_output"]
    conversation += [reply.to_message(), ChatMessage.tool_result(ours.id, output["output"])]
    answer = reply_to(replay, 1, conversation, stream)
    sent = replay.sent[1]["input"]
    ignored = () if compare_call_ids else ("call_id",)
    assert without_ids(sent, *ignored) == without_ids(replay.request(1)["input"], *ignored)
    assert answer.content == texts(replay.recorded(1))
    assert read_usage(answer) == usage_of(replay.recorded(1))


def test_a_recorded_tool_call_and_its_answer_round_trip() -> None:
    tool_round_trip("test_openai_responses_model_simple_response_with_tool_call", stream=False)


def test_a_recorded_streamed_tool_call_and_its_answer_round_trip() -> None:
    # Recorded in March 2025 by a client that sent the item id (fc_...) as call_id.
    tool_round_trip("test_openai_responses_stream", stream=True, compare_call_ids=False)


def test_a_recorded_reasoning_item_is_sent_back_verbatim_before_its_call() -> None:
    name = "test_openai_responses_thinking_with_tool_calls"
    ours = replay_second_request(name)
    replay = Replay(name)
    (item,) = items(replay.recorded(0), "reasoning")
    theirs = replay.request(1)["input"]
    # The recording's own second request carries the item as the reply had it ...
    assert theirs[1] == {k: v for k, v in item.items() if k != "status"}
    # ... and ours carries it too, then the call item with the id it came with.
    assert [i.get("type", i.get("role")) for i in ours] == [
        "user",
        "reasoning",
        "function_call",
        "function_call_output",
    ]
    assert ours[1:3] == theirs[1:3]
    assert replay.recorded(1)["usage"]["input_tokens_details"]["cached_tokens"] == 2048


def test_a_recorded_reasoning_reply_keeps_its_summaries_and_encrypted_content() -> None:
    replay = Replay("test_openai_responses_model_thinking_part")
    question = replay.request(0)["input"][0]["content"]
    reply = reply_to(replay, 0, [ChatMessage.user(question)], stream=False)
    recorded = replay.recorded(0)
    (item,) = items(recorded, "reasoning")
    summaries = [p.text for p in reply.reasoning if p.kind is ReasoningKind.SUMMARY]
    assert summaries == [s["text"] for s in item["summary"]]
    (encrypted,) = [p for p in reply.reasoning if p.kind is ReasoningKind.ENCRYPTED]
    assert json.loads(encrypted.data or "")["encrypted_content"] == item["encrypted_content"]
    assert reply.content == texts(recorded)
    assert read_usage(reply) == usage_of(recorded)
    assert reply.usage.reasoning_tokens == 1920
    # The next question: the recorded request sends the same reasoning item back.
    follow_up = replay.request(1)["input"][-1]["content"]
    conversation = [ChatMessage.user(question), reply.to_message(), ChatMessage.user(follow_up)]
    second = reply_to(replay, 1, conversation, stream=False)
    # The reasoning item and the message that followed it go back as recorded.
    ours = replay.sent[1]["input"]
    theirs = replay.request(1)["input"]
    assert [i.get("type", i.get("role")) for i in ours] == ["user", "reasoning", "message", "user"]
    assert ours[1:3] == theirs[1:3]
    assert second.content == texts(replay.recorded(1))


def test_a_recorded_streamed_reasoning_reply_reads_its_summary_and_text() -> None:
    replay = Replay("test_openai_responses_thinking_part_iter")
    question = replay.request(0)["input"][0]["content"]
    reply = reply_to(replay, 0, [ChatMessage.user(question)], stream=True)
    events = replay.events(0)
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert deltas
    assert reply.content == deltas
    summary = "".join(
        e["delta"] for e in events if e["type"] == "response.reasoning_summary_text.delta"
    )
    assert "".join(p.text for p in reply.reasoning if p.kind is ReasoningKind.SUMMARY) == summary
    (done,) = [
        e["item"]
        for e in events
        if e["type"] == "response.output_item.done" and e["item"]["type"] == "reasoning"
    ]
    (encrypted,) = [p for p in reply.reasoning if p.kind is ReasoningKind.ENCRYPTED]
    assert json.loads(encrypted.data or "")["encrypted_content"] == done["encrypted_content"]
    assert read_usage(reply) == usage_of(replay.recorded(0))


def test_recorded_streamed_usage_is_read_whole() -> None:
    replay = Replay("test_openai_responses_streaming_usage")
    question = replay.request(0)["input"][0]["content"]
    reply = reply_to(replay, 0, [ChatMessage.user(question)], stream=True)
    assert read_usage(reply) == usage_of(replay.recorded(0))
    assert reply.model == replay.recorded(0)["model"]


def test_a_recorded_http_error_is_an_invalid_request_with_its_message() -> None:
    replay = Replay("test_openai_responses_model_http_error")
    message = replay.exchanges[0]["response"]["parsed_body"]["error"]["message"]
    with pytest.raises(InvalidRequestError) as caught:
        replay.provider().complete([ChatMessage.user("hello")])
    assert caught.value.provider_message == message
    assert caught.value.status_code == 400
