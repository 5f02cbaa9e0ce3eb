"""Server-Sent Events for runs of the tool loop, all rendered from the run's event log.

Each logged event becomes one SSE message: ``id: <RunEvent id>``, ``event:
<type>`` and one ``data:`` line holding a JSON object that always includes
``run_id``. A client that loses a stream reattaches with ``GET
runs/{id}/events/`` and ``Last-Event-ID``: it gets exactly the events after
that id.

Two kinds of streams:

- a foreground stream (``POST runs/``, approve, deny, submit with ``stream:
  true``) executes the run in the request. After each step of the loop it sends
  what the step logged (the loop logs every event before it yields it), so the
  live stream and a replay of the log are the same messages. If the client
  goes away the run is finished without streaming, so no turn is left half
  done and no call is left unanswered. Under ASGI the same generator is
  stepped in a thread through ``sync_to_async``.
- a log stream (``GET runs/{id}/events/``, and a background start with
  ``stream: true``) follows the log while the run executes elsewhere, sending
  a ``: keep-alive`` comment every ``SSE_HEARTBEAT_SECONDS`` while it waits.
  Under ASGI it is an async iterator that holds no thread while it waits.

Both end after the event that says where the run stopped: ``run.completed``,
``run.failed``, ``run.cancelled`` or ``run.requires_action``.

The same streams speak the AI SDK's UI message stream protocol when the
request asks for it (``?format=ai-sdk`` or its header): :class:`StreamFormat`
chooses the rendering, :mod:`llm_conversations.api.ai_sdk` holds it; and
AG-UI's events with ``?format=ag-ui`` (:mod:`llm_conversations.api.ag_ui`).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterator, Generator, Iterator, Mapping
from typing import Any, cast

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.db import connections
from django.http import HttpRequest, StreamingHttpResponse
from rest_framework.renderers import BaseRenderer
from rest_framework.utils.encoders import JSONEncoder

from llm_conversations.api import ag_ui, ai_sdk
from llm_conversations.api.representations import message_data, message_row
from llm_conversations.api.serializers import RunSerializer
from llm_conversations.conf import conf
from llm_conversations.models import Run, RunEventType, RunStatus
from llm_conversations.runs import ToolLoopService, events
from llm_conversations.runs import event_reader as run_events

__all__ = [
    "EVENT_STREAM",
    "HEARTBEAT",
    "AsyncEventStream",
    "EventStreamRenderer",
    "RunEventStream",
    "RunStream",
    "StreamFormat",
    "encode_event",
    "event_stream_response",
    "log_stream_response",
    "render_page",
    "wants_stream",
]

logger = logging.getLogger("llm_conversations.api")

EVENT_STREAM = "text/event-stream"
HEARTBEAT = b": keep-alive\n\n"
# What a tool_call.progress event carries (runs/tool_contexts.py).
PROGRESS_KEYS = ("tool_call_id", "text", "fraction")
# What a run.fallback says: the entries left and taken, why, the HTTP status.
FALLBACK_KEYS = ("from_entry", "to_entry", "reason", "status_code")


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
    """``stream: true`` in the body, an ``Accept`` header asking for an event stream, or
    the AI SDK's or AG-UI's format (streams by definition)."""
    return (
        requested
        or EVENT_STREAM in request.headers.get("Accept", "")
        or ai_sdk.wants_ai_sdk(request)
        or ag_ui.wants_ag_ui(request)
    )


def encode_event(name: str, data: dict[str, Any], event_id: int | None = None) -> bytes:
    """One SSE message; JSON escapes newlines, so ``data`` fits on one line."""
    payload = json.dumps(data, cls=JSONEncoder, ensure_ascii=False, separators=(",", ":"))
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {name}\ndata: {payload}\n\n".encode()


def render_page(page: run_events.Page) -> bytes:
    """The SSE messages of a page of logged events; no query (the page holds what they name)."""
    chunks = []
    run_data: Any = None
    for event in page.events:
        if event.id in page.superseded:
            continue  # a lost attempt's text, answered again by a later one
        name = RunEventType(event.type)
        data: dict[str, Any] = {"run_id": str(event.run_id)}
        logged = event.data if isinstance(event.data, dict) else {}
        if name is RunEventType.TEXT_DELTA:
            data["delta"] = logged.get("delta", "")
        elif name is RunEventType.TOOL_CALL_STARTED:
            data["tool_call"] = logged.get("tool_call")
        elif name is RunEventType.TOOL_CALL_PROGRESS:
            data["progress"] = {key: logged.get(key) for key in PROGRESS_KEYS}
        elif name in (RunEventType.TOOL_RESULT_STORED, RunEventType.MESSAGE_STORED):
            row = page.messages.get(str(logged.get("message")))
            if row is not None:
                data["message"] = message_data(message_row(row))
        else:
            for key in ("attempt", "superseded_after", *FALLBACK_KEYS):
                if key in logged:
                    data[key] = logged[key]
            if page.run is not None:
                run_data = run_data or RunSerializer(page.run).data
                data["run"] = run_data
        chunks.append(encode_event(name, data, event.id))
    return b"".join(chunks)


def _state_event(run_id: Any) -> bytes:
    """Where the run stands, for a stream whose steps logged no final event."""
    run = Run.objects.get(pk=run_id)
    name = RunStatus(run.status).end_event or RunEventType.RUN_REQUIRES_ACTION
    return encode_event(name, {"run_id": str(run_id), "run": RunSerializer(run).data})


class StreamFormat:
    """How one response renders the log: this module's events, the AI SDK's chunks, or
    AG-UI's events."""

    def __init__(
        self, run_id: Any, *, ai_sdk_format: bool = False, ag_ui_format: bool = False
    ) -> None:
        self.ai_sdk = ai_sdk.UIMessageStream(run_id) if ai_sdk_format else None
        self.ag_ui = ag_ui.AgUiStream(run_id) if ag_ui_format and not ai_sdk_format else None
        self._other: ai_sdk.UIMessageStream | ag_ui.AgUiStream | None = self.ai_sdk or self.ag_ui

    @classmethod
    def of(cls, request: HttpRequest, run_id: Any, ai_sdk_format: bool | None) -> StreamFormat:
        """``ai_sdk_format``, or when ``None`` the format the request asks for."""
        if ai_sdk_format is None:
            ai_sdk_format = ai_sdk.wants_ai_sdk(request)
        ag_ui_format = not ai_sdk_format and ag_ui.wants_ag_ui(request)
        return cls(run_id, ai_sdk_format=ai_sdk_format, ag_ui_format=ag_ui_format)

    def resume(self, after_id: int) -> None:
        """The response starts after ``after_id``: the events up to it were sent before."""
        if self._other is not None:
            self._other.prime(after_id)

    def render(self, page: run_events.Page) -> bytes:
        return render_page(page) if self._other is None else self._other.render(page)

    def state(self, run_id: Any) -> bytes:
        """The end of a stream whose run stopped without logging it in this stream."""
        return _state_event(run_id) if self._other is None else self._other.state(run_id)

    def end(self) -> bytes:
        """What closes the response (the AI SDK's ``[DONE]``, a run AG-UI left open)."""
        return b"" if self._other is None else self._other.end()


