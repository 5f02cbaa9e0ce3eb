"""Google Gemini ``generateContent`` (the Gemini API, ``x-goog-api-key``).

All conversion to Gemini's format happens in :func:`to_gemini_request`,
one step of the request per function; the turns are
:func:`~llm_conversations.providers.gemini_contents.gemini_contents`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import httpx

from llm_conversations.core.completions import CompletionResponse, FinishReason, Usage
from llm_conversations.core.messages import ChatMessage, Role
from llm_conversations.core.parameters import SAMPLING, ParameterSupport, RunParameters
from llm_conversations.core.reasoning import ReasoningKind
from llm_conversations.core.tool_specs import ToolSpec

from ._wire import (
    CallIds,
    CallParts,
    check_supported_parts,
    int_or_zero,
    iter_sse,
    merge_fields,
    pass_through,
)
from .base import CompletionRequest, Provider
from .caching import last_key
from .errors import AuthenticationError, InvalidResponseError, ProviderError
from .gemini_contents import BACKEND, gemini_contents
from .stream import StreamAccumulator
from .stream_events import StreamEvent

__all__ = [
    "BACKEND",
    "GeminiProvider",
    "gemini_parameters",
    "gemini_usage",
    "to_gemini_request",
]

_GENERATION_KEYS = {
    "temperature": "temperature",
    "top_p": "topP",
    "top_k": "topK",
    "max_tokens": "maxOutputTokens",
    "stop": "stopSequences",
    "seed": "seed",
}
_TOOL_MODES = {"auto": "AUTO", "required": "ANY", "none": "NONE"}
# Run parameters and their generationConfig keys.
_PARAMETER_KEYS = {
    "temperature": "temperature",
    "top_p": "topP",
    "max_output_tokens": "maxOutputTokens",
    "seed": "seed",
}
_NONE = RunParameters()
_FILTERED = {
    "SAFETY",
    "MODEL_ARMOR",
    "IMAGE_PROHIBITED_CONTENT",
    "IMAGE_RECITATION",
    "RECITATION",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "SPII",
    "IMAGE_SAFETY",
    "LANGUAGE",
}


def gemini_parameters(parameters: RunParameters) -> dict[str, Any]:
    """The ``generateContent`` fields of a run's parameters (those that are set).

    Sampling goes in ``generationConfig``; ``reasoning_effort`` is
    ``thinkingConfig.thinkingLevel``; ``response_format`` is
    ``responseMimeType: application/json`` with ``responseJsonSchema`` (JSON
    Schema as given, like the tools' ``parametersJsonSchema``); ``tool_choice``
    is ``toolConfig.functionCallingConfig`` (one tool: ``ANY`` with
    ``allowedFunctionNames``).
    """
    generation: dict[str, Any] = {
        key: getattr(parameters, name)
        for name, key in _PARAMETER_KEYS.items()
        if getattr(parameters, name) is not None
    }
    if parameters.stop is not None:
        generation["stopSequences"] = list(parameters.stop)
    if parameters.reasoning_effort is not None:
        generation["thinkingConfig"] = {"thinkingLevel": parameters.reasoning_effort}
    if parameters.response_format is not None:
        generation["responseMimeType"] = "application/json"
        generation["responseJsonSchema"] = parameters.response_format.schema
    fields: dict[str, Any] = {"generationConfig": generation} if generation else {}
    choice = parameters.tool_choice
    if choice is not None:
        config: dict[str, Any] = {"mode": _TOOL_MODES.get(choice.mode, "ANY")}
        if choice.mode == "tool":
            config["allowedFunctionNames"] = [choice.name]
        fields["toolConfig"] = {"functionCallingConfig": config}
    return fields


# Images and PDFs in user turns; function responses carry text only.
SUPPORTED_PARTS = {"user": frozenset({"text", "image", "file"}), "tool": frozenset({"text"})}


def to_gemini_request(
    messages: Sequence[ChatMessage],
    tools: Sequence[ToolSpec],
    *,
    model: str,
    options: Mapping[str, Any],
    parameters: RunParameters | None = None,
) -> dict[str, Any]:
    """Build the ``generateContent`` body.

    System messages become ``systemInstruction``; the other turns are
    ``contents`` (:func:`gemini_contents`: ``model`` contents with their
    calls and the reasoning Gemini made, results as ``functionResponse``
    parts, images and PDFs as ``inlineData``). Tools become
    ``functionDeclarations`` whose parameters are sent as JSON Schema
    (``parametersJsonSchema``).
    ``parameters`` (:func:`gemini_parameters`) override what ``options`` set.
    """
    check_supported_parts(messages, "gemini", SUPPORTED_PARTS)
    system = [{"text": m.content} for m in messages if m.role is Role.SYSTEM]
    body: dict[str, Any] = {"contents": gemini_contents(messages, model)}
    if system:
        body["systemInstruction"] = {"parts": system}
    if tools:
        body["tools"] = [{"functionDeclarations": [_declaration(spec) for spec in tools]}]
    options = dict(options)
    body = pass_through(_entry_fields(body, options), options)
    return _run_fields(body, parameters or _NONE)


def _declaration(spec: ToolSpec) -> dict[str, Any]:
    """A tool offered as a ``functionDeclaration``, its parameters as JSON Schema."""
    declaration: dict[str, Any] = {"name": spec.name}
    if spec.description:
        declaration["description"] = spec.description
    declaration["parametersJsonSchema"] = spec.parameters
    return declaration


def _entry_fields(body: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
    """``body`` with the entry's sampling options in ``generationConfig`` and its
    ``tool_choice`` in ``toolConfig``, taken out of ``options`` (the rest pass
    through as they are)."""
    generation = dict(options.pop("generationConfig", {}) or {})
    for key, wire_key in _GENERATION_KEYS.items():
        if key in options:
            value = options.pop(key)
            generation[wire_key] = [value] if key == "stop" and isinstance(value, str) else value
    if generation:
        body["generationConfig"] = generation
    choice = options.pop("tool_choice", None)
    if isinstance(choice, str) and choice in _TOOL_MODES:
        body["toolConfig"] = {"functionCallingConfig": {"mode": _TOOL_MODES[choice]}}
    return body


def _run_fields(body: dict[str, Any], parameters: RunParameters) -> dict[str, Any]:
    """``body`` with the run's parameters over the entry's options."""
    # The run's tool choice and thinking level replace the entry's, never mix with them.
    if parameters.tool_choice is not None:
        body.pop("toolConfig", None)
    if parameters.reasoning_effort is not None and "generationConfig" in body:
        body["generationConfig"].pop("thinkingConfig", None)
    return merge_fields(body, gemini_parameters(parameters))


def gemini_usage(data: object) -> Usage:
    """Read ``usageMetadata``; output counts thinking tokens as Gemini bills them,
    and ``reasoning_tokens`` is that part (``thoughtsTokenCount``)."""
    if not isinstance(data, Mapping):
        return Usage()
    cached = data.get("cachedContentTokenCount")
    thoughts = data.get("thoughtsTokenCount")
    total = data.get("totalTokenCount")
    return Usage(
        input_tokens=int_or_zero(data.get("promptTokenCount")),
        output_tokens=int_or_zero(data.get("candidatesTokenCount")) + int_or_zero(thoughts),
        total_tokens=total if isinstance(total, int) else None,
        cached_tokens=cached if isinstance(cached, int) else None,
        reasoning_tokens=thoughts if isinstance(thoughts, int) else None,
    )


_Thought = tuple[ReasoningKind, str | None, str | None, str | None]
"""A piece of reasoning as read: kind, text, signature, and the call it belongs to."""

# The model tried to call a function and failed: nothing it said can be used.
_UNUSABLE_CALLS = frozenset({"MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL"})


def _finish(raw: object, has_calls: bool) -> FinishReason:
    # Gemini says STOP even when the reply calls functions.
    if raw in ("STOP", None) and has_calls:
        return FinishReason.TOOL_CALLS
    if raw == "STOP":
        return FinishReason.STOP
    if raw == "MAX_TOKENS":
        return FinishReason.LENGTH
    if raw in _FILTERED:
        return FinishReason.CONTENT_FILTER
    return FinishReason.OTHER


class GeminiProvider(Provider):
    """Gemini models over ``generateContent`` / ``streamGenerateContent?alt=sse``."""

    backend = BACKEND
    default_base_url = "https://generativelanguage.googleapis.com/v1beta"
    parameter_support = ParameterSupport(
        sampling=frozenset(SAMPLING),
        reasoning_efforts=frozenset({"minimal", "low", "medium", "high"}),
        tool_choices=frozenset({"auto", "none", "required", "tool"}),
        # Gemini may call several functions at once and has no switch to stop it.
        parallel_tool_calls=frozenset({True}),
        response_format=True,
        max_stop_sequences=5,
    )

    def auth_headers(self) -> dict[str, str]:
        return {"x-goog-api-key": self._api_key} if self._api_key else {}

    def build_request(self, request: CompletionRequest) -> tuple[str, dict[str, Any]]:
        body = to_gemini_request(
            request.messages,
            request.tools,
            model=request.model,
            options=request.options,
            parameters=request.parameters,
        )
        name = request.model.removeprefix("models/")
        method = "streamGenerateContent?alt=sse" if request.stream else "generateContent"
        # The conversation last: each round's bytes extend the last round's.
        return f"/models/{name}:{method}", last_key(body, "contents")

    def error_class(self, status: int, data: object) -> type[ProviderError]:
        # An invalid key is a 400 INVALID_ARGUMENT with reason API_KEY_INVALID.
        if status == 400 and "API_KEY_INVALID" in json.dumps(data):
            return AuthenticationError
        return super().error_class(status, data)

    def _parts(
        self, data: Mapping[str, Any], ids: CallIds, *, stream: bool = False
    ) -> tuple[list[str], list[CallParts], list[_Thought], str | None]:
        """The text pieces, calls and reasoning of one body or chunk, and its finish reason.

        A thought part is reasoning; a ``thoughtSignature`` on a text or call
        part is kept for that part (the call by its id).
        """
        candidates = data.get("candidates") or []
        if not candidates:
            blocked = (data.get("promptFeedback") or {}).get("blockReason")
            if not blocked and not stream:
                # Neither an answer nor a blocked prompt: not a reply at all.
                raise KeyError("candidates")
            return [], [], [], blocked
        candidate = candidates[0]
        texts: list[str] = []
        calls: list[CallParts] = []
        reasoning: list[_Thought] = []
        for part in (candidate.get("content") or {}).get("parts") or ():
            signature = part.get("thoughtSignature")
            if part.get("thought"):
                reasoning.append((ReasoningKind.THINKING, part.get("text"), signature, None))
            elif "functionCall" in part:
                call = part["functionCall"]
                call_id = ids.take(call.get("id"))
                calls.append((call_id, call["name"], call.get("args")))
                reasoning.append((ReasoningKind.SIGNATURE, None, signature, call_id))
            elif "text" in part:
                texts.append(part["text"])
                reasoning.append((ReasoningKind.SIGNATURE, None, signature, None))
        return texts, calls, reasoning, candidate.get("finishReason")

    def parse_response(
        self, data: Mapping[str, Any], messages: Sequence[ChatMessage]
    ) -> CompletionResponse:
        texts, calls, reasoning, raw_reason = self._parts(data, CallIds(messages))
        self._refuse_unusable(raw_reason)
        reply = StreamAccumulator(model=data.get("modelVersion"), raw_reason=raw_reason)
        for piece in texts:
            reply.text(piece)
        for parts in calls:
            reply.call(*parts)
        for kind, text, signature, call_id in reasoning:
            reply.reason(kind, text, signature, call_id=call_id)
        if not data.get("candidates") and raw_reason:
            finish = FinishReason.CONTENT_FILTER  # the prompt itself was blocked
        else:
            finish = _finish(raw_reason, reply.has_calls)
        return reply.response(self, finish, gemini_usage(data.get("usageMetadata")), raw=data)

    def _refuse_unusable(self, raw_reason: object) -> None:
        # Completing with an empty answer would hide that the call failed.
        if raw_reason in _UNUSABLE_CALLS:
            raise InvalidResponseError(
                f"{self.backend}: the model's function call could not be used ({raw_reason}).",
                provider=self.backend,
            )

    def parse_stream(
        self, response: httpx.Response, messages: Sequence[ChatMessage]
    ) -> Iterator[StreamEvent]:
        """Read the SSE chunks; the reply is complete once a chunk has a ``finishReason``.

        A blocked prompt's ``promptFeedback.blockReason`` ends it too.
        """
        ids = CallIds(messages)
        reply = StreamAccumulator()
        finished = False
        # The connection's close ends the stream; one held open after the finishing
        # chunk (which carries the usage) is ended when a read stalls.
        for sse in iter_sse(self.lines(response, complete=lambda: bool(reply.raw_reason))):
            chunk = json.loads(sse.data)
            if chunk.get("error"):
                raise self.stream_error(chunk)
            reply.chunk(chunk)
            texts, calls, reasoning, reason = self._parts(chunk, ids, stream=True)
            self._refuse_unusable(reason)
            for kind, thought, signature, call_id in reasoning:
                reply.reason(kind, thought, signature, call_id=call_id)
                self.check_size(reply.reasoning_chars, "reasoning")
                if thinking := reply.thought(thought):
                    yield thinking
            for piece in texts:
                if text := reply.text(piece):
                    yield text
            for parts in calls:  # Gemini sends each call whole
                yield reply.call(*parts)
            finished = finished or bool(reason)
            reply.keep(
                model=chunk.get("modelVersion"), raw_reason=reason, usage=chunk.get("usageMetadata")
            )
        if not finished:
            raise self.stream_ended_early("a finishReason")
        usage = gemini_usage(reply.usage)
        yield reply.finish(self, _finish(reply.raw_reason, reply.has_calls), usage)
