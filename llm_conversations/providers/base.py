"""The provider base class: one pooled httpx client, calls, run parameters.

Subclasses implement four hooks: ``build_request`` (path and JSON body),
``auth_headers``, ``parse_response`` and ``parse_stream``, and may refine how
an error body is read (``error_message``, ``error_class``). What
:class:`Provider` is made of lives beside it, each part once: sending,
retrying, deadlines, size caps and typed errors from failed responses in
:mod:`~llm_conversations.providers.http`; building a reply (``completion()``)
in :mod:`~llm_conversations.providers.replies`; errors from error bodies and
streams in :mod:`~llm_conversations.providers.errors`; key redaction in
:mod:`~llm_conversations.providers.redaction`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import httpx

from llm_conversations import telemetry
from llm_conversations.conf import conf
from llm_conversations.core.completions import CompletionResponse
from llm_conversations.core.messages import (
    ChatMessage,
    InvalidMessage,
    MessageInput,
    Role,
    as_chat_messages,
)
from llm_conversations.core.parameters import ParameterSupport, RunParameterInput, RunParameters
from llm_conversations.core.reasoning import compactions
from llm_conversations.core.tool_specs import ToolSpec

from ._wire import ToolInput, as_tool_specs
from .errors import ErrorReports, ProviderTimeout, ProviderUnavailableError
from .http import HttpTransport
from .interrupts import NO_INTERRUPT, Interrupt
from .redaction import KeyRedaction
from .replies import ReplyBuilding
from .stream_events import ResponseCompleted, StreamEvent, TextDelta, whole_reply_stream

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_MAX_RETRY_AFTER",
    "DEFAULT_TIMEOUT",
    "CompletionRequest",
    "Provider",
]


# The defaults of a PROVIDERS entry's TIMEOUT (seconds per attempt),
# CONNECT_TIMEOUT, MAX_RETRIES and MAX_RETRY_AFTER (the longest Retry-After
# slept through inside a request); the registry imports them rather than
# repeating the numbers.
DEFAULT_TIMEOUT = 60.0
DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_MAX_RETRIES = 2
DEFAULT_MAX_RETRY_AFTER = 60.0


@dataclass(frozen=True, slots=True)
class CompletionRequest:
    """What one call sends: the messages, the tools offered, options, whether to stream,
    the model, and the run parameters each adapter maps to its native fields.

    ``messages`` leaves out empty assistant turns and begins with the
    parameters' ``instructions`` as a system message (see :meth:`Provider.complete`);
    ``parameters`` are checked against what the adapter can honour.
    """

    messages: tuple[ChatMessage, ...]
    tools: tuple[ToolSpec, ...]
    options: dict[str, Any]
    stream: bool
    model: str = ""
    parameters: RunParameters = field(default_factory=RunParameters)
    # The run's deadline and stop, checked while the call waits (providers/interrupts.py).
    interrupt: Interrupt = NO_INTERRUPT


class Provider(HttpTransport, ReplyBuilding, ErrorReports, KeyRedaction):
    """One configured model behind one wire protocol.

    ``options`` are default request options, overridden per call by the
    keyword arguments of :meth:`complete` and :meth:`stream`. ``sleep`` is the
    function used between retries (tests pass a recorder). ``streams=False``
    makes runs call it without streaming (a ``PROVIDERS`` entry's ``STREAM``:
    for a server that cannot stream); ``compaction=True`` asks a protocol that
    :attr:`compacts` to compact long conversations (``CONTEXT_STRATEGY: "compact"``). Instances are safe
    to share between threads.
    """

    backend: ClassVar[str] = ""
    default_base_url: ClassVar[str] = ""
    uses_http: ClassVar[bool] = True
    parameter_support: ClassVar[ParameterSupport] = ParameterSupport()
    """The run parameters this adapter maps; a subclass that declares none
    honours only ``instructions`` and ``model``."""
    compacts: ClassVar[bool] = False
    """Whether the protocol compacts a long conversation server-side (the
    ``compact`` context strategy), replying with its compacted state."""

    def __init__(
        self,
        *,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        max_retry_after: float = DEFAULT_MAX_RETRY_AFTER,
        max_reply_chars: int | None = None,
        http_client: httpx.Client | None = None,
        sleep: Callable[[float], None] | None = None,
        models: Iterable[str] = (),
        streams: bool = True,
        compaction: bool = False,
        **options: Any,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ValueError(f"{type(self).__name__} needs a non-empty model name.")
        self.model = model
        # The models a call may ask for: the configured one and the entry's MODELS.
        self.models: tuple[str, ...] = (model, *(m for m in models if m != model))
        self._api_key = api_key or None
        self.base_url = (base_url or self.default_base_url).rstrip("/")
        self.timeout = float(timeout)
        # Connecting is part of an attempt, so it never gets longer than one.
        self.connect_timeout = min(float(connect_timeout), self.timeout)
        self.max_retries = max(0, int(max_retries))
        self.max_retry_after = float(max_retry_after)
        self._max_reply_chars = max_reply_chars
        # Whether runs call it in streaming mode: a PROVIDERS entry's STREAM.
        self.streams = streams
        # Whether calls ask the provider to compact: the entry's "compact" strategy.
        self.compaction = compaction and self.compacts
        self.options: dict[str, Any] = dict(options)
        self._sleep = sleep or time.sleep
        self._owns_client = http_client is None and self.uses_http
        self._client: httpx.Client | None = http_client
        if self._owns_client:
            self._client = httpx.Client(timeout=self._timeouts())

    @property
    def max_reply_chars(self) -> int:
        """The longest reply text or arguments text accepted.

        The constructor's ``max_reply_chars``, else the ``MAX_REPLY_CHARS``
        setting, read per call so ``override_settings`` applies.
        """
        if self._max_reply_chars is not None:
            return self._max_reply_chars
        return conf.MAX_REPLY_CHARS

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    def close(self) -> None:
        """Close the pooled client if this instance created it."""
        if self._owns_client and self._client is not None:
            self._client.close()

    def __enter__(self) -> Provider:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # Public API -----------------------------------------------------------

    def complete(
        self,
        messages: Iterable[MessageInput],
        *,
        tools: Iterable[ToolInput] | None = None,
        parameters: RunParameters | RunParameterInput | None = None,
        interrupt: Interrupt = NO_INTERRUPT,
        **options: Any,
    ) -> CompletionResponse:
        """Send the conversation and return the parsed reply.

        ``parameters`` (a :class:`RunParameters` or a dict by name) are mapped
        to this adapter's native fields over ``options``; one it cannot honour
        raises :class:`ParameterError` before anything is sent. ``options`` are
        sent as this adapter's own request fields (see ``docs/providers.md``).
        ``interrupt`` (a run's deadline and stop) ends the call early with
        :class:`~llm_conversations.exceptions.CallInterrupted`.
        """
        request = self._request(messages, tools, options, parameters, stream=False)
        request = replace(request, interrupt=interrupt)
        with self._traced(request) as traced:
            response = self.send(request)
            traced.response(response)
        return response

    def stream(
        self,
        messages: Iterable[MessageInput],
        *,
        tools: Iterable[ToolInput] | None = None,
        parameters: RunParameters | RunParameterInput | None = None,
        interrupt: Interrupt = NO_INTERRUPT,
        **options: Any,
    ) -> Iterator[StreamEvent]:
        """Send the conversation and yield events as the reply arrives.

        Failures before the first byte are retried like :meth:`complete`;
        a stream broken halfway, or ending without its protocol's end marker,
        raises :class:`ProviderUnavailableError`. Text beyond
        ``max_reply_chars`` raises :class:`InvalidResponseError` at once.
        """
        request = self._request(messages, tools, options, parameters, stream=True)
        request = replace(request, interrupt=interrupt)
        return telemetry.traced_stream(
            lambda: self._traced(request),
            lambda: self.send_stream(request),
            lambda event: event.response if isinstance(event, ResponseCompleted) else None,
        )

    def _traced(self, request: CompletionRequest) -> AbstractContextManager[telemetry.ModelCall]:
        """The telemetry span of one call (``telemetry.model_call``)."""
        return telemetry.model_call(
            self.backend,
            request.model,
            request.messages,
            stream=request.stream,
            base_url=self.base_url if self.uses_http else "",
            parameters=request.parameters,
        )

    def send(self, request: CompletionRequest) -> CompletionResponse:
        """Make the call :meth:`complete` describes (a hook for providers without HTTP)."""
        path, body = self.build_request(request)
        response, content = self._post(path, body, stream=False, interrupt=request.interrupt)
        data = self._decode(response, content)
        try:
            return self.parse_response(data, request.messages)
        except (KeyError, IndexError, TypeError, AttributeError, InvalidMessage) as exc:
            raise self._bad_response(exc) from None

    def send_stream(self, request: CompletionRequest) -> Iterator[StreamEvent]:
        """Make the call :meth:`stream` describes (a hook for providers without HTTP).

        A provider without HTTP that implements only :meth:`send` streams its
        whole reply as one piece.
        """
        if not self.uses_http:
            yield from whole_reply_stream(self.send(request))
            return
        path, body = self.build_request(request)
        response, _ = self._post(path, body, stream=True, interrupt=request.interrupt)
        text_chars = 0
        try:
            for event in self.parse_stream(response, request.messages):
                if isinstance(event, TextDelta):
                    # Checked as text arrives, so an endless reply stops being read.
                    text_chars += len(event.text)
                    self.check_size(text_chars, "text")
                yield event
        except httpx.TimeoutException:
            raise ProviderTimeout(
                f"{self.backend}: the stream stalled for more than {self.timeout:g}s.",
                provider=self.backend,
            ) from None
        except (httpx.TransportError, httpx.DecodingError) as exc:
            raise ProviderUnavailableError(
                f"{self.backend}: the stream broke ({type(exc).__name__}).",
                provider=self.backend,
            ) from None
        except (KeyError, IndexError, TypeError, AttributeError, ValueError, RecursionError) as exc:
            raise self._bad_response(exc) from None
        finally:
            response.close()

    def check_parameters(
        self,
        parameters: RunParameters,
        *,
        name: str | None = None,
        tools: Collection[str] | None = None,
    ) -> None:
        """Refuse parameters this provider cannot honour, with a :class:`ParameterError`.

        ``name`` is the provider's key in ``PROVIDERS``, for the message;
        ``tools`` the names of the tools offered, which a ``tool_choice`` must
        name (not checked when ``None``).
        """
        label = repr(self.backend) if name in (None, self.backend) else f"{name!r} ({self.backend})"
        self.parameter_support.check(parameters, label, models=self.models, tools=tools)

    def _request(
        self,
        messages: Iterable[MessageInput],
        tools: Iterable[ToolInput] | None,
        options: Mapping[str, Any],
        parameters: RunParameters | RunParameterInput | None,
        *,
        stream: bool,
    ) -> CompletionRequest:
        # An empty reply (a refusal, a cut-off) is kept in the conversation but
        # tells a model nothing, and several protocols refuse an empty turn. One
        # that carries this backend's compacted state is kept: the state is sent.
        chat = as_chat_messages(messages)
        sent = tuple(
            m
            for m in chat
            if m.content
            or m.tool_calls
            or m.role is not Role.ASSISTANT
            or compactions(m.reasoning, self.backend)
        )
        specs = tuple(as_tool_specs(tools))
        chosen = RunParameters.from_input(parameters)
        if not specs:
            # A call offered no tools (a run's closing call) has no tool choice to send.
            chosen = chosen.without_tools()
        self.check_parameters(chosen, tools=[spec.name for spec in specs])
        if chosen.instructions:
            sent = (ChatMessage.system(chosen.instructions), *sent)
        return CompletionRequest(
            sent,
            specs,
            {**self.options, **options},
            stream,
            model=chosen.model or self.model,
            parameters=chosen,
        )

    # Hooks ----------------------------------------------------------------

    def build_request(self, request: CompletionRequest) -> tuple[str, dict[str, Any]]:
        """The URL path (after ``base_url``) and JSON body of one call."""
        raise NotImplementedError

    def auth_headers(self) -> dict[str, str]:
        """Headers that carry the API key (a Bearer token unless overridden).

        Built per request, never stored on the client.
        """
        return {"authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    def parse_response(
        self, data: Mapping[str, Any], messages: Sequence[ChatMessage]
    ) -> CompletionResponse:
        """Read a decoded response body into a :class:`CompletionResponse`."""
        raise NotImplementedError

    def parse_stream(
        self, response: httpx.Response, messages: Sequence[ChatMessage]
    ) -> Iterator[StreamEvent]:
        """Yield events from an open streaming response."""
        raise NotImplementedError