def _go_on_unfollowed(steps: Iterator[Any], run_id: Any) -> None:
    """The client went away: only its following ends. The execution goes on here to
    its end, the call in flight included (never asked again), its log followed by
    whoever reattaches."""
    try:
        for _ in steps:
            pass
    except Exception:
        logger.exception("Run %s failed after its client disconnected", run_id)


def _logged(run_id: Any, after_id: int) -> Iterator[run_events.Page]:
    """Every page logged after ``after_id`` so far, up to one that ends a stream."""
    while True:
        page = run_events.read_page(run_id, after_id)
        if not page.events:
            return
        yield page
        after_id = page.events[-1].id
        if page.ended:
            return


def _generate(
    service: ToolLoopService, run_id: Any, fmt: StreamFormat
) -> Generator[bytes, None, None]:
    # Events logged before this request (an earlier part of the run) were sent by then.
    after_id = run_events.last_event_id(run_id)
    fmt.resume(after_id)
    stream = cast(Generator[events.LoopEvent, None, None], service.events(run_id))
    try:
        ended = False
        for _ in stream:
            # The loop logged this step (and any before it) before yielding it.
            for page in _logged(run_id, after_id):
                after_id = page.events[-1].id
                ended = ended or page.ended
                yield fmt.render(page)
        if not ended:
            # Stopped elsewhere (a cancel), or nothing to execute: what was logged, then the state.
            for page in _logged(run_id, after_id):
                after_id = page.events[-1].id
                ended = ended or page.ended
                yield fmt.render(page)
        executing = [status for status in RunStatus if status.executing]
        if not ended and Run.objects.filter(pk=run_id, status__in=executing).exists():
            # Another worker took the run over (this execution's lease lapsed):
            # follow its execution in the log rather than make up an end.
            heartbeat = conf.SSE_HEARTBEAT_SECONDS
            for followed in run_events.follow(run_id, after_id, heartbeat=heartbeat):
                if followed is None:
                    yield HEARTBEAT
                    continue
                ended = ended or followed.ended
                yield fmt.render(followed)
        if not ended:
            yield fmt.state(run_id)
        if closing := fmt.end():
            yield closing
    except GeneratorExit:
        _go_on_unfollowed(stream, run_id)
        raise


