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
import time
from collections.abc import AsyncIterator, Generator, Iterator, Mapping
from enum import StrEnum
from typing import Any, cast

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, StreamingHttpResponse
from rest_framework.renderers import BaseRenderer
from rest_framework.utils.encoders import JSONEncoder

from llm_conversations.api.representations import message_data, message_row
from llm_conversations.api.serializers import RunSerializer
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
    "RunEventName",
    "RunEventStream",
    "encode_event",
    "event_stream_response",
    "wants_stream",
]

logger = logging.getLogger("llm_conversations.api")

EVENT_STREAM = "text/event-stream"

# While text streams in, the run's status is read at most this often (seconds):
# a run cancelled by another request ends its stream at the next delta after it.
STATUS_CHECK_SECONDS = 0.25


class RunEventName(StrEnum):
    """The ``event:`` name of every event a run's stream sends, in the order they come.

    The ``run.*`` events end a stream: exactly one of them is the last event.
    """

    TEXT_DELTA = "text.delta"
    TOOL_CALL_STARTED = "tool_call.started"
    TOOL_RESULT_STORED = "tool_result.stored"
    MESSAGE_STORED = "message.stored"
    RUN_REQUIRES_ACTION = "run.requires_action"
    RUN_COMPLETED = "run.completed"
    RUN_FAILED = "run.failed"
    RUN_CANCELLED = "run.cancelled"

    @property
    def ends_stream(self) -> bool:
        """Whether this event says where the run stands and ends the stream."""
        return self.value.startswith("run.")


# The terminal event for a run that ended (or paused) without the loop saying so.
_STATE_EVENTS = {
    RunStatus.REQUIRES_ACTION: RunEventName.RUN_REQUIRES_ACTION,
    RunStatus.COMPLETED: RunEventName.RUN_COMPLETED,
    RunStatus.FAILED: RunEventName.RUN_FAILED,
    RunStatus.CANCELLED: RunEventName.RUN_CANCELLED,
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


def _describe(event: LoopEvent, run_id: str) -> tuple[RunEventName, dict[str, Any]]:
    match event:
        case TextDelta(text=text):
            return RunEventName.TEXT_DELTA, {"run_id": run_id, "delta": text}
        case ToolCallStarted(tool_call=call):
            return RunEventName.TOOL_CALL_STARTED, {"run_id": run_id, "tool_call": call.to_wire()}
        case ToolResultStored(message=row):
            message = message_data(message_row(row))
            return RunEventName.TOOL_RESULT_STORED, {"run_id": run_id, "message": message}
        case MessageStored(message=row):
            message = message_data(message_row(row))
            return RunEventName.MESSAGE_STORED, {"run_id": run_id, "message": message}
        case RunRequiresAction(run=run):
            return RunEventName.RUN_REQUIRES_ACTION, {
                "run_id": run_id,
                "run": RunSerializer(run).data,
            }
        case RunCompleted(run=run):
            return RunEventName.RUN_COMPLETED, {"run_id": run_id, "run": RunSerializer(run).data}
        case RunFailed(run=run):
            return RunEventName.RUN_FAILED, {"run_id": run_id, "run": RunSerializer(run).data}
    raise TypeError(f"unknown loop event {event!r}")  # pragma: no cover


def _finish_quietly(service: ToolLoopService, run_id: Any) -> None:
    try:
        # The client went away: run to the end without streaming, so the
        # conversation is left valid (every call answered, every reply stored).
        service.execute(run_id)
    except Exception:
        logger.exception("Finishing run %s after the client disconnected failed", run_id)


def _still_running(run_id: Any) -> bool:
    status = Run.objects.filter(pk=run_id).values_list("status", flat=True).first()
    return status == RunStatus.RUNNING


def _generate(service: ToolLoopService, run_id: Any) -> Generator[bytes, None, None]:
    key = str(run_id)
    events = cast(Generator[LoopEvent, None, None], service.events(run_id, stream=True))
    try:
        ended = False
        checked = time.monotonic()
        for event in events:
            if isinstance(event, TextDelta) and time.monotonic() - checked >= STATUS_CHECK_SECONDS:
                checked = time.monotonic()
                if not _still_running(run_id):
                    # Cancelled meanwhile: stop the reply; the run's own event ends the stream.
                    events.close()
                    break
            name, data = _describe(event, key)
            ended = ended or name.ends_stream
            yield encode_event(name, data)
        if not ended:
            # Nothing to execute (the run waits or was cancelled meanwhile): say where it stands.
            run = Run.objects.get(pk=run_id)
            name = _STATE_EVENTS.get(RunStatus(run.status), RunEventName.RUN_REQUIRES_ACTION)
            yield encode_event(name, {"run_id": key, "run": RunSerializer(run).data})
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
