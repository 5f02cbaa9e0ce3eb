"""Recorded provider exchanges (VCR cassettes of other projects) and a reader of them.

The reader here is deliberately small and separate from the adapters: it says
what a recorded reply holds (text, calls, whether reasoning came, usage, the
provider's finish word, or the error) straight from the recorded JSON or SSE, so
a test can compare it with what an adapter made of the same bytes.

The recordings are data kept outside the repository, in a ``shared/recorded/``
folder beside it (or the folder named by ``LLM_CONVERSATIONS_RECORDINGS``);
``recorded/SOURCES.md`` names the source repository, path, commit and licence
of every file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from llm_conversations.exceptions import (
    AuthenticationError,
    InvalidRequestError,
    InvalidResponseError,
    ProviderError,
    ProviderUnavailableError,
    RateLimitError,
)

RECORDED = Path(__file__).parent / "recorded"
SOURCES = RECORDED / "SOURCES.md"
CORPUS_VARIABLE = "LLM_CONVERSATIONS_RECORDINGS"

Json = dict[str, Any]
Usage = tuple[int, int, int | None, int | None, int | None]
"""input, output, cache reads, reasoning, cache writes (``None``: not reported)."""


def corpus_root() -> Path | None:
    """The folder of the larger corpus: ``$LLM_CONVERSATIONS_RECORDINGS``, else
    ``shared/recorded`` beside the repository or one of its parents."""
    named = os.environ.get(CORPUS_VARIABLE)
    if named:
        return Path(named)
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "shared" / "recorded"
        if candidate.is_dir():
            return candidate
    return None


def corpus_roots() -> list[Path]:
    """The corpus folder and, beside it, the compaction corpus (``recorded-compaction``)."""
    root = corpus_root()
    if root is None:
        return []
    extra = root.parent / "recorded-compaction"
    return [root, extra] if extra.is_dir() else [root]


def recording_files() -> list[tuple[str, Path]]:
    """Every recording as (its name in SOURCES.md, its file); none without the corpus."""
    return [
        (str(p.relative_to(root)), p)
        for root in corpus_roots()
        for p in sorted(root.rglob("*.yaml"))
    ]


def cassette(name: str) -> Path:
    """The one corpus file called ``name``; the calling test skips without the corpus."""
    roots = corpus_roots()
    if not roots:
        pytest.skip(f"the recordings (shared/recorded beside the repository) are not here: {name}")
    (path,) = (path for root in roots for path in root.rglob(name))
    return path


@cache
def load(path: Path) -> list[Json]:
    """The interactions of one cassette (libyaml's loader: the corpus is megabytes)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    interactions: list[Json] = yaml.load(path.read_text(), Loader=loader)["interactions"]
    return interactions


@dataclass(frozen=True)
class Exchange:
    """One recorded request and the response it got."""

    name: str
    index: int
    uri: str
    method: str
    request: Json
    status: int
    headers: Mapping[str, list[str]]
    body: Any
    """The decoded JSON body, or the text of an event stream (or of another body)."""

    @property
    def streamed(self) -> bool:
        return isinstance(self.body, str)

    def served(self) -> httpx.Response:
        """The response as the server sent it (JSON bodies re-encoded as JSON)."""
        if self.streamed:
            return httpx.Response(
                self.status,
                content=self.body.encode(),
                headers={"content-type": "text/event-stream"},
            )
        retry = {k: v[0] for k, v in self.headers.items() if k.lower() == "retry-after"}
        return httpx.Response(self.status, json=self.body, headers=retry)


def exchanges(name: str, path: Path) -> list[Exchange]:
    """The exchanges of the cassette ``name`` at ``path``."""
    found = []
    for index, interaction in enumerate(load(path)):
        request, response = interaction["request"], interaction["response"]
        if "parsed_body" in response:
            body = response["parsed_body"]
        else:
            body = (response.get("body") or {}).get("string")
            # Some recordings lost the content-type header: a JSON body starts as JSON does.
            if isinstance(body, str) and body.lstrip().startswith(("{", "[")):
                body = json.loads(body)
        found.append(
            Exchange(
                name=name,
                index=index,
                uri=request["uri"],
                method=request["method"],
                request=request.get("parsed_body") or {},
                status=response["status"]["code"],
                headers=response.get("headers") or {},
                body=body,
            )
        )
    return found


def sse_data(text: str) -> Iterator[Any]:
    """The JSON ``data`` of each event of a recorded stream (``[DONE]`` left out)."""
    for event in text.replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(
            line[5:].removeprefix(" ") for line in event.split("\n") if line.startswith("data:")
        )
        if data and data != "[DONE]":
            yield json.loads(data)


@dataclass
class Expected:
    """What a recorded reply holds, read by the functions below."""

    text: str = ""
    calls: list[tuple[str, Any]] = field(default_factory=list)
    reasoning: bool = False
    """Whether the reply carries reasoning state (text, a signature, encrypted data)."""
    thinking: str = ""
    """The reasoning text shown: thoughts, thinking, summaries."""
    usage: Usage = (0, 0, None, None, None)
    finish: str | None = None
    error: type[ProviderError] | None = None
    error_message: str | None = None


def arguments(value: Any) -> Any:
    """Call arguments as recorded: JSON text (empty: none) or an object."""
    if isinstance(value, str):
        return json.loads(value) if value.strip() else {}
    return value if value is not None else {}


def number(value: Any) -> int | None:
    return value if isinstance(value, int) else None


def http_error(status: int, body: Any) -> Expected:
    """A refused request: the error HTTP status names, and the provider's message."""
    if status in (401, 403):
        kind: type[ProviderError] = AuthenticationError
    elif status == 429:
        kind = RateLimitError
    elif status >= 500:
        kind = ProviderUnavailableError
    else:
        kind = InvalidRequestError
    error = body.get("error") if isinstance(body, Mapping) else None
    if isinstance(error, Mapping):
        message = error.get("message")
    elif isinstance(error, str):
        message = error
    else:
        message = body.get("message") if isinstance(body, Mapping) else None
    return Expected(error=kind, error_message=message)


# The words of in-stream errors, by the error they are.
STREAM_ERRORS: dict[str, type[ProviderError]] = {
    "rate_limit_exceeded": RateLimitError,
    "rate_limit_error": RateLimitError,
    "overloaded_error": ProviderUnavailableError,
    "api_error": ProviderUnavailableError,
    "server_error": ProviderUnavailableError,
    "invalid_request_error": InvalidRequestError,
    "tool_use_failed": InvalidRequestError,
}


def stream_error(error: Mapping[str, Any]) -> Expected:
    """An error event inside a stream: classed by an HTTP-like ``code``, else its type."""
    code = error.get("code")
    if isinstance(code, int) and 400 <= code < 600:
        kind = http_error(code, {}).error
    else:
        word = error.get("type") or error.get("code") or ""
        kind = STREAM_ERRORS.get(word, ProviderUnavailableError)
    return Expected(error=kind, error_message=error.get("message"))


# Chat Completions (OpenAI and compatible servers) --------------------------


def chat_text(content: Any) -> str:
    """``content`` as text: a string, or typed chunks of which ``text`` ones count."""
    if isinstance(content, str):
        return content
    return "".join(p["text"] for p in content or () if p.get("type") == "text")


def chat_thinking(message: Mapping[str, Any]) -> str:
    """``reasoning_content`` (DeepSeek, Qwen) or else ``reasoning`` (OpenRouter, Groq),
    and Mistral's ``thinking`` chunks, whose ``thinking`` is text or text chunks."""
    text = message.get("reasoning_content") or message.get("reasoning") or ""
    content = message.get("content")
    for chunk in content if isinstance(content, list) else ():
        if chunk.get("type") == "thinking":
            thinking = chunk["thinking"]
            text += thinking if isinstance(thinking, str) else chat_text(thinking)
    return str(text)


def chat_usage(usage: Any) -> Usage:
    usage = usage or {}
    prompt = usage.get("prompt_tokens_details") or {}
    completion = usage.get("completion_tokens_details") or {}
    return (
        usage.get("prompt_tokens") or 0,
        usage.get("completion_tokens") or 0,
        number(prompt.get("cached_tokens")),
        number(completion.get("reasoning_tokens")),
        None,
    )


def chat(body: Any) -> Expected:
    if isinstance(body, str):
        return chat_stream(body)
    choice = body["choices"][0]
    message = choice["message"]
    return Expected(
        text=chat_text(message.get("content")),
        calls=[
            (c["function"]["name"], arguments(c["function"].get("arguments")))
            for c in message.get("tool_calls") or ()
        ],
        reasoning=bool(chat_thinking(message)),
        thinking=chat_thinking(message),
        usage=chat_usage(body.get("usage")),
        finish=choice.get("finish_reason"),
    )


def chat_stream(text: str) -> Expected:
    expected = Expected()
    calls: dict[int, list[str]] = {}
    for chunk in sse_data(text):
        if chunk.get("error"):
            return stream_error(chunk["error"])
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            expected.text += chat_text(delta.get("content"))
            expected.thinking += chat_thinking(delta)
            for piece in delta.get("tool_calls") or ():
                call = calls.setdefault(piece.get("index", len(calls)), ["", ""])
                function = piece.get("function") or {}
                call[0] = call[0] or function.get("name") or ""
                call[1] += function.get("arguments") or ""
            expected.finish = choice.get("finish_reason") or expected.finish
        if chunk.get("usage"):
            expected.usage = chat_usage(chunk["usage"])
    expected.calls = [(name, arguments(args)) for _, (name, args) in sorted(calls.items())]
    expected.reasoning = bool(expected.thinking)
    return expected


# OpenAI Responses -------------------------------------------------------------


def responses(body: Any) -> Expected:
    if isinstance(body, str):
        for event in sse_data(body):
            if event["type"] == "error":
                return stream_error(event.get("error") or event)
            if event["type"] == "response.failed":
                return stream_error(event["response"]["error"])
            if event["type"] in ("response.completed", "response.incomplete"):
                return responses(event["response"])
        raise AssertionError("the recorded stream has no final response")
    output = body["output"]
    usage = body.get("usage") or {}
    details = body.get("incomplete_details") or {}
    return Expected(
        text="".join(
            part.get("text") or part.get("refusal") or ""
            for item in output
            if item["type"] == "message"
            for part in item["content"]
            if part["type"] in ("output_text", "refusal")
        ),
        calls=[
            (item["name"], arguments(item["arguments"]))
            for item in output
            if item["type"] == "function_call"
        ],
        reasoning=any(
            item["type"] == "reasoning"
            and (item.get("encrypted_content") or any(s.get("text") for s in item["summary"]))
            for item in output
        ),
        thinking="".join(
            summary["text"]
            for item in output
            if item["type"] == "reasoning"
            for summary in item["summary"]
        ),
        usage=(
            usage.get("input_tokens") or 0,
            usage.get("output_tokens") or 0,
            number((usage.get("input_tokens_details") or {}).get("cached_tokens")),
            number((usage.get("output_tokens_details") or {}).get("reasoning_tokens")),
            None,
        ),
        finish=details.get("reason") or body["status"],
    )


# Anthropic Messages -------------------------------------------------------------


def anthropic_usage(usage: Mapping[str, Any]) -> Usage:
    # A compacting reply bills each of its iterations; the top level is the last one's.
    steps = [
        anthropic_usage({**step, "iterations": None}) for step in usage.get("iterations") or ()
    ]
    if steps:
        read_sum = [s[2] for s in steps if s[2] is not None]
        written_sum = [s[4] for s in steps if s[4] is not None]
        return (
            sum(s[0] for s in steps),
            sum(s[1] for s in steps),
            sum(read_sum) if read_sum else None,
            None,
            sum(written_sum) if written_sum else None,
        )
    # Anthropic's input_tokens leaves out the cache reads and writes.
    read = number(usage.get("cache_read_input_tokens"))
    written = number(usage.get("cache_creation_input_tokens"))
    total_input = (usage.get("input_tokens") or 0) + (read or 0) + (written or 0)
    return (total_input, usage.get("output_tokens") or 0, read, None, written)


def anthropic(body: Any) -> Expected:
    if isinstance(body, str):
        return anthropic_stream(body)
    blocks = body["content"]
    return Expected(
        text="".join(b["text"] for b in blocks if b["type"] == "text"),
        calls=[(b["name"], b["input"]) for b in blocks if b["type"] == "tool_use"],
        reasoning=any(b["type"] in ("thinking", "redacted_thinking") for b in blocks),
        thinking="".join(b["thinking"] for b in blocks if b["type"] == "thinking"),
        usage=anthropic_usage(body["usage"]),
        finish=body.get("stop_reason"),
    )


def anthropic_stream(text: str) -> Expected:
    blocks: dict[int, Json] = {}
    usage: Json = {}
    finish = None
    for event in sse_data(text):
        kind = event["type"]
        if kind == "error":
            return stream_error(event["error"])
        if kind == "message_start":
            usage.update(event["message"].get("usage") or {})
        elif kind == "content_block_start":
            blocks[event["index"]] = {**event["content_block"], "json": ""}
        elif kind == "content_block_delta":
            block, delta = blocks[event["index"]], event["delta"]
            if delta["type"] == "text_delta":
                block["text"] = block.get("text", "") + delta["text"]
            elif delta["type"] == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta["thinking"]
            elif delta["type"] == "input_json_delta":
                block["json"] += delta["partial_json"]
        elif kind == "message_delta":
            finish = event["delta"].get("stop_reason") or finish
            # The counts it carries are the totals so far; absent or null ones are unknown.
            usage.update({k: v for k, v in (event.get("usage") or {}).items() if v is not None})
    ordered = [blocks[index] for index in sorted(blocks)]
    return Expected(
        text="".join(b.get("text", "") for b in ordered if b["type"] == "text"),
        calls=[
            (b["name"], arguments(b["json"]) if b["json"] else b.get("input") or {})
            for b in ordered
            if b["type"] == "tool_use"
        ],
        reasoning=any(b["type"] in ("thinking", "redacted_thinking") for b in ordered),
        thinking="".join(b.get("thinking", "") for b in ordered if b["type"] == "thinking"),
        usage=anthropic_usage(usage),
        finish=finish,
    )


# Gemini generateContent -------------------------------------------------------


def gemini(body: Any) -> Expected:
    chunks = list(sse_data(body)) if isinstance(body, str) else [body]
    expected = Expected()
    metadata: Json = {}
    for chunk in chunks:
        if chunk.get("error"):
            return stream_error(chunk["error"])
        metadata = chunk.get("usageMetadata") or metadata
        candidates = chunk.get("candidates") or ()
        if not candidates:
            blocked = (chunk.get("promptFeedback") or {}).get("blockReason")
            expected.finish = blocked or expected.finish
            continue
        candidate = candidates[0]
        for part in (candidate.get("content") or {}).get("parts") or ():
            expected.reasoning |= bool(part.get("thought") or part.get("thoughtSignature"))
            if part.get("thought"):
                expected.thinking += part.get("text") or ""
                continue
            if "functionCall" in part:
                call = part["functionCall"]
                expected.calls.append((call["name"], call.get("args") or {}))
            elif "text" in part:
                expected.text += part["text"]
        expected.finish = candidate.get("finishReason") or expected.finish
    thoughts = number(metadata.get("thoughtsTokenCount"))
    expected.usage = (
        metadata.get("promptTokenCount") or 0,
        (metadata.get("candidatesTokenCount") or 0) + (thoughts or 0),
        number(metadata.get("cachedContentTokenCount")),
        thoughts,
        None,
    )
    if expected.finish in ("MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL"):
        # The model failed to call a function: nothing in the reply is usable.
        return Expected(error=InvalidResponseError)
    return expected


READERS = {"chat": chat, "responses": responses, "anthropic": anthropic, "gemini": gemini}


def expected(adapter: str, exchange: Exchange) -> Expected:
    """What the recorded response of ``exchange`` holds, for ``adapter``'s protocol."""
    if exchange.status >= 400:
        return http_error(exchange.status, exchange.body)
    # No public recording of Ollama's own /api/chat was found, so it has no reader yet.
    assert adapter in READERS, f"no reader of {adapter} recordings: add one with the first"
    return READERS[adapter](exchange.body)


# For the tests that replay whole conversations from named cassettes ----------


def interactions(name: str, host: str) -> list[Json]:
    """The raw interactions with ``host`` in the cassette called ``name``."""
    return [i for i in load(cassette(name)) if host in i["request"]["uri"]]


def served(response: Mapping[str, Any]) -> httpx.Response:
    """A raw recorded response as the server sent it."""
    status = response["status"]["code"]
    body = response.get("body") or {}
    if "string" in body:
        return httpx.Response(
            status, content=body["string"].encode(), headers={"content-type": "text/event-stream"}
        )
    return httpx.Response(status, json=response["parsed_body"])