class RunEventStream:
    """Executes a run while yielding its SSE messages.

    Closing the stream before its end (the client disconnected) finishes the
    run without streaming, whether or not iteration had started.
    """

    def __init__(
        self, service: ToolLoopService, run_id: Any, fmt: StreamFormat | None = None
    ) -> None:
        self._service = service
        self._run_id = run_id
        self._generator = _generate(service, run_id, fmt or StreamFormat(run_id))
        self._started = False

    def __iter__(self) -> RunEventStream:
        return self

    def __next__(self) -> bytes:
        self._started = True
        return next(self._generator)

    def close(self) -> None:
        """Stop streaming; a run still executing goes on to its end first."""
        if not self._started:
            self._started = True
            _go_on_unfollowed(self._service.events(self._run_id), self._run_id)
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


class RunStream(StreamingHttpResponse):
    """An event stream of one run (``run_id``)."""

    def __init__(self, content: Any, run_id: Any) -> None:
        super().__init__(content, content_type=EVENT_STREAM)
        self.run_id = run_id


def _streaming(content: Any, run_id: Any, fmt: StreamFormat) -> RunStream:
    response = RunStream(content, run_id)
    if fmt.ai_sdk is not None:
        response[ai_sdk.PROTOCOL_HEADER] = ai_sdk.PROTOCOL_VERSION
    response["Cache-Control"] = "no-cache"
    # Before any event names it (a queued run logs none until a worker claims
    # it), so a client whose stream drops can still reattach on events/.
    response["X-Run-Id"] = str(run_id)
    # nginx buffers proxied responses unless told not to.
    response["X-Accel-Buffering"] = "no"
    return response


def event_stream_response(
    request: HttpRequest,
    service: ToolLoopService,
    run_id: Any,
    *,
    ai_sdk_format: bool | None = None,
) -> RunStream:
    """A streaming response executing the run, async under ASGI and sync under WSGI.

    The format is the request's unless ``ai_sdk_format`` says (:meth:`StreamFormat.of`).
    """
    fmt = StreamFormat.of(request, run_id, ai_sdk_format)
    stream = RunEventStream(service, run_id, fmt)
    content: Any = AsyncEventStream(stream) if isinstance(request, ASGIRequest) else stream
    return _streaming(content, run_id, fmt)


def _follow_log(run_id: uuid.UUID | str, after_id: int, fmt: StreamFormat) -> Iterator[bytes]:
    fmt.resume(after_id)
    for page in run_events.follow(run_id, after_id, heartbeat=conf.SSE_HEARTBEAT_SECONDS):
        yield HEARTBEAT if page is None else fmt.render(page)
    if closing := fmt.end():
        yield closing


def _release_connections() -> None:
    # The request's thread is done with the database (authentication, the
    # run's lookup): its connection goes back now (to the pool, or closed),
    # not when the stream ends minutes later.
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close()


async def _afollow_log(
    run_id: uuid.UUID | str, after_id: int, heartbeat: float, fmt: StreamFormat
) -> AsyncIterator[bytes]:
    await sync_to_async(_release_connections)()
    await sync_to_async(fmt.resume, thread_sensitive=False)(after_id)
    async for page in run_events.afollow(run_id, after_id, heartbeat=heartbeat):
        yield HEARTBEAT if page is None else fmt.render(page)
    if closing := fmt.end():
        yield closing


def log_stream_response(
    request: HttpRequest,
    run_id: uuid.UUID | str,
    after_id: int,
    *,
    ai_sdk_format: bool | None = None,
) -> StreamingHttpResponse:
    """A streaming response following the run's log after ``after_id``, executing nothing.

    Under ASGI an async iterator (it holds no thread while it waits); under
    WSGI a generator (its worker thread waits). The format as for
    :func:`event_stream_response`.
    """
    fmt = StreamFormat.of(request, run_id, ai_sdk_format)
    if isinstance(request, ASGIRequest):
        heartbeat = conf.SSE_HEARTBEAT_SECONDS
        return _streaming(_afollow_log(run_id, after_id, heartbeat, fmt), run_id, fmt)
    return _streaming(_follow_log(run_id, after_id, fmt), run_id, fmt)
