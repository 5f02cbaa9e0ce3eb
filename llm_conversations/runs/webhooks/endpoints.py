"""The rules of a webhook endpoint, one in ``WEBHOOKS`` or an owner's
(``WebhookEndpoint``): its URL, secret and events. The system check (E080) and
the API's serializer both apply them."""

from __future__ import annotations

from llm_conversations.core.webhook_signing import secret_problem
from llm_conversations.models import WebhookEvent
from llm_conversations.runs.webhooks.hosts import url_problem

__all__ = ["endpoint_problems", "events_problem"]


def endpoint_problems(url: object, secret: object, events: object) -> list[str]:
    """The rules of an endpoint, from the settings or an owner's: what is wrong, if anything.

    A URL is http(s) (whether its host may be reached is decided by
    ``runs/webhooks/hosts.host_problem()``, when an owner writes an endpoint and
    at every attempt), a secret is ``whsec_`` and base64, events a
    list of known event names (empty: all). Never quotes the secret.
    """
    problems = []
    problem = url_problem(url) if isinstance(url, str) else "not a string"
    if problem is not None:
        problems.append("URL: " + problem)
    if (problem := secret_problem(secret)) is not None:
        problems.append("SECRET: " + problem)
    if (problem := events_problem(events)) is not None:
        problems.append("EVENTS: " + problem)
    return problems


def events_problem(events: object) -> str | None:
    """Why ``events`` is not a list of event names (``None`` when it is; empty: all)."""
    known = set(WebhookEvent.values)
    if not isinstance(events, list) or not all(isinstance(e, str) and e in known for e in events):
        return f"a list of event names ({', '.join(sorted(known))})"
    return None
