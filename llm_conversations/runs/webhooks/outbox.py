"""Which webhooks an event of a run makes, and when they are sent.

A run that ends (``run_finished``) or pauses for action (``run_requires_action``),
both sent once committed, makes one :class:`WebhookDelivery` per endpoint that
wants the event: each ``WEBHOOKS`` entry, and the active endpoints of the
conversation's owner (one query). The deliveries are written in one
``INSERT``, then sent by :mod:`llm_conversations.runs.webhooks.delivery`: each
as a task (``send_webhook``) queued once they are committed, whether the run
executed in a worker or in a request, so no request's thread ever waits on a
receiver. A failure here is logged and never reaches the run.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from functools import partial
from typing import Any

from django.db import transaction
from django.utils import timezone

from llm_conversations.conf import conf
from llm_conversations.models import (
    Conversation,
    Run,
    RunStatus,
    WebhookDelivery,
    WebhookEndpoint,
    WebhookEvent,
)
from llm_conversations.runs.webhooks.delivery import enqueue_delivery

__all__ = [
    "event_payload",
    "on_run_finished",
    "on_run_requires_action",
    "queue_event",
]

logger = logging.getLogger("llm_conversations.webhooks")

_EVENTS = {
    RunStatus.COMPLETED: WebhookEvent.RUN_COMPLETED,
    RunStatus.FAILED: WebhookEvent.RUN_FAILED,
    RunStatus.CANCELLED: WebhookEvent.RUN_CANCELLED,
    RunStatus.REQUIRES_ACTION: WebhookEvent.RUN_REQUIRES_ACTION,
}


def event_payload(run: Run, event: WebhookEvent) -> dict[str, Any]:
    """The JSON body of one event: ``type``, ``timestamp`` and ``data`` (the run)."""
    data: dict[str, Any] = {
        "id": str(run.pk),
        "conversation_id": str(run.conversation_id),
        "status": run.status,
        "termination_reason": run.termination_reason,
        "iterations": run.iterations,
        "usage": {
            "input_tokens": run.input_tokens,
            "output_tokens": run.output_tokens,
            "total_tokens": run.total_tokens,
        },
    }
    if event is WebhookEvent.RUN_FAILED:
        # The stored error text: written for people, never an unexpected error's text.
        data["error"] = {"type": run.error_type, "message": run.error_message}
    if event is WebhookEvent.RUN_REQUIRES_ACTION:
        data["waiting"] = [
            {"id": p.call.id, "name": p.call.name, "reason": p.reason.value}
            for p in run.waiting_calls
        ]
    return {"type": event.value, "timestamp": timezone.now().isoformat(), "data": {"run": data}}


def _wants(entry: Mapping[str, Any], event: str) -> bool:
    events = entry.get("EVENTS") or []
    return not events or event in events


def queue_event(run: Run, event: WebhookEvent) -> list[WebhookDelivery]:
    """Write the deliveries of one event and schedule their sending, after commit."""
    configured = [name for name, entry in conf.WEBHOOKS.items() if _wants(entry, event.value)]
    owned = _owned_endpoints(run, event.value)
    if not configured and not owned:
        return []
    payload = event_payload(run, event)
    now = timezone.now()
    rows = [
        WebhookDelivery(
            endpoint_name=name, event=event, run_id=run.pk, payload=payload, next_attempt_at=now
        )
        for name in configured
    ] + [
        WebhookDelivery(
            endpoint_id=pk, event=event, run_id=run.pk, payload=payload, next_attempt_at=now
        )
        for pk in owned
    ]
    created = WebhookDelivery.objects.bulk_create(rows)
    for row in created:
        transaction.on_commit(partial(enqueue_delivery, str(row.pk)))
    return created


def _owned_endpoints(run: Run, event: str) -> list[uuid.UUID]:
    """The ids of the active endpoints of the run's owner that receive ``event``."""
    if Run.conversation.is_cached(run):  # the conversation its start found
        owner_id = run.conversation.owner_id
        if owner_id is None:
            return []
        endpoints = WebhookEndpoint.objects.filter(owner_id=owner_id, is_active=True)
    else:
        owner = Conversation.objects.filter(pk=run.conversation_id).values("owner_id")
        endpoints = WebhookEndpoint.objects.filter(owner_id__in=owner, is_active=True)
    return [
        pk
        for pk, events in endpoints.values_list("pk", "events")
        if WebhookEndpoint.receives(events, event)
    ]


def _on_event(run: Run) -> None:
    event = _EVENTS.get(RunStatus(run.status))
    if event is None:
        return
    try:
        queue_event(run, event)
    except Exception as exc:  # a webhook never fails the run
        logger.warning("Webhooks of run %s not queued (%s)", run.pk, type(exc).__name__)


def on_run_finished(sender: Any, run: Run, **kwargs: Any) -> None:
    """``run_finished`` receiver: queue ``run.completed`` / ``run.failed`` / ``run.cancelled``."""
    _on_event(run)


def on_run_requires_action(sender: Any, run: Run, **kwargs: Any) -> None:
    """``run_requires_action`` receiver: queue ``run.requires_action``."""
    _on_event(run)
