"""What the conversation change page shows, built from rows in plain Python.

The admin loads a conversation's messages and runs in one query each; these
functions pair each tool result with the call it answers and summarise runs
without touching the database again, so the page costs the same number of
queries at any length (one more, for the attachments, when a message shown has
images or files).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.urls import reverse

from llm_conversations.conf import conf
from llm_conversations.conversations.usage import model_label
from llm_conversations.core.content_parts import describe_size
from llm_conversations.core.messages import ToolCall
from llm_conversations.core.reasoning import ReasoningKind, reasoning_from_list, thoughts
from llm_conversations.models import (
    Attachment,
    Decision,
    Feedback,
    Message,
    MessageAttachment,
    Run,
    RunStatus,
    WaitingCall,
    WaitReason,
)
from llm_conversations.providers.backends import backend_class


def attachment_content_url(attachment: Attachment, site_name: str = "admin") -> str:
    """The admin URL of an attachment's bytes."""
    opts = Attachment._meta
    return reverse(f"{site_name}:{opts.app_label}_{opts.model_name}_content", args=[attachment.pk])


@dataclass(frozen=True)
class ShownAttachment:
    """An attachment as the transcript shows it: a thumbnail or a link."""

    attachment: Attachment
    url: str

    @property
    def label(self) -> str:
        """``spec.pdf (application/pdf, 12.0 KB)``."""
        item = self.attachment
        return f"{item.filename or item.pk} ({item.mime_type}, {describe_size(item.size)})"


def shown_attachments(
    messages: Iterable[Message], site_name: str = "admin"
) -> dict[Any, list[ShownAttachment]]:
    """The attachments each message shows, in part order, by message id.

    One query, and none when no message has content parts.
    """
    rows = [message for message in messages if message.content_parts]
    if not rows:
        return {}
    links = MessageAttachment.objects.filter(message__in=rows).select_related("attachment")
    by_id = {(link.message_id, str(link.attachment_id)): link.attachment for link in links}
    shown: dict[Any, list[ShownAttachment]] = {}
    for message in rows:
        for part in message.content_parts or ():
            attachment = by_id.get((message.pk, str(part.get("attachment_id"))))
            if attachment is not None:
                url = attachment_content_url(attachment, site_name)
                shown.setdefault(message.pk, []).append(ShownAttachment(attachment, url))
    return shown


def pretty_json(value: Any) -> str:
    """``value`` as indented JSON, non-ASCII kept readable."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)


@dataclass
class TranscriptCall:
    """A tool call as shown in the admin, with the tool turn that answers it."""

    id: str
    name: str
    arguments: str
    malformed: bool
    result: Message | None = None
    # The images and files the result shows.
    result_attachments: list[ShownAttachment] = field(default_factory=list)
    # Why the run waits on this call, if it does.
    waiting: WaitReason | None = None
    # The operator's decision on the call, if one was made.
    decision: Decision | None = None


@dataclass
class TranscriptEntry:
    """One row of the transcript: a message, and its calls for assistant turns.

    ``run`` is set on the first message stored by a run, to mark where it begins;
    ``feedback`` holds the ratings users gave an assistant turn.
    """

    message: Message
    calls: list[TranscriptCall] = field(default_factory=list)
    run: RunSummary | None = None
    # How the model of an assistant turn is named, as everywhere (model_label).
    model: str = ""
    feedback: list[Feedback] = field(default_factory=list)
    # Runs whose last model call sent the history from this message on (the
    # turns before it left out, or replaced by a summary): where the cut is.
    cuts: list[RunSummary] = field(default_factory=list)
    # The images and files the message shows.
    attachments: list[ShownAttachment] = field(default_factory=list)
    # The model's reasoning, shown to staff folded: (kind, text) of each part;
    # opaque data (signatures, redacted or encrypted reasoning) only counted.
    reasoning: list[tuple[str, str]] = field(default_factory=list)
    opaque_reasoning: int = 0
    # The provider whose compacted state this turn carries (the compact strategy),
    # and its readable text, if any: where that provider's later calls start.
    compacted_by: str = ""
    compaction: list[str] = field(default_factory=list)


@dataclass
class RunSummary:
    """One run of the tool loop as the timeline shows it."""

    run: Run
    number: int
    waiting_calls: list[WaitingCall] = field(default_factory=list)
    # The run's admin page, when the admin site has one.
    url: str = ""
    # The backend of the run's PROVIDERS entry: what its turns record as provider.
    backend: str = ""

    @property
    def model_label(self) -> str:
        """The run's model named as its turns and the usage page name it:
        ``gpt-4o (openai)``, the backend rather than the entry's name."""
        return model_label(self.backend or self.run.provider, self.run.model)

    @property
    def entry(self) -> str:
        """The run's ``PROVIDERS`` entry when its name is not its backend's, else ``""``."""
        return self.run.provider if self.run.provider != self.backend else ""

    @property
    def shown_waiting(self) -> list[tuple[WaitingCall, str]]:
        """Each waiting call with its arguments as people read them."""
        return [(waiting, shown_arguments(waiting.call)) for waiting in self.waiting_calls]

    @property
    def is_error(self) -> bool:
        """True for a failed run."""
        return self.run.status == RunStatus.FAILED

    @property
    def is_waiting(self) -> bool:
        """True while the run waits for approval or a client-side output."""
        return self.run.status == RunStatus.REQUIRES_ACTION


