"""The responses that carry a run's stream, under WSGI and ASGI.

Two kinds, both rendered from the run's log in the format the request chose:

- an executing stream (``POST runs/``, approve, deny, submit with ``stream:
  true``) executes the run in the request and sends what each step logged
  (the loop logs every event before it yields it), so it is one follower of
  the log like any other, and the live stream and a replay of the log are the
  same messages. The response does not own the execution: a client that goes
  away ends only its following, and the execution goes on in this process to
  its end, the model call in flight included, logging as it goes for whoever
  reattaches. Under ASGI the same generator is stepped in a thread.
- a log stream (``GET runs/{id}/events/``, a background start with ``stream:
  true``, the chat's resume) follows the log while the run executes
  elsewhere, with a ``: keep-alive`` comment every ``SSE_HEARTBEAT_SECONDS``
  while it waits. Under ASGI it is an async iterator that holds no thread
  while it waits.

Both end after the event that says where the run stopped: ``run.completed``,
``run.failed``, ``run.cancelled`` or ``run.requires_action``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import AsyncIterator, Generator, Iterator
from typing import Any, cast

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.db import connection, connections
from django.http import HttpRequest, StreamingHttpResponse

from llm_conversations.api.streams.base import LogRenderer
from llm_conversations.api.streams.formats import EVENT_STREAM
from llm_conversations.conf import conf
from llm_conversations.models import Run, RunStatus
from llm_conversations.runs import ToolLoopService, events, leases
from llm_conversations.runs.log.followers import afollow, follow
from llm_conversations.runs.log.listener import listener
from llm_conversations.runs.log.pushes import Pushed, Waiter
from llm_conversations.runs.log.reader import Page, last_event_id, pushed_page, read_page
from llm_conversations.runs.log.writer import handed_batch

__all__ = [
    "HEARTBEAT",
    "AsyncRunStream",
    "ExecutingStream",
    "RunStream",
    "executing_stream_response",
    "log_stream_response",
]

logger = logging.getLogger("llm_conversations.api")

HEARTBEAT = b": keep-alive\n\n"


def _go_on_unfollowed(steps: Iterator[Any], run_id: Any) -> None:
    """The client went away: only its following ends. The execution goes on here to
    its end, the call in flight included (never asked again), its log followed by
    whoever reattaches."""
    try:
        for _ in steps:
            pass
    except Exception:
        logger.exception("Run %s failed after its client disconnected", run_id)


def _logged(run_id: Any, after_id: int) -> Iterator[Page]:
    """Every page logged after ``after_id`` so far, up to one that ends a stream."""
    while True:
        page = read_page(run_id, after_id)
        if not page.events:
            return
        yield page
        after_id = page.events[-1].id
        if page.ended:
            return


def _state(fmt: LogRenderer, run_id: Any) -> bytes:
    """The end of a response whose run stopped without logging its end in it."""
    return fmt.state(Run.objects.get(pk=run_id))


def _steps(
    run_id: Any,
    after_id: int,
    stream: Iterator[events.LoopEvent],
    waiter: Waiter,
    handed: Pushed | None = None,
) -> Iterator[Page]:
    """The pages each step of the execution logged, as they were pushed in this thread
    when committed; read from the log when a push is missing (the execution's writes
    in an outer transaction, a test's, commit only at its end). ``handed``: the
    start's batch, pushed before this stream subscribed."""
    for _ in stream:
        # The loop logged this step (and any before it) before yielding it.
        batches, read = waiter.take()
        if handed is not None:
            batches, handed = [handed, *batches], None
        for batch in batches:
            if batch.last_id <= after_id:
                continue
            if batch.after != after_id:
                read = True
                break
            page = pushed_page(batch)
            after_id = page.events[-1].id
            yield page
        if read or connection.in_atomic_block:
            for page in _logged(run_id, after_id):
                after_id = page.events[-1].id
                yield page


def _execute(service: ToolLoopService, run: Run, fmt: LogRenderer) -> Generator[bytes, None, None]:
    run_id = run.pk
    # Events logged before this request (an earlier part of the run) were sent by
    # then; a run never started, or started as it was stored, has none before.
    fresh = run.started_at is None or leases.holds(run)
    after_id = 0 if fresh else last_event_id(run_id)
    handed = handed_batch(run)
    fmt.prime(after_id)
    stream = cast(Generator[events.LoopEvent, None, None], service.events(run))
    try:
        ended = False
        with listener.subscribe(run_id, local=True) as waiter:
            for page in _steps(run_id, after_id, stream, waiter, handed):
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
            for followed in follow(run_id, after_id, heartbeat=heartbeat):
                if followed is None:
                    yield HEARTBEAT
                    continue
                ended = ended or followed.ended
                yield fmt.render(followed)
        if not ended:
            yield _state(fmt, run_id)
        if closing := fmt.end():
            yield closing
    except GeneratorExit:
        _go_on_unfollowed(stream, run_id)
        raise


class ExecutingStream:
    """Executes a run while yielding its stream.

    Closing it before its end (the client disconnected) lets the execution go
    on to its end first, whether or not iteration had started.
    """

    def __init__(self, service: ToolLoopService, run: Run, fmt: LogRenderer) -> None:
        self._service = service
        self._run = run
        self._generator = _execute(service, run, fmt)
        self._started = False

    def __iter__(self) -> ExecutingStream:
        return self

    def __next__(self) -> bytes:
        self._started = True
        return next(self._generator)

    def close(self) -> None:
        """Stop streaming; a run still executing goes on to its end first."""
        if not self._started:
            self._started = True
            _go_on_unfollowed(self._service.events(self._run), self._run.pk)
        self._generator.close()


_DONE = object()


def _step(iterator: Iterator[bytes]) -> Any:
    return next(iterator, _DONE)


class AsyncRunStream:
    """An async iterator over an :class:`ExecutingStream`, one step at a time in a thread.

    Django serves sync iterators under ASGI by reading them to the end first;
    this keeps each event flowing as it happens. ``close()`` lets Django's
    ``response.close()`` end the following when iteration stopped early.
    """

    def __init__(self, iterator: ExecutingStream) -> None:
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
        """Close the generator; a run still executing goes on to its end first.

        Django's handler calls it from a thread; called on an event loop (a test
        client does), it closes from a thread of its own, as the execution's
        queries must not run on the loop.
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self._iterator.close()
            return
        closing = threading.Thread(target=self._iterator.close, name="llm-conversations-close")
        closing.start()
        closing.join()


class RunStream(StreamingHttpResponse):
    """A stream of one run (``run_id``) in one format (``stream_format``, its name)."""

    def __init__(self, content: Any, run_id: Any, fmt: LogRenderer) -> None:
        super().__init__(content, content_type=EVENT_STREAM)
        self.run_id = run_id
        self.stream_format = fmt.format
        for name, value in fmt.headers.items():
            self[name] = value
        self["Cache-Control"] = "no-cache"
        # Before any event names it (a queued run logs none until a worker claims
        # it), so a client whose stream drops can still reattach on events/.
        self["X-Run-Id"] = str(run_id)
        # nginx buffers proxied responses unless told not to.
        self["X-Accel-Buffering"] = "no"


def executing_stream_response(
    request: HttpRequest, service: ToolLoopService, run: Run, fmt: type[LogRenderer]
) -> RunStream:
    """A response executing the run while it streams in format ``fmt``, async under
    ASGI and sync under WSGI."""
    renderer = fmt(run.pk)
    stream = ExecutingStream(service, run, renderer)
    content: Any = AsyncRunStream(stream) if isinstance(request, ASGIRequest) else stream
    return RunStream(content, run.pk, renderer)


def _follow_log(run_id: uuid.UUID | str, after_id: int, fmt: LogRenderer) -> Iterator[bytes]:
    fmt.prime(after_id)
    for page in follow(run_id, after_id, heartbeat=conf.SSE_HEARTBEAT_SECONDS):
        yield HEARTBEAT if page is None else fmt.render(page)
    if closing := fmt.end():
        yield closing


def _release_connections() -> None:
    # The request's thread is done with the database (authentication, the
    # run's lookup): its connection goes back now (to the pool, or closed),
    # not when the stream ends minutes later.
    for each in connections.all(initialized_only=True):
        if not each.in_atomic_block:
            each.close()


async def _afollow_log(
    run_id: uuid.UUID | str, after_id: int, heartbeat: float, fmt: LogRenderer
) -> AsyncIterator[bytes]:
    await sync_to_async(_release_connections)()
    await sync_to_async(fmt.prime, thread_sensitive=False)(after_id)
    async for page in afollow(run_id, after_id, heartbeat=heartbeat):
        yield HEARTBEAT if page is None else fmt.render(page)
    if closing := fmt.end():
        yield closing


def log_stream_response(
    request: HttpRequest, run_id: uuid.UUID | str, after_id: int, fmt: type[LogRenderer]
) -> RunStream:
    """A response following the run's log after ``after_id`` in format ``fmt``, executing
    nothing. Under ASGI an async iterator (it holds no thread while it waits);
    under WSGI a generator (its worker thread waits)."""
    renderer = fmt(run_id)
    if isinstance(request, ASGIRequest):
        heartbeat = conf.SSE_HEARTBEAT_SECONDS
        return RunStream(_afollow_log(run_id, after_id, heartbeat, renderer), run_id, renderer)
    return RunStream(_follow_log(run_id, after_id, renderer), run_id, renderer)
