"""A conversation made on one provider, continued on every other: each request is valid.

Provider A made the turns: two parallel tool calls with A's own kind of ids,
A's reasoning state on the call turn and on the answer, the calls' results,
then a new question. Each other adapter B sends it to a fake server on
127.0.0.1 (real sockets), and the body it sent is held to B's documented
rules: call ids B accepts, every call answered by its result, and none of
A's reasoning (B never gets another provider's signatures, encrypted items
or thinking text).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from llm_conversations.core.messages import ChatMessage, ToolCall
from llm_conversations.core.reasoning import Reasoning, ReasoningKind
from llm_conversations.core.sequence import check_sequence
from llm_conversations.core.tool_specs import ToolSpec
from llm_conversations.providers.backends import backend_class
from llm_conversations.providers.gemini_contents import SKIP_SIGNATURE
from tests.faults.server import API_KEY, OK_TEXT, FakeProvider

BACKENDS = ("openai", "openai_responses", "anthropic", "gemini", "ollama")
MODELS = {
    "openai": "gpt-4.1",
    "openai_responses": "o4-mini",
    "anthropic": "claude-sonnet-4-5",
    "gemini": "gemini-3-pro-preview",
    "ollama": "qwen3",
}

# The ids each provider makes for two parallel calls. OpenAI-compatible
# servers make ids others refuse: Kimi's ``functions.<name>:<n>`` (a ``.`` and
# a ``:``, not Anthropic's ``[a-zA-Z0-9_-]``) and vLLM's 46-character
# ``chatcmpl-tool-<hex>`` (longer than OpenAI's 40).
CALL_IDS = {
    "openai": ("functions.lookup:0", "chatcmpl-tool-" + "9f" * 16),
    "openai_responses": ("call_kLm8Qx1RbT2Zc3Vd4We5Yf6", "call_Nn7Pp8Qq9Rr0Ss1Tt2Uu3Vv4"),
    "anthropic": ("toolu_01A09q90qw90lq917835lq9", "toolu_01B19r91rx91mr928946mr0"),
    "gemini": ("call_3f9a1c0d2b4e6f8a0c1e3d5b", "call_7a2c4e6b8d0f1a3c5e7b9d1f"),
    "ollama": ("call_k3zz2m4j", "call_p8wq1n5r"),
}

# Each provider's own reasoning; the strings must never reach another provider.
SECRETS = {
    "openai": ("O-REASONING-TEXT",),
    "openai_responses": ("R-ENCRYPTED-ITEM", "R-SUMMARY-TEXT", "fc_68a1b2c3d4e5f6"),
    "anthropic": ("A-THINKING-TEXT", "A-SIGNATURE", "A-REDACTED"),
    "gemini": ("G-THOUGHT-TEXT", "G-CALL-SIGNATURE", "G-TEXT-SIGNATURE"),
    "ollama": ("L-THINKING-TEXT",),
}

TOOLS = [
    ToolSpec(
        "lookup",
        "Look a city up.",
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    )
]

# Anthropic tool_use ids: https://docs.anthropic.com/en/api/messages (tool_use.id).
ANTHROPIC_ID = re.compile(r"[a-zA-Z0-9_-]+")
# OpenAI Chat Completions refuses a longer tool call id ("string_above_max_length").
OPENAI_MAX_ID = 40


def call_turn_reasoning(a: str, first_call: str) -> tuple[Reasoning, ...]:
    if a == "anthropic":
        return (
            Reasoning(a, ReasoningKind.THINKING, "A-THINKING-TEXT", "A-SIGNATURE"),
            Reasoning(a, ReasoningKind.REDACTED, data="A-REDACTED"),
        )
    if a == "gemini":
        return (
            Reasoning(a, ReasoningKind.THINKING, "G-THOUGHT-TEXT"),
            Reasoning(a, ReasoningKind.SIGNATURE, data="G-CALL-SIGNATURE", call_id=first_call),
        )
    if a == "openai_responses":
        return (
            Reasoning(a, ReasoningKind.SUMMARY, "R-SUMMARY-TEXT"),
            Reasoning(a, ReasoningKind.ENCRYPTED, data="R-ENCRYPTED-ITEM"),
            Reasoning(
                a, ReasoningKind.SIGNATURE, data="fc_68a1b2c3d4e5f6" + "0" * 34, call_id=first_call
            ),
        )
    if a == "openai":
        return (Reasoning(a, ReasoningKind.THINKING, "O-REASONING-TEXT"),)
    return (Reasoning(a, ReasoningKind.THINKING, "L-THINKING-TEXT"),)


def answer_reasoning(a: str) -> tuple[Reasoning, ...]:
    if a == "gemini":
        return (Reasoning(a, ReasoningKind.SIGNATURE, data="G-TEXT-SIGNATURE"),)
    parts = call_turn_reasoning(a, CALL_IDS[a][0])
    return tuple(part for part in parts if part.kind is not ReasoningKind.SIGNATURE)


def conversation_by(a: str) -> list[ChatMessage]:
    first, second = CALL_IDS[a]
    history = [
        ChatMessage.user("Weather in Paris and Rome?"),
        ChatMessage.assistant_tool_calls(
            [
                ToolCall(first, "lookup", {"city": "Paris"}),
                ToolCall(second, "lookup", {"city": "Rome"}),
            ],
            content="Let me look both up.",
            reasoning=call_turn_reasoning(a, first),
        ),
        ChatMessage.tool_result(first, "Paris: 18C"),
        ChatMessage.tool_result(second, "Rome: 24C"),
        ChatMessage.assistant("Paris 18C, Rome 24C.", reasoning=answer_reasoning(a)),
        ChatMessage.user("And tomorrow?"),
    ]
    assert check_sequence(history) == ()
    return history


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProvider]:
    provider = FakeProvider()
    server = provider.start()
    try:
        yield provider
    finally:
        server.close()


def sent_by(b: str, history: list[ChatMessage], fake: FakeProvider) -> dict[str, Any]:
    """The body adapter ``b`` sent for ``history``; its reply was read whole."""
    fake.heal()
    cls = backend_class(b)
    with cls(
        model=MODELS[b], api_key=API_KEY, base_url=fake.base_urls()[b], max_retries=0
    ) as provider:
        reply = provider.complete(history, tools=TOOLS)
    assert reply.content == OK_TEXT
    (seen,) = fake.requests
    assert seen.protocol == b
    return seen.body


def check_openai(body: dict[str, Any]) -> None:
    calls: list[str] = []
    answered: list[str] = []
    for message in body["messages"]:
        assert "reasoning_content" not in message
        assert "reasoning" not in message
        for call in message.get("tool_calls") or ():
            assert 0 < len(call["id"]) <= OPENAI_MAX_ID, call["id"]
            calls.append(call["id"])
        if message["role"] == "tool":
            assert message["tool_call_id"] in calls, "a result answers an earlier call"
            answered.append(message["tool_call_id"])
    assert sorted(calls) == sorted(answered)
    assert len(set(calls)) == 2


def check_responses(body: dict[str, Any]) -> None:
    calls: list[str] = []
    answered: list[str] = []
    for item in body["input"]:
        kind = item.get("type")
        assert kind != "reasoning", "no reasoning item of another provider"
        if kind == "function_call":
            assert "id" not in item, "item ids are the Responses API's own"
            calls.append(item["call_id"])
        elif kind == "function_call_output":
            assert item["call_id"] in calls
            answered.append(item["call_id"])
    assert sorted(calls) == sorted(answered)
    assert len(set(calls)) == 2


def check_anthropic(body: dict[str, Any]) -> None:
    previous: set[str] = set()
    calls: list[str] = []
    answered: list[str] = []
    for message in body["messages"]:
        blocks = message["content"] if isinstance(message["content"], list) else []
        kinds = {block["type"] for block in blocks}
        assert not kinds & {"thinking", "redacted_thinking"}
        if message["role"] == "assistant":
            previous = {block["id"] for block in blocks if block["type"] == "tool_use"}
            for call_id in previous:
                assert ANTHROPIC_ID.fullmatch(call_id), call_id
            calls += previous
        for block in blocks:
            if block["type"] == "tool_result":
                # Each result answers a tool_use of the assistant turn just before it.
                assert block["tool_use_id"] in previous
                answered.append(block["tool_use_id"])
    assert sorted(calls) == sorted(answered)
    assert len(set(calls)) == 2


def check_gemini(body: dict[str, Any]) -> None:
    calls: list[str] = []
    answered: list[str] = []
    for content in body["contents"]:
        signed = []
        for part in content["parts"]:
            assert not part.get("thought"), "no thought part of another provider"
            if "functionCall" in part:
                calls.append(part["functionCall"]["name"])
                signed.append(part.get("thoughtSignature"))
            else:
                assert "thoughtSignature" not in part
            if "functionResponse" in part:
                answered.append(part["functionResponse"]["name"])
        if signed:
            # Gemini 3 refuses a step whose first call has no signature: another
            # provider's calls get the documented dummy, on the first call only.
            assert signed == [SKIP_SIGNATURE] + [None] * (len(signed) - 1)
    assert calls == answered == ["lookup", "lookup"]


def check_ollama(body: dict[str, Any]) -> None:
    calls: list[str] = []
    answered: list[str] = []
    for message in body["messages"]:
        assert "thinking" not in message
        for call in message.get("tool_calls") or ():
            assert isinstance(call["function"]["arguments"], dict)
            calls.append(call["function"]["name"])
        if message["role"] == "tool":
            answered.append(message["tool_name"])
    assert calls == answered == ["lookup", "lookup"]


@pytest.mark.parametrize(
    ("a", "b"),
    [pytest.param(a, b, id=f"{a}-to-{b}") for a, b in itertools.permutations(BACKENDS, 2)],
)
def test_a_conversation_moved_to_another_provider_makes_a_valid_request(
    a: str, b: str, fake: FakeProvider
) -> None:
    history = conversation_by(a)
    body = sent_by(b, history, fake)
    text = json.dumps(body)
    for secret in SECRETS[a]:
        assert secret not in text, f"{a}'s reasoning {secret!r} reached {b}"
    # The words of every turn went, whatever the provider.
    for words in ("Weather in Paris and Rome?", "Paris: 18C", "Rome: 24C", "And tomorrow?"):
        assert words in text
    if b == "openai":
        check_openai(body)
    elif b == "openai_responses":
        check_responses(body)
    elif b == "anthropic":
        check_anthropic(body)
    elif b == "gemini":
        check_gemini(body)
    else:
        check_ollama(body)


def test_an_openai_compatible_servers_ids_fit_openai_itself(fake: FakeProvider) -> None:
    """vLLM's 46-character ids, moved to OpenAI (the same backend, another entry)."""
    body = sent_by("openai", conversation_by("openai"), fake)
    check_openai(body)
    kept, rewritten = body["messages"][1]["tool_calls"]
    assert kept["id"] == "functions.lookup:0"  # OpenAI takes any id up to 40 characters
    assert rewritten["id"] != CALL_IDS["openai"][1]


@pytest.mark.parametrize("b", ["openai", "anthropic"])
def test_a_rewritten_id_is_the_same_in_every_round(b: str, fake: FakeProvider) -> None:
    """The next round sends the same ids again, for the calls and their results."""
    history = conversation_by("openai")

    def ids(body: dict[str, Any]) -> list[str]:
        return re.findall(r'"(?:id|tool_call_id|tool_use_id)": "([^"]+)"', json.dumps(body))

    first = ids(sent_by(b, history, fake))
    later = [*history, ChatMessage.assistant("Sunny."), ChatMessage.user("Thanks")]
    assert ids(sent_by(b, later, fake)) == first
    assert len(first) == 4
    # One of the two breaks each provider's rule: OpenAI's length, Anthropic's characters.
    assert len(set(first) - set(CALL_IDS["openai"])) == 1
