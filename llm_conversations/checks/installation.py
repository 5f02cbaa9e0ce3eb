"""E092: what the app needs from the project beyond ``LLM_CONVERSATIONS``."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error

__all__ = ["CELERY_BACKEND", "check_installation"]

CELERY_BACKEND = "llm_conversations.tasks.celery.CeleryBackend"


def check_installation(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """E092 a ``TASKS`` backend is the Celery one, but no Celery app was configured."""
    tasks = getattr(settings, "TASKS", None)
    aliases = [
        alias
        for alias, entry in (tasks.items() if isinstance(tasks, dict) else ())
        if isinstance(entry, dict) and entry.get("BACKEND") == CELERY_BACKEND
    ]
    if not aliases:
        return []
    # Imported only here: celery is the "celery" extra.
    from llm_conversations.tasks.celery import NO_APP, configured_app

    if configured_app() is not None:
        return []
    return [
        Error(NO_APP, obj=f"TASKS[{alias!r}]", id="llm_conversations.E092") for alias in aliases
    ]
