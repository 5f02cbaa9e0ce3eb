"""Every recorded provider reply, replayed through the adapter its request chose.

Each recording (the corpus in shared/recorded/ beside the repository; sources
in recorded/SOURCES.md) is served back at the HTTP boundary as it was
recorded. What the adapter makes of it (text, tool calls, whether reasoning was
kept, usage, the finish reason, or the error) is compared with what the
recording itself holds, read independently by ``recordings.py``.

A request no adapter of ours serves (not a model call, or a feature we do not
implement) is skipped only by name, in the lists below, with the reason.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import httpx
import pytest

from llm_conversations.core.completions import CompletionResponse, FinishReason
from llm_conversations.core.messages import ChatMessage
from llm_conversations.core.reasoning import thoughts
from llm_conversations.providers import (
    AnthropicProvider,
    GeminiProvider,
    OllamaProvider,
    OpenAIProvider,
    OpenAIResponsesProvider,
    Provider,
    ReasoningDelta,
    ResponseCompleted,
    TextDelta,
    ToolCallCompleted,
)
from llm_conversations.providers.redaction import ERROR_TEXT_LIMIT

from .recordings import SOURCES, Exchange, Expected, corpus_root, exchanges, expected
from .recordings import recording_files as files

ADAPTERS: dict[str, type[Provider]] = {
    "chat": OpenAIProvider,
    "responses": OpenAIResponsesProvider,
    "anthropic": AnthropicProvider,
    "gemini": GeminiProvider,
    "ollama": OllamaProvider,
}

# Chat Completions servers, by host: the provider each recording is counted under.
CHAT_HOSTS = {
    "api.openai.com": "openai-chat",
    "api.groq.com": "groq",
    "api.mistral.ai": "mistral",
    "openrouter.ai": "openrouter",
    "api.deepseek.com": "deepseek",
    "router.huggingface.co": "huggingface",
    "api.cerebras.ai": "cerebras",
    "generativelanguage.googleapis.com": "gemini-openai",
    "ollama.com": "ollama-openai",
    "localhost:11434": "ollama-openai",
}

# Recorded requests that are not a model's reply, by what their URI contains.
NOT_REPLIES = {
    "/cachedContents": "creates or deletes a Gemini context cache (not a generation)",
    "oauth2.googleapis.com/token": "a Google OAuth token exchange",
    "fileSearchStores": "creates a Gemini file search store or uploads to it",
    "api.openai.com/v1/files": "uploads a file to OpenAI",
    "api.openai.com/v1/vector_stores": "creates an OpenAI vector store",
    "api.openai.com/v1/conversations": "creates or reads an OpenAI conversation object",
    "/responses/compact": "OpenAI's compaction endpoint (the adapter does not compact)",
}

# Recorded model replies left out, by file, with the reason.
SKIPPED: dict[str, str] = {
    "pydantic-ai/tests/models/cassettes/test_google/"
    "test_google_model_file_search_grounding_gemini_3[False].yaml": (
        "Gemini 3's built-in file search: the signed toolCall and toolResponse parts of a "
        "server-side tool are not read (the adapter implements no built-in tools)"
    ),
}

# Replies our adapters still read wrong (listed in SOURCES.md under "Known failures").
KNOWN_FAILURES: dict[str, str] = {}


def adapter_for(exchange: Exchange) -> tuple[str, str] | None:
    """The adapter that serves the request, and the provider it is counted under."""
    url = httpx.URL(exchange.uri)
    host = url.netloc.decode()
    path = url.path
    if path.endswith("/chat/completions"):
        return "chat", CHAT_HOSTS.get(host, host)
    if path.endswith("/responses"):
        return (
            "responses",
            "openrouter-responses" if host == "openrouter.ai" else "openai-responses",
        )
    if path == "/v1/messages":
        return "anthropic", "anthropic"
    if path.endswith((":generateContent", ":streamGenerateContent")):
        return "gemini", "gemini"
    if path == "/api/chat":
        return "ollama", "ollama"
    return None


def short(name: str) -> str:
    return "/".join(name.split("/")[-2:])


def cases() -> list[Any]:
    found = []
    for name, path in files():
        for exchange in exchanges(name, path):
            chosen = adapter_for(exchange)
            adapter, provider = chosen if chosen else ("none", "other")
            key = f"{name}#{exchange.index}"
            marks = []
            not_reply = next(
                (
                    f"not a model reply: {why}"
                    for part, why in NOT_REPLIES.items()
                    if part in exchange.uri
                ),
                None,
            )
            if exchange.method != "POST":
                not_reply = (
                    f"a {exchange.method} (fetching a document, polling a background response, "
                    "deleting a cache): the adapters only POST"
                )
            if not_reply:
                marks.append(pytest.mark.skip(reason=not_reply))
            elif name in SKIPPED:
                marks.append(pytest.mark.skip(reason=SKIPPED[name]))
            elif key in KNOWN_FAILURES:
                marks.append(pytest.mark.xfail(reason=KNOWN_FAILURES[key], strict=True))
            found.append(
                pytest.param(
                    exchange,
                    adapter,
                    id=f"{provider}:{short(name)}#{exchange.index}",
                    marks=marks,
                )
            )
    return found


CASES = cases()


def model_of(exchange: Exchange) -> str:
    model = exchange.request.get("model")
    if isinstance(model, str) and model:
        return model
    # Gemini names it in the path; the rest of the requests recorded without a parsed body.
    match = re.search(r"/models/([^/:]+):", exchange.uri)
    return match.group(1) if match else "recorded-model"


def streamed(exchange: Exchange) -> bool:
    return exchange.request.get("stream") is True or ":streamGenerateContent" in exchange.uri


def replay(adapter: str, exchange: Exchange) -> CompletionResponse:
    """What the adapter makes of the recorded response (streamed if the request was)."""
    provider = ADAPTERS[adapter](
        model=model_of(exchange),
        api_key="recorded",
        max_retries=0,
        sleep=lambda _seconds: None,
        http_client=httpx.Client(transport=httpx.MockTransport(lambda _r: exchange.served())),
    )
    conversation = [ChatMessage.user("Replayed.")]
    if not streamed(exchange):
        return provider.complete(conversation)
    events = list(provider.stream(conversation))
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    reply = final.response
    # What streamed is what the reply holds.
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == reply.content
    calls = tuple(e.tool_call for e in events if isinstance(e, ToolCallCompleted))
    assert calls == reply.tool_calls
    thought = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    # A compacted state streams as no reasoning (it is none).
    assert thought == "".join(part.text for part in thoughts(reply.reasoning))
    return reply


# The providers' own finish words, normalised: the recording's word decides.
FINISH = {
    **dict.fromkeys(("stop", "end_turn", "stop_sequence", "STOP", "completed"), FinishReason.STOP),
    **dict.fromkeys(
        ("length", "max_tokens", "MAX_TOKENS", "max_output_tokens"), FinishReason.LENGTH
    ),
    **dict.fromkeys(("tool_calls", "tool_use"), FinishReason.TOOL_CALLS),
    **dict.fromkeys(
        ("content_filter", "refusal", "SAFETY", "MODEL_ARMOR", "PROHIBITED_CONTENT", "BLOCKLIST"),
        FinishReason.CONTENT_FILTER,
    ),
}


def finish_of(want: Expected) -> FinishReason | None:
    normal = FINISH.get(want.finish or "")
    if want.calls and normal in (None, FinishReason.STOP, FinishReason.TOOL_CALLS):
        return FinishReason.TOOL_CALLS
    return normal


@pytest.mark.parametrize(("exchange", "adapter"), CASES)
def test_a_recorded_reply_reads_as_the_recording_holds_it(exchange: Exchange, adapter: str) -> None:
    assert adapter in ADAPTERS, f"no adapter serves {exchange.method} {exchange.uri}"
    want = expected(adapter, exchange)
    if want.error is not None:
        with pytest.raises(want.error) as caught:
            replay(adapter, exchange)
        if want.error_message:
            assert caught.value.provider_message == want.error_message[:ERROR_TEXT_LIMIT]
        return
    reply = replay(adapter, exchange)
    assert reply.content == want.text
    assert [(call.name, call.arguments) for call in reply.tool_calls] == want.calls
    # The provider's compacted state is read apart (test_recorded_compaction.py).
    assert bool(thoughts(reply.reasoning)) == want.reasoning
    assert "".join(part.text for part in thoughts(reply.reasoning)) == want.thinking
    usage = reply.usage
    assert (
        usage.input_tokens,
        usage.output_tokens,
        usage.cached_tokens,
        usage.reasoning_tokens,
        usage.cache_write_tokens,
    ) == want.usage
    if want.finish is not None:
        assert reply.raw_finish_reason == want.finish
    if (finish := finish_of(want)) is not None:
        assert reply.finish_reason == finish


def test_every_recording_names_its_source() -> None:
    listed = set(re.findall(r"^\| `([^`]+\.yaml)` \|", SOURCES.read_text(), flags=re.M))
    present = {name for name, _ in files()}
    assert present <= listed, sorted(present - listed)
    if corpus_root() is not None:
        # A corpus with files missing would pass on what is left.
        assert listed <= present, sorted(listed - present)


# The protocols with their own adapter that recordings exist for (Ollama's own has none).
FAMILIES = ("openai-chat", "openai-responses", "anthropic", "gemini")


def test_the_corpus_covers_every_provider() -> None:
    if corpus_root() is None:
        pytest.skip("the corpus beside the repository (shared/recorded) is not here")
    # Recordings (files) per provider, each counted once however many replies it holds.
    recorded = {(p.id.split(":")[0], p.values[0].name) for p in CASES if not p.marks}
    counted = Counter(provider for provider, _ in recorded)
    compatible = sum(n for p, n in counted.items() if p not in FAMILIES)
    for provider in FAMILIES:
        assert counted[provider] >= 20, counted
    assert compatible >= 20, counted


def test_the_corpus_is_replayed_streamed_and_whole() -> None:
    """A run streams wherever it executes (``STREAM``, default true) and asks for a whole
    reply only with ``STREAM: False``: every protocol is replayed both ways."""
    if corpus_root() is None:
        pytest.skip("the corpus beside the repository (shared/recorded) is not here")
    modes = Counter(
        (param.values[1], streamed(param.values[0])) for param in CASES if not param.marks
    )
    for adapter in ("chat", "responses", "anthropic", "gemini"):
        assert modes[adapter, True] >= 10, modes
        assert modes[adapter, False] >= 10, modes
