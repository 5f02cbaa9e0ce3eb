"""Reading a run's durable event log: pages of events after an id, and pushed pages.

The log is written by :mod:`llm_conversations.runs.log.writer`, one run's
events committed in id order, so a reader that resumes after the last id it
saw misses nothing and repeats nothing. A :class:`Page` is what a reader hands
on: read from the log (:func:`read_page`), or made of a pushed batch
(:func:`pushed_page`); the followers
(:mod:`llm_conversations.runs.log.followers`) read and wait for more.

Text of a lost attempt: when a worker dies while a reply streams, the deltas
it logged belong to no stored turn, and the next attempt answers again from
the start. Its ``run.running`` says so with ``superseded_after`` (the id of
the last event before those deltas, :func:`unstored_text_after`); so does the
``run.fallback`` of a call that moved to a fallback entry after its stream
broke. A page names the deltas already known to be superseded, which readers
leave out.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from llm_conversations.models import DELTAS, Message, Run, RunEvent, RunEventType, RunStatus
from llm_conversations.runs.log.pushes import Pushed

__all__ = [
    "PAGE_SIZE",
    "SUPERSEDING",
    "Page",
    "batch_page",
    "events_after",
    "lacks",
    "last_event_id",
    "messages_of",
    "pushed_page",
    "read_page",
    "started_call_ids",
    "unstored_text",
    "unstored_text_after",
]

PAGE_SIZE = 100

# Events whose superseded_after marks the text deltas before them as answered again.
SUPERSEDING = (RunEventType.RUN_RUNNING, RunEventType.RUN_FALLBACK)


@dataclass(frozen=True)
class Page:
    """Events of one run in id order, with what rendering them needs.

    ``run`` is read after the events, so it is at least as recent as the last
    of them; ``messages`` are the stored turns the events name, by id.
    ``ended``: the last event ends a stream. ``stopped``: the run no longer
    executes (or no longer exists) and nothing is left to read.
    ``superseded``: ids of the page's text deltas that a later attempt
    answered again (a lost attempt's text), which readers do not show.
    """

    run: Run | None
    events: list[RunEvent]
    messages: dict[str, Message] = field(default_factory=dict)
    ended: bool = False
    stopped: bool = False
    full: bool = False
    superseded: frozenset[int] = frozenset()

    @property
    def last_id(self) -> int | None:
        return self.events[-1].id if self.events else None


def events_after(run_id: uuid.UUID | str, after_id: int, limit: int = PAGE_SIZE) -> list[RunEvent]:
    """At most ``limit`` events of the run with an id above ``after_id``, in order."""
    return list(RunEvent.objects.filter(run_id=run_id, id__gt=after_id).order_by("id")[:limit])


def last_event_id(run_id: uuid.UUID | str) -> int:
    """The id of the run's last event so far (0 when it has none)."""
    last = RunEvent.objects.filter(run_id=run_id).order_by("-id").values_list("id", flat=True)
    return last.first() or 0


def messages_of(events: Iterable[RunEvent]) -> dict[str, Message]:
    """The messages the events name, by id, in one query (none if they name none)."""
    ids = {
        str(e.data["message"]) for e in events if isinstance(e.data, dict) and e.data.get("message")
    }
    if not ids:
        return {}
    return {str(m.pk): m for m in Message.objects.filter(pk__in=ids)}


def unstored_text_after(run_id: uuid.UUID | str) -> int | None:
    """When the log ends in deltas (text or reasoning) no stored turn followed: the id
    before them.

    ``None`` when the log does not end in deltas. Read by the claim of a new
    attempt (rare: only after a lost one), so two small queries are enough.
    """
    log = RunEvent.objects.filter(run_id=run_id).order_by("-id")
    if log.values_list("type", flat=True).first() not in DELTAS:
        return None
    before = log.exclude(type__in=DELTAS).values_list("id", flat=True).first()
    return before or 0


def unstored_text(run_id: uuid.UUID | str) -> str:
    """The text the log ends in that no stored turn holds ("" when it ends otherwise);
    reasoning text is not part of it."""
    after = unstored_text_after(run_id)
    if after is None:
        return ""
    deltas = RunEvent.objects.filter(
        run_id=run_id, id__gt=after, type=RunEventType.TEXT_DELTA
    ).order_by("id")
    return "".join(
        str(data.get("delta", ""))
        for data in deltas.values_list("data", flat=True)
        if isinstance(data, dict)
    )


def superseded_deltas(run: Run | None, events: list[RunEvent]) -> frozenset[int]:
    """Ids of the deltas (text and reasoning) among ``events`` that a later attempt's
    ``run.running`` or a ``run.fallback`` superseded.

    One query when the events hold text and the run's log holds superseded
    text (``Run.superseded_text``: it lost an attempt, or fell back after a
    stream broke); none for every other run.
    """
    deltas = [e.id for e in events if e.type in DELTAS]
    if run is None or not deltas or not run.superseded_text:
        return frozenset()
    restarts = RunEvent.objects.filter(
        run_id=run.pk, type__in=SUPERSEDING, id__gt=deltas[0]
    ).values_list("id", "data")
    spans = [
        (data["superseded_after"], restart_id)
        for restart_id, data in restarts
        if isinstance(data, dict) and isinstance(data.get("superseded_after"), int)
    ]
    return frozenset(d for d in deltas if any(after < d < until for after, until in spans))


def read_page(run_id: uuid.UUID | str, after_id: int, limit: int = PAGE_SIZE) -> Page:
    """The next events after ``after_id``, cut after the first one that ends a stream.

    Two queries (events, run), three when the events name messages. When
    nothing was found and the run no longer executes, the events are read once
    more: the run's status is then older than that read, so an empty answer
    means nothing more will be logged without someone acting on the run.
    """
    events = events_after(run_id, after_id, limit)
    run = Run.objects.filter(pk=run_id).first()
    stopped = run is None or not RunStatus(run.status).executing
    if not events and run is not None and stopped:
        events = events_after(run_id, after_id, limit)
    full = len(events) == limit
    ended = False
    for index, event in enumerate(events):
        if RunEventType(event.type).ends_stream:
            events, ended, full = events[: index + 1], True, False
            break
    return Page(
        run=run,
        events=events,
        messages=messages_of(events),
        ended=ended,
        stopped=stopped and not events,
        full=full,
        superseded=superseded_deltas(run, events),
    )


# Events a renderer draws from their own data and the turns they name; the
# others (run.*) show the run as it stands.
_SELF_CONTAINED = frozenset(
    {
        *DELTAS,
        RunEventType.TOOL_CALL_STARTED,
        RunEventType.TOOL_CALL_PROGRESS,
        RunEventType.MESSAGE_STORED,
        RunEventType.TOOL_RESULT_STORED,
    }
)


def batch_page(batch: Pushed, run: Run | None, messages: dict[str, Message]) -> Page:
    """The page of a pushed batch, given the run and the turns rendering it needs."""
    events = list(batch.events)
    ended = False
    for index, event in enumerate(events):
        if RunEventType(event.type).ends_stream:
            events, ended = events[: index + 1], True
            break
    return Page(run=run, events=events, messages=messages, ended=ended)


def lacks(batch: Pushed) -> tuple[bool, bool]:
    """Whether rendering a batch needs the run, and stored turns, that it lacks."""
    needs_run = batch.run is None and any(
        RunEventType(e.type) not in _SELF_CONTAINED for e in batch.events
    )
    named = {str(e.data.get("message")) for e in batch.events if isinstance(e.data, dict)}
    named.discard("None")
    return needs_run, not named <= set(batch.messages)


def pushed_page(batch: Pushed) -> Page:
    """The page of a pushed batch, with what rendering needs and the batch lacks read:
    the run for ``run.*`` events (one query), the turns the events name (one query;
    a batch pushed in process has them)."""
    needs_run, needs_messages = lacks(batch)
    run = Run.objects.filter(pk=batch.run_id).first() if needs_run else batch.run
    messages = dict(batch.messages)
    if needs_messages:
        messages.update(messages_of(batch.events))
    return batch_page(batch, run, messages)


def started_call_ids(run_id: uuid.UUID | str) -> set[str]:
    """Ids of the calls whose tool may have started in an earlier attempt of the run."""
    return {
        str(data["tool_call"]["id"])
        for data in RunEvent.objects.filter(
            run_id=run_id, type=RunEventType.TOOL_CALL_STARTED
        ).values_list("data", flat=True)
    }
