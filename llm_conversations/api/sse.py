"""Server-Sent Events for runs of the tool loop.

Each loop event becomes one SSE message: ``event: <name>`` and one ``data:``
line holding a JSON object that always includes ``run_id``. The stream ends
with exactly one ``run.*`` event saying where the run stands.

The run is executed by the response iterator itself, in the request. If the
client goes away mid-stream the server closes the iterator; the run is then
finished without streaming, so no turn is left half done and no call is left
unanswered. Under ASGI the same generator is stepped in a thread through
``sync_to_async``, so Django streams instead of buffering the whole response.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Generator, Iterator, Mapping
from typing import Any, cast

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, StreamingHttpResponse
from rest_framework.renderers import BaseRenderer
from rest_framework.utils.encoders import JSONEncoder

from llm_conversations.api.representations import message_data, message_row, run_data
from llm_conversations.models import Run, RunStatus
from llm_conversations.services import ToolLoopService
from llm_conversations.services.events import (
    LoopEvent,
    MessageStored,
    RunCompleted,
    RunFailed,
    RunRequiresAction,
    TextDelta,
    ToolCallStarted,
    ToolResultStored,
)

__all__ = [
    "EVENT_STREAM",
    "AsyncEventStream",
    "EventStreamRenderer",
    "RunEventStream",
    "encode_event",
    "event_stream_response",
    "wants_stream",
]

logger = logging.getLogger("llm_conversations.api")

EVENT_STREAM = "text/event-stream"

# The terminal event for a run that ended (or paused) without the loop saying so.
_STATE_EVENTS = {
    RunStatus.REQUIRES_ACTION: "run.requires_action",
    RunStatus.COMPLETED: "run.completed",
    RunStatus.FAILED: "run.failed",
    RunStatus.CANCELLED: "run.cancelled",
}


class EventStreamRenderer(BaseRenderer):
    """Lets clients send ``Accept: text/event-stream``.

    Streams are built by the views; any ordinary response negotiated to this
    renderer (an error before the stream starts) is sent as JSON instead.
    """

    media_type = EVENT_STREAM
    format = "sse"
    charset = "utf-8"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        return json.dumps(data, cls=JSONEncoder).encode()


def wants_stream(request: HttpRequest, requested: bool) -> bool:
    """``stream: true`` in the body, or an ``Accept`` header asking for an event stream."""
    return requested or EVENT_STREAM in request.headers.get("Accept", "")


def encode_event(name: str, data: dict[str, Any]) -> bytes:
    """One SSE message; JSON escapes newlines, so ``data`` fits on one line."""
    payload = json.dumps(data, cls=JSONEncoder, ensure_ascii=False, separators=(",", ":"))
    return f"event: {name}\ndata: {payload}\n\n".encode()


def _describe(event: LoopEvent, run_id: str) -> tuple[str, dict[str, Any]]:
    match event:
        case TextDelta(text=text):
            return "text.delta", {"run_id": run_id, "delta": text}
        case ToolCallStarted(tool_call=call):
            return "tool_call.started", {"run_id": run_id, "tool_call": call.to_wire()}
        case ToolResultStored(message=row):
            return "tool_result.stored", {
                "run_id": run_id,
                "message": message_data(message_row(row)),
            }
        case MessageStored(message=row):
            return "message.stored", {"run_id": run_id, "message": message_data(message_row(row))}
        case RunRequiresAction(run=run):
            return "run.requires_action", {"run_id": run_id, "run": run_data(run)}
        case RunCompleted(run=run):
            return "run.completed", {"run_id": run_id, "run": run_data(run)}
        case RunFailed(run=run):
            return "run.failed", {"run_id": run_id, "run": run_data(run)}
    raise TypeError(f"unknown loop event {event!r}")  # pragma: no cover


def _finish_quietly(service: ToolLoopService, run_id: Any) -> None:
    try:
        # The client went away: run to the end without streaming, so the
        # conversation is left valid (every call answered, every reply stored).
        service.execute(run_id)
    except Exception:
        logger.exception("Finishing run %s after the client disconnected failed", run_id)


def _generate(service: ToolLoopService, run_id: Any) -> Generator[bytes, None, None]:
    key = str(run_id)
    events = cast(Generator[LoopEvent, None, None], service.events(run_id, stream=True))
    try:
        ended = False
        for event in events:
            name, data = _describe(event, key)
            ended = ended or name.startswith("run.")
            yield encode_event(name, data)
        if not ended:
            # Nothing to execute (the run waits or was cancelled meanwhile): say where it stands.
            run = Run.objects.get(pk=run_id)
            name = _STATE_EVENTS.get(RunStatus(run.status), "run.requires_action")
            yield encode_event(name, {"run_id": key, "run": run_data(run)})
    except GeneratorExit:
        events.close()
        _finish_quietly(service, run_id)
        raise


class RunEventStream:
    """Executes a run while yielding its SSE messages.

    Closing the stream before its end (the client disconnected) finishes the
    run without streaming, whether or not iteration had started.
    """

    def __init__(self, service: ToolLoopService, run_id: Any) -> None:
        self._service = service
        self._run_id = run_id
        self._generator = _generate(service, run_id)
        self._started = False

    def __iter__(self) -> RunEventStream:
        return self

    def __next__(self) -> bytes:
        self._started = True
        return next(self._generator)

    def close(self) -> None:
        """Stop streaming; a run still in progress is finished first."""
        if not self._started:
            self._started = True
            _finish_quietly(self._service, self._run_id)
        self._generator.close()


_DONE = object()


def _step(iterator: Iterator[bytes]) -> Any:
    return next(iterator, _DONE)


class AsyncEventStream:
    """An async iterator over :func:`run_event_stream`, one step at a time in a thread.

    Django serves sync iterators under ASGI by reading them to the end first;
    this keeps each event flowing as it happens. ``close()`` lets Django's
    ``response.close()`` finish the run when iteration stopped early.
    """

    def __init__(self, iterator: RunEventStream) -> None:
        self._iterator = iterator

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[bytes]:
        # thread_sensitive: every step uses the same thread, hence the same
        # database connection.
        step = sync_to_async(_step, thread_sensitive=True)
        try:
            while (chunk := await step(self._iterator)) is not _DONE:
                yield chunk
        finally:
            await sync_to_async(self.close, thread_sensitive=True)()

    def close(self) -> None:
        """Close the generator; a run still in progress is finished first."""
        self._iterator.close()


def event_stream_response(
    request: HttpRequest, service: ToolLoopService, run_id: Any
) -> StreamingHttpResponse:
    """A streaming response executing the run, async under ASGI and sync under WSGI."""
    stream = RunEventStream(service, run_id)
    content: Any = AsyncEventStream(stream) if isinstance(request, ASGIRequest) else stream
    response = StreamingHttpResponse(content, content_type=EVENT_STREAM)
    response["Cache-Control"] = "no-cache"
    # nginx buffers proxied responses unless told not to.
    response["X-Accel-Buffering"] = "no"
    return response