def shown_arguments(call: ToolCall) -> str:
    """A call's arguments for people: indented JSON, or the raw text when malformed."""
    return call.raw_arguments if call.raw_arguments is not None else pretty_json(call.arguments)


def summarise_runs(runs: Iterable[Run]) -> list[RunSummary]:
    """Runs oldest first, numbered from 1, with the calls they wait on."""
    ordered = sorted(runs, key=lambda r: r.created_at)
    return [
        RunSummary(run, number, run.waiting_calls, backend=entry_backend(run.provider))
        for number, run in enumerate(ordered, 1)
    ]


def entry_backend(name: str) -> str:
    """The backend name (``openai``) of the ``PROVIDERS`` entry ``name`` (``oai``), which
    is what a provider records on the turns it answers; ``name`` itself when the entry
    is gone or unusable. Read from the settings: nothing is built or connected."""
    entry = conf.PROVIDERS.get(name) if name else None
    if not isinstance(entry, Mapping):
        return name
    try:
        return backend_class(entry.get("BACKEND")).backend
    except ImproperlyConfigured:
        return name


def transcript(
    messages: Sequence[Message],
    runs: Sequence[RunSummary] = (),
    feedback: Iterable[Feedback] = (),
    attachments: Mapping[Any, list[ShownAttachment]] | None = None,
) -> list[TranscriptEntry]:
    """Pair each tool result with the call it answers; unpaired results stay rows.

    ``messages`` are in position order. With ``runs``, calls a paused run waits
    on are marked, decisions are shown, and each run's first message is labelled;
    ``feedback`` goes with the messages it rates, ``attachments`` (by message
    id) with the messages that show them.
    """
    by_message = attachments or {}
    by_run = {summary.run.pk: summary for summary in runs}
    cuts: dict[int, list[RunSummary]] = {}
    for marked in runs:
        first = marked.run.context_first_position
        if first:  # 0 or None: the whole conversation was sent
            cuts.setdefault(first, []).append(marked)
    ratings: dict[Any, list[Feedback]] = {}
    for item in feedback:
        ratings.setdefault(item.message_id, []).append(item)
    entries: list[TranscriptEntry] = []
    open_calls: dict[str, TranscriptCall] = {}
    previous_run: Any = None
    for message in messages:
        if message.role == "tool" and message.tool_call_id in open_calls:
            answered = open_calls.pop(message.tool_call_id)
            answered.result = message
            answered.result_attachments = by_message.get(message.pk, [])
            continue
        entry = TranscriptEntry(
            message,
            feedback=ratings.get(message.pk, []),
            attachments=by_message.get(message.pk, []),
            cuts=cuts.get(message.position, []),
            model=model_label(message.provider, message.model)
            if message.model or message.provider
            else "",
        )
        parts = reasoning_from_list(message.reasoning or ())
        for part in thoughts(parts):
            if part.text:
                entry.reasoning.append((part.kind.value, part.text))
            else:
                entry.opaque_reasoning += 1
        for part in parts:
            if part.kind is ReasoningKind.COMPACTION:
                entry.compacted_by = part.provider
                entry.compaction += [part.text] if part.text else []
        if message.run_id is not None and message.run_id != previous_run:
            entry.run = by_run.get(message.run_id)
        previous_run = message.run_id
        if message.tool_calls:
            open_calls = {}
            summary = by_run.get(message.run_id) if message.run_id is not None else None
            waiting = {p.call.id: p.reason for p in summary.waiting_calls} if summary else {}
            for call in message.to_chat_message().tool_calls or ():
                shown = TranscriptCall(
                    id=call.id,
                    name=call.name,
                    arguments=shown_arguments(call),
                    malformed=call.malformed,
                    waiting=waiting.get(call.id),
                    decision=summary.run.decision(call.id) if summary else None,
                )
                open_calls[call.id] = shown
                entry.calls.append(shown)
        entries.append(entry)
    return entries
