"""The one choice of a response's stream format: DRF's content negotiation.

Each format has a DRF renderer that carries its :class:`LogRenderer` class:
``Accept: text/event-stream`` chooses the default events, ``?format=ai-sdk``
(or the AI SDK's header, which :class:`StreamNegotiation` reads) the AI SDK's
chunks, ``?format=ag-ui`` AG-UI's events. The stream views render what the
request negotiated (:func:`stream_format`); responses that are not streams
(errors, runs) stay JSON.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, ClassVar

from django.http import HttpRequest
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.utils.encoders import JSONEncoder

from llm_conversations.api.streams.ag_ui import AG_UI_FORMAT, AgUiStream
from llm_conversations.api.streams.ai_sdk import (
    AI_SDK_FORMAT,
    PROTOCOL_HEADER,
    PROTOCOL_VERSION,
    AiSdkStream,
)
from llm_conversations.api.streams.base import LogRenderer
from llm_conversations.api.streams.events import EventsStream

__all__ = [
    "EVENT_STREAM",
    "FORMATS",
    "STREAM_RENDERERS",
    "AgUiRenderer",
    "AiSdkRenderer",
    "EventStreamRenderer",
    "StreamNegotiation",
    "StreamRenderer",
    "stream_format",
    "wants_stream",
]

EVENT_STREAM = "text/event-stream"


class StreamRenderer(BaseRenderer):
    """A stream format in DRF's content negotiation; the stream views build the stream.

    An ordinary response negotiated to it (an error before the stream starts)
    is sent as JSON instead.
    """

    media_type = EVENT_STREAM
    charset = "utf-8"
    stream_class: ClassVar[type[LogRenderer]]

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Any = None,
    ) -> bytes:
        return json.dumps(data, cls=JSONEncoder).encode()


class EventStreamRenderer(StreamRenderer):
    """The default events (``Accept: text/event-stream``)."""

    format = "sse"
    stream_class = EventsStream


class AiSdkRenderer(StreamRenderer):
    """The AI SDK's UI message stream (``?format=ai-sdk`` or its header)."""

    format = AI_SDK_FORMAT
    stream_class = AiSdkStream


class AgUiRenderer(StreamRenderer):
    """AG-UI's events (``?format=ag-ui``)."""

    format = AG_UI_FORMAT
    stream_class = AgUiStream


# The first one answers a plain ``Accept: text/event-stream``.
STREAM_RENDERERS: tuple[type[StreamRenderer], ...] = (
    EventStreamRenderer,
    AiSdkRenderer,
    AgUiRenderer,
)
FORMATS: dict[str, type[LogRenderer]] = {
    cls.stream_class.format: cls.stream_class for cls in STREAM_RENDERERS
}
"""Each format's renderer by its name (``events``, ``ai-sdk``, ``ag-ui``)."""


class StreamNegotiation(DefaultContentNegotiation):
    """DRF's negotiation, and the AI SDK's protocol header, which asks for its format."""

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        renderers = list(renderers)
        if request.headers.get(PROTOCOL_HEADER) == PROTOCOL_VERSION and not format_suffix:
            for renderer in renderers:
                if isinstance(renderer, AiSdkRenderer):
                    return renderer, renderer.media_type
        chosen: tuple[BaseRenderer, str] = super().select_renderer(
            request, renderers, format_suffix
        )
        return chosen


def stream_format(request: Request | HttpRequest) -> type[LogRenderer]:
    """The format the request negotiated; the default events unless it chose another."""
    renderer = getattr(request, "accepted_renderer", None)
    return renderer.stream_class if isinstance(renderer, StreamRenderer) else EventsStream


def wants_stream(request: Request, requested: bool) -> bool:
    """``stream: true`` in the body, or a stream format negotiated (``Accept:
    text/event-stream``, the AI SDK's or AG-UI's format: streams by definition)."""
    return requested or isinstance(getattr(request, "accepted_renderer", None), StreamRenderer)
