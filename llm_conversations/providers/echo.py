"""The echo backend: a deterministic provider for development and tests.

It makes no network call. Its behaviour is documented in ``docs/providers.md``:
it repeats the last user message; a user message that is a JSON object with a
``tool_calls`` list makes it call those tools; after tool results it replies
with a short text quoting them. Usage is counted in characters, not tokens.
Run parameters are recorded in ``raw["parameters"]``; those that can shape a
deterministic reply do (``max_output_tokens``, ``stop``, ``tool_choice: none``,
``parallel_tool_calls: false``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from llm_conversations.core.completions import CompletionResponse, FinishReason, Usage
from llm_conversations.core.content_parts import attached
from llm_conversations.core.messages import ChatMessage, InvalidMessage, Role, ToolCall
from llm_conversations.core.parameters import (
    REASONING_EFFORTS,
    SAMPLING,
    ParameterSupport,
    RunParameters,
)

from ._wire import CallIds, tool_names_by_id
from .base import CompletionRequest, Provider
from .errors import InvalidRequestError
from .stream_events import ResponseCompleted, StreamEvent, TextDelta, ToolCallCompleted

__all__ = ["EchoProvider"]

QUOTE_LIMIT = 200
STREAM_PIECES = 3


def _quote(text: str) -> str:
    short = text if len(text) <= QUOTE_LIMIT else text[:QUOTE_LIMIT] + "..."
    return json.dumps(short, ensure_ascii=False)


class EchoProvider(Provider):
    """Replies from the conversation itself; accepts and ignores key, URL and options."""

    backend = "echo"
    uses_http = False
    # Every parameter: a stand-in for any provider during development.
    parameter_support = ParameterSupport(
        sampling=frozenset(SAMPLING),
        reasoning_efforts=frozenset(REASONING_EFFORTS),
        tool_choices=frozenset({"auto", "none", "required", "tool"}),
        parallel_tool_calls=frozenset({True, False}),
        response_format=True,
    )

    def __init__(self, *, model: str = "echo", **kwargs: Any) -> None:
        super().__init__(model=model, **kwargs)

    def send(self, request: CompletionRequest) -> CompletionResponse:
        """Reply per the documented echo rules."""
        return self._reply(request.messages, request.model, request.parameters)

    def send_stream(self, request: CompletionRequest) -> Iterator[StreamEvent]:
        """The same reply as :meth:`send`, its text split into a few deltas."""
        response = self.send(request)
        text = response.content
        size = max(1, -(-len(text) // STREAM_PIECES))
        for start in range(0, len(text), size):
            yield TextDelta(text[start : start + size])
        for call in response.tool_calls:
            yield ToolCallCompleted(call)
        yield ResponseCompleted(response)

    def _reply(
        self, messages: Sequence[ChatMessage], model: str, parameters: RunParameters
    ) -> CompletionResponse:
        calls: tuple[ToolCall, ...] = ()
        if messages and messages[-1].role is Role.TOOL:
            content = self._quote_results(messages)
        else:
            last_user = next((m for m in reversed(messages) if m.role is Role.USER), None)
            text = last_user.content if last_user else "(no user message)"
            content, calls = self._requested_calls(text, messages)
            # Attachments are described, so a conversation shows what the
            # provider received ("[image/png 64x64, 1.2 KB]").
            seen = " ".join(
                f"[{part.describe()}]" for part in attached(last_user.parts if last_user else None)
            )
            if seen and not calls:
                content = f"{content} {seen}" if content else seen
            choice = parameters.tool_choice
            if calls and choice is not None and choice.mode == "none":
                content, calls = text, ()
        if parameters.parallel_tool_calls is False:
            calls = calls[:1]
        reason = FinishReason.TOOL_CALLS if calls else FinishReason.STOP
        for stop in parameters.stop or ():
            content = content.split(stop, 1)[0]
        limit = parameters.max_output_tokens
        if limit is not None and len(content) > limit:
            content = content[:limit]
            reason = reason if calls else FinishReason.LENGTH
        usage = Usage(
            input_tokens=sum(len(m.content) for m in messages),
            output_tokens=len(content) + sum(len(c.arguments_json) for c in calls),
        )
        raw = {
            "content": content,
            "tool_calls": [call.to_stored() for call in calls],
            "usage": {
                "input_characters": usage.input_tokens,
                "output_characters": usage.output_tokens,
            },
        }
        if stored := parameters.to_stored():
            raw["parameters"] = stored
        return CompletionResponse(
            content=content,
            tool_calls=calls,
            finish_reason=reason,
            usage=usage,
            model=model,
            provider=self.backend,
            raw=raw,
            raw_finish_reason=reason.value,
        )

    @staticmethod
    def _quote_results(messages: Sequence[ChatMessage]) -> str:
        names = tool_names_by_id(messages)
        results: list[ChatMessage] = []
        for message in reversed(messages):
            if message.role is not Role.TOOL:
                break
            results.insert(0, message)
        parts = [
            f"{names.get(r.tool_call_id or '', 'tool')} {'failed' if r.is_error else 'returned'} "
            f"{_quote(r.content)}"
            for r in results
        ]
        return "Tool results: " + "; ".join(parts) + "."

    def _requested_calls(
        self, text: str, messages: Sequence[ChatMessage]
    ) -> tuple[str, tuple[ToolCall, ...]]:
        try:
            data = json.loads(text) if text.lstrip().startswith("{") else None
        except ValueError:
            data = None
        if not isinstance(data, Mapping) or not isinstance(data.get("tool_calls"), list):
            return text, ()
        if not data["tool_calls"]:
            return text, ()  # an empty list asks for nothing: echo as text
        ids = CallIds(messages)
        calls = []
        for index, item in enumerate(data["tool_calls"]):
            try:
                if not isinstance(item, Mapping):
                    raise InvalidMessage("invalid_tool_call", "a tool call must be an object.")
                calls.append(ToolCall.from_dict({**item, "id": ids.take(item.get("id"))}))
            except InvalidMessage as exc:
                # Answer like a provider refusing a bad request.
                raise InvalidRequestError(
                    f"echo: tool_calls[{index}] is invalid: {exc.message}",
                    provider=self.backend,
                    status_code=400,
                    provider_message=exc.message,
                ) from None
        content = data.get("content")
        return (content if isinstance(content, str) else ""), tuple(calls)
