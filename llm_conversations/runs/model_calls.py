"""One model call of a round: streamed where its entry allows, its text logged as it arrives.

The provider's stream is read on a thread of its own (:class:`StreamReader`),
so the loop's thread, which writes the run's log, can write buffered text on
time while the stream is silent: a piece of text waits at most
``TEXT_FLUSH_SECONDS`` before followers see it (:class:`~.log.writer.DeltaBuffer`).
The reading thread writes nothing (a provider of the project's own that reads
the database has that connection closed when the call ends); the loop's
thread gives its connection back to its pool while it waits, and stops
waiting once the run stopped running here (a cancel), even while the stream
is silent: the reading thread is then left to end at the call's next piece
or its timeout.
"""

from __future__ import annotations

import contextvars
import queue
import threading
from collections.abc import Callable, Generator, Iterator
from dataclasses import replace
from typing import Any, Final

from django.db import connections

from llm_conversations.conf import conf
from llm_conversations.conversations.attachments import load_attachment_data
from llm_conversations.core.completions import CompletionResponse
from llm_conversations.core.messages import ChatMessage
from llm_conversations.core.parameters import RunParameters
from llm_conversations.core.tool_specs import ToolSpec
from llm_conversations.models import RunEventType
from llm_conversations.providers import Provider, ResponseCompleted
from llm_conversations.providers.interrupts import Interrupt
from llm_conversations.providers.stream_events import ReasoningDelta, StreamEvent, TextDelta
from llm_conversations.runs.events import delta_event
from llm_conversations.runs.leases import CHECK_SECONDS
from llm_conversations.runs.live_connections import return_connection
from llm_conversations.runs.log.writer import DeltaBuffer, EventItem

__all__ = ["QUIET", "StreamReader", "model_reply"]

_KINDS = {TextDelta: RunEventType.TEXT_DELTA, ReasoningDelta: RunEventType.REASONING_DELTA}


class _Quiet:
    """What :meth:`StreamReader.next` returns when nothing arrived in time."""


QUIET: Final = _Quiet()
_ITEM, _DONE, _FAILED = range(3)


class StreamReader:
    """Iterates a provider's stream on a thread of its own.

    ``open_stream`` receives an event the reader sets when the caller gives
    the call up (:meth:`close`); passed into the call's :class:`Interrupt`, it
    ends the call at its next piece. The thread runs in a copy of the
    caller's context, so the call's telemetry span is a child of the run's.
    """

    def __init__(self, open_stream: Callable[[threading.Event], Iterator[StreamEvent]]) -> None:
        self._given_up = threading.Event()
        self._queue: queue.SimpleQueue[tuple[int, Any]] = queue.SimpleQueue()
        context = contextvars.copy_context()
        threading.Thread(
            target=context.run,
            args=(self._read, open_stream),
            name="llm-conversations-model-call",
            daemon=True,
        ).start()

    def _read(self, open_stream: Callable[[threading.Event], Iterator[StreamEvent]]) -> None:
        try:
            for event in open_stream(self._given_up):
                self._queue.put((_ITEM, event))
                if self._given_up.is_set():
                    return
        except BaseException as exc:  # handed to the caller's thread, raised there
            self._queue.put((_FAILED, exc))
        else:
            self._queue.put((_DONE, None))
        finally:
            # A provider of the project's own may have queried the database.
            connections.close_all()

    def next(self, timeout: float | None) -> StreamEvent | _Quiet | None:
        """The stream's next event; :data:`QUIET` after ``timeout`` seconds without one
        (``None``: no limit); ``None`` once the stream ended. Raises what the stream raised."""
        try:
            kind, value = self._queue.get(timeout=timeout)
        except queue.Empty:
            return QUIET
        if kind == _FAILED:
            raise value
        return value if kind == _ITEM else None

    def close(self) -> None:
        """Give the call up: it ends at its next piece, or at its own timeout."""
        self._given_up.set()


def _wait(text: DeltaBuffer) -> float:
    """How long to wait for the stream's next event: until buffered pieces are due, and
    never longer than the heartbeat takes to see a stopped run."""
    due = text.due_in()
    return CHECK_SECONDS if due is None else min(due, CHECK_SECONDS)


def model_reply(
    provider: Provider,
    messages: list[ChatMessage],
    tools: list[ToolSpec],
    parameters: RunParameters,
    interrupt: Interrupt,
    text: DeltaBuffer,
    lost: threading.Event,
) -> Generator[TextDelta | ReasoningDelta, None, CompletionResponse | None]:
    """Ask ``provider`` for the reply to ``messages``, yielding text (and reasoning
    text, where ``SHOW_REASONING`` lets end users see it) as it is logged.

    Returns the reply, or ``None`` when the run stopped running here meanwhile
    (``text`` found it so, or its lease was ``lost``); what it did not log yet
    stays in ``text``. Raises
    ``CallInterrupted`` (the run's deadline or stop) and ``ProviderError``.
    """
    offered = tools or None
    # The bytes of images and files are read for each call, never kept.
    history = load_attachment_data(messages)
    # No connection is held while the provider works, nor between pieces.
    return_connection()
    if not provider.streams:
        return provider.complete(history, tools=offered, parameters=parameters, interrupt=interrupt)
    reader = StreamReader(
        lambda given_up: provider.stream(
            history,
            tools=offered,
            parameters=parameters,
            interrupt=replace(interrupt, stops=(*interrupt.stops, given_up)),
        )
    )
    # Reasoning nobody may be shown is stored with the turn, never logged.
    shows_reasoning = conf.SHOW_REASONING
    response: CompletionResponse | None = None
    try:
        # A silent stream is looked at as often as the heartbeat looks at the run, so
        # a cancel ends the execution then, not at the provider's TIMEOUT.
        while (event := reader.next(_wait(text))) is not None:
            written: list[EventItem]
            if isinstance(event, TextDelta) or (
                isinstance(event, ReasoningDelta) and shows_reasoning
            ):
                # A provider without HTTP is checked here, as its text arrives;
                # a whole reply that arrived is kept, deadline or not.
                interrupt.check()
                written = text.add(event.text, _KINDS[type(event)])
            elif isinstance(event, ResponseCompleted):
                # What is left is written with the stored turn (DeltaBuffer.take).
                response = event.response
                written = []
            elif event is QUIET:
                written = text.flush()
            else:
                continue
            if text.stopped or lost.is_set():
                return None
            for item in written:
                yield delta_event(item)
            return_connection()
    finally:
        reader.close()
    return response
