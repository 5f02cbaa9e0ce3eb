"""Automatic titles: a short title for a conversation, written after its first answer.

Off unless ``TITLE_PROVIDER`` names a ``PROVIDERS`` entry. When a run ends
completed (``run_finished``, sent once its end is committed), it is the
conversation's first completed run, and the conversation has no title that
anyone set, :func:`on_run_finished` schedules :func:`write_title`: as a
task of Django's Tasks framework when ``BACKGROUND_RUNS`` is on, otherwise
after the response of the request that ran it
(:mod:`llm_conversations.conversations.after_response`), or at once outside a request.

It never delays or fails the run: the run has ended and committed before the
title is asked for, and a failure is logged (the library's redacted message,
or only the exception's type) and leaves the title empty. The title is
written by a conditional ``UPDATE`` that matches only an empty title that no
user set, so a title a user sets meanwhile wins, and it does not move
``updated_at`` (it is not activity).
"""

from __future__ import annotations

import logging
import re
import uuid
from typing import Any

from django.db.models import Q

from llm_conversations.conf import conf
from llm_conversations.conversations.after_response import after_response
from llm_conversations.core.messages import ChatMessage, Role
from llm_conversations.core.text import storable_text
from llm_conversations.exceptions import LLMConversationsError
from llm_conversations.models import Conversation, Message, Run, RunStatus, TitleSource
from llm_conversations.providers import get_provider
from llm_conversations.tasks.enqueue import enqueue, task

__all__ = [
    "EXCERPT_CHARS",
    "TITLE_INSTRUCTIONS",
    "clean_title",
    "enqueue_title",
    "generate_title",
    "on_run_finished",
    "schedule_title",
    "title_prompt",
    "write_title",
]

logger = logging.getLogger("llm_conversations")

TITLE_INSTRUCTIONS = (
    "The user's message is the start of a conversation: a question, a line "
    "'---', then the answer. Write a title for the conversation of at most six "
    "words, in the language of the question. Answer with the title only, "
    "without quotes or a full stop."
)
# How much of the question and of the answer the provider is shown.
EXCERPT_CHARS = 2000
_MAX_TITLE_CHARS = Conversation._meta.get_field("title").max_length or 200
# What models put around a title: a "Title:" label, quotes, Markdown.
_LABEL = re.compile(r"^\W*title\s*:\s*", re.IGNORECASE)
_DECORATION = "#*_`\"'\u201c\u201d\u2018\u2019\u00ab\u00bb "
# Conversations whose title an automatic one may fill: empty, and no user set it.
_UNTITLED = Q(title="") & ~Q(title_source=TitleSource.USER)


def title_prompt(conversation_id: uuid.UUID | str) -> list[ChatMessage] | None:
    """What the title provider is sent: the instructions, then the first question
    and the first answer with text; ``None`` when there is no question yet."""
    turns = Message.objects.filter(conversation_id=conversation_id, hidden_at__isnull=True).exclude(
        content=""
    )
    question = (
        turns.filter(role=Role.USER).order_by("position").values_list("content", "position").first()
    )
    if question is None:
        return None
    answer = (
        turns.filter(role=Role.ASSISTANT, position__gt=question[1])
        .order_by("position")
        .values_list("content", flat=True)
        .first()
    )
    parts = [question[0][:EXCERPT_CHARS]]
    if answer is not None:
        parts.append(answer[:EXCERPT_CHARS])
    return [ChatMessage.system(TITLE_INSTRUCTIONS), ChatMessage.user("\n\n---\n\n".join(parts))]


def clean_title(text: str) -> str:
    """A model's answer as a title: its first line, without quotes, markup or
    a full stop, within the title column's 200 characters; ``""`` if nothing is left."""
    line = next((line for line in storable_text(text).splitlines() if line.strip()), "")
    line = _LABEL.sub("", " ".join(line.split()))
    line = line.strip(_DECORATION).rstrip(".").rstrip()
    return line[:_MAX_TITLE_CHARS].rstrip()


def write_title(conversation_id: uuid.UUID | str) -> str | None:
    """Ask ``TITLE_PROVIDER`` for a title and store it if the title is still free.

    Returns the title stored, or ``None``: titles off, the title taken (by a
    user, or by an earlier automatic title), no question, an empty answer, or
    a failure, which is logged without secrets. Never raises.
    """
    name = conf.TITLE_PROVIDER
    try:
        if name is None or not Conversation.objects.filter(_UNTITLED, pk=conversation_id).exists():
            return None
        prompt = title_prompt(conversation_id)
        if prompt is None:
            return None
        title = clean_title(get_provider(name).complete(prompt).content)
        if not title:
            logger.warning(
                "Automatic title for conversation %s: the answer was empty", conversation_id
            )
            return None
        written = Conversation.objects.filter(_UNTITLED, pk=conversation_id).update(
            title=title, title_source=TitleSource.AUTO
        )
    except Exception as exc:
        _log_failure(conversation_id, exc)
        return None
    return title if written else None


def schedule_title(conversation_id: uuid.UUID | str) -> None:
    """Have :func:`write_title` run where it delays nobody: a task when
    ``BACKGROUND_RUNS`` is on, else after the current response (or now)."""
    if conf.BACKGROUND_RUNS:
        enqueue_title(conversation_id)
    else:
        after_response(write_title, conversation_id)


@task()
def generate_title(conversation_id: str) -> str | None:
    """The task that writes a conversation's automatic title: :func:`write_title`."""
    return write_title(conversation_id)


def enqueue_title(conversation_id: uuid.UUID | str) -> Any:
    """Queue :func:`generate_title` for a conversation on the configured task backend."""
    return enqueue(generate_title, str(conversation_id))


def _is_first_answer(run: Run) -> bool:
    """Whether ``run`` is the first completed run of a conversation that may get a title."""
    if run.status != RunStatus.COMPLETED:
        return False
    completed_before = Run.objects.filter(
        conversation_id=run.conversation_id, status=RunStatus.COMPLETED
    ).exclude(pk=run.pk)
    return (
        Conversation.objects.filter(_UNTITLED, pk=run.conversation_id)
        .exclude(pk__in=completed_before.values("conversation_id"))
        .exists()
    )


def on_run_finished(sender: Any, run: Run, **kwargs: Any) -> None:
    """``run_finished`` receiver: schedule a title after a conversation's first answer.

    Costs nothing while ``TITLE_PROVIDER`` is ``None``, and one query otherwise.
    """
    if conf.TITLE_PROVIDER is None:
        return
    try:
        if _is_first_answer(run):
            schedule_title(run.conversation_id)
    except Exception as exc:
        _log_failure(run.conversation_id, exc)


def _log_failure(conversation_id: uuid.UUID | str, exc: Exception) -> None:
    # Library errors carry messages written for people, provider keys
    # redacted at their source; any other exception text may hold data.
    reason = (
        f"{exc.code}: {exc.message}"
        if isinstance(exc, LLMConversationsError)
        else type(exc).__name__
    )
    logger.warning("Automatic title for conversation %s failed (%s)", conversation_id, reason)
