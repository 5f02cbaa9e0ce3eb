"""How much of each request is the previous request unchanged, over a 50-round tool loop.

Runs the same conversation (a system prompt, two tools, then 50 rounds of a
call and its result) through each adapter over ``httpx.MockTransport``: the
bytes measured are the bytes each adapter would send. For rounds 2 to 50 it
prints the share of a request's bytes that are a prefix of the previous
request (the part a provider's prompt cache can serve), and the dollars of
the 50 rounds at the shipped prices with and without cache pricing.

Tokens are counted with the heuristic counter (``core/tokens.py``). A round's
cache read is the prefix it shares with the previous round, when that is at
least the 1,024-token minimum (OpenAI counts it in 128-token steps).
Anthropic also bills what a round adds to the cache, at 1.25x the input price
(the 5-minute cache write); OpenAI and Gemini cache without a write charge.
Each reply is counted as 40 output tokens. No network, no database.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from llm_conversations.core.messages import ChatMessage
from llm_conversations.core.model_info import DEFAULT_MODEL_INFO, parse_model_info
from llm_conversations.core.tokens import heuristic_tokens
from llm_conversations.core.tool_specs import ToolSpec
from llm_conversations.providers import (
    AnthropicProvider,
    GeminiProvider,
    OllamaProvider,
    OpenAIProvider,
    OpenAIResponsesProvider,
    Provider,
)

ROUNDS = 50
MINIMUM_CACHED = 1024
OUTPUT_TOKENS = 40
WRITE_FACTOR = Decimal("1.25")
SYSTEM = "You are a careful travel assistant. Check facts with the tools before answering. " * 40
TOOLS = [
    ToolSpec(
        "get_weather",
        "Current weather for a city",
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    ),
    ToolSpec("get_time", "Current time in a city", {"type": "object", "properties": {}}),
]
RESULT = "Mild, 18C, light wind from the west, no rain expected before the evening. " * 4


def anthropic_reply(i: int) -> dict[str, Any]:
    call = {
        "type": "tool_use",
        "id": f"toolu_{i}",
        "name": "get_weather",
        "input": {"city": "Oslo"},
    }
    return {"model": "m", "content": [call], "stop_reason": "tool_use", "usage": {}}


def openai_reply(i: int) -> dict[str, Any]:
    function = {"name": "get_weather", "arguments": '{"city":"Oslo"}'}
    message = {"role": "assistant", "content": None}
    message["tool_calls"] = [{"id": f"call_{i}", "type": "function", "function": function}]
    return {"model": "m", "choices": [{"message": message, "finish_reason": "tool_calls"}]}


def responses_reply(i: int) -> dict[str, Any]:
    item = {"type": "function_call", "id": f"fc_{i}", "call_id": f"call_{i}", "status": "completed"}
    item.update(name="get_weather", arguments='{"city":"Oslo"}')
    return {"id": f"resp_{i}", "status": "completed", "model": "m", "output": [item]}


def gemini_reply(i: int) -> dict[str, Any]:
    part = {"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}}}
    candidate = {"content": {"role": "model", "parts": [part]}, "finishReason": "STOP"}
    return {"candidates": [candidate], "modelVersion": "m"}


def ollama_reply(i: int) -> dict[str, Any]:
    call = {"function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}
    message = {"role": "assistant", "content": "", "tool_calls": [call]}
    return {"model": "m", "message": message, "done": True, "done_reason": "stop"}


# (label, adapter, model priced, reply, whether cache writes are billed)
CASES: list[tuple[str, type[Provider], str, Callable[[int], dict[str, Any]], bool]] = [
    ("anthropic", AnthropicProvider, "claude-sonnet-4-5", anthropic_reply, True),
    ("openai", OpenAIProvider, "gpt-4o", openai_reply, False),
    ("openai_responses", OpenAIResponsesProvider, "gpt-4o", responses_reply, False),
    ("gemini", GeminiProvider, "gemini-2.5-flash", gemini_reply, False),
    ("ollama", OllamaProvider, "", ollama_reply, False),
]


def requests_of(
    cls: type[Provider], model: str, reply: Callable[[int], dict[str, Any]]
) -> list[bytes]:
    """The request bytes of the 50 rounds, as the adapter sends them."""
    sent: list[bytes] = []
    replies = iter(range(ROUNDS))

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request.content)
        return httpx.Response(200, json=reply(next(replies)))

    provider = cls(
        model=model or "qwen3",
        api_key="k",
        max_retries=0,
        http_client=httpx.Client(transport=httpx.MockTransport(handler)),
    )
    history = [ChatMessage.system(SYSTEM), ChatMessage.user("Plan my week in Oslo.")]
    for i in range(ROUNDS):
        response = provider.complete(history, tools=TOOLS)
        (call,) = response.tool_calls
        history += [response.to_message(), ChatMessage.tool_result(call.id, f"{i}: {RESULT}")]
    return sent


def common_prefix(a: bytes, b: bytes) -> int:
    size = min(len(a), len(b))
    for i in range(size):
        if a[i] != b[i]:
            return i
    return size


def costs(
    sent: list[bytes], model: str, writes_billed: bool, step: int
) -> tuple[Decimal, Decimal] | None:
    """Dollars of the rounds without and with cache pricing."""
    info = DEFAULT_MODEL_INFO.get(model)
    prices = parse_model_info(info).prices if info else None
    if prices is None:
        return None
    plain = cached = Decimal(0)
    previous = b""
    for request in sent:
        total = heuristic_tokens(request.decode())
        shared = heuristic_tokens(
            request[: common_prefix(previous, request)].decode(errors="ignore")
        )
        read = shared // step * step if shared >= MINIMUM_CACHED else 0
        written = total - read if writes_billed and total >= MINIMUM_CACHED else 0
        plain += total * prices.input + OUTPUT_TOKENS * prices.output
        cached += (
            (total - read - written) * prices.input
            + read * prices.cached_input
            + written * prices.input * WRITE_FACTOR
            + OUTPUT_TOKENS * prices.output
        )
        previous = request
    million = Decimal(1_000_000)
    return plain / million, cached / million


def main() -> None:
    print(f"{ROUNDS}-round tool loop, rounds 3 to {ROUNDS}: share of each request that is the")
    print("previous request unchanged (min, mean, first round from which it stays >= 95%),")
    print("share of the previous request kept as that prefix (min), size of the last request")
    print(
        f"{'provider':<18}{'min':>7}{'mean':>7}{'>=95%':>7}{'kept':>8}{'last KB':>9}"
        "  cost plain -> with cache"
    )
    for label, cls, model, reply, writes_billed in CASES:
        sent = requests_of(cls, model, reply)
        shares = [
            common_prefix(previous, current) / len(current)
            for previous, current in itertools.pairwise(sent[1:])
        ]  # rounds 3 to 50 against their previous round ("after round 2")
        kept = [
            common_prefix(previous, current) / len(previous)
            for previous, current in itertools.pairwise(sent[1:])
        ]
        from_round = 3 + next(
            (i for i in range(len(shares)) if min(shares[i:]) >= 0.95), len(shares)
        )
        step = 128 if label.startswith("openai") else 1
        priced = costs(sent, model, writes_billed, step)
        cost = "no prices" if priced is None else f"${priced[0]:.4f} -> ${priced[1]:.4f} ({model})"
        print(
            f"{label:<18}{min(shares):>7.1%}{sum(shares) / len(shares):>7.1%}{from_round:>7}"
            f"{min(kept):>8.2%}{len(sent[-1]) / 1024:>9.1f}  {cost}"
        )
        # Everything of the previous request but its closing brackets (and, for
        # Anthropic, the breakpoint that moves on) is the next one's prefix.
        assert min(kept) >= 0.99, f"{label}: a request changed its previous round's bytes"


if __name__ == "__main__":
    main()
