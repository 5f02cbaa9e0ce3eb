"""The demo's Celery app: ``DJANGO_TASKS=celery celery -A project worker --pool threads``.

Loaded by ``project/__init__.py`` (Celery's Django guide), so every process of
the project configures this app, and :func:`~llm_conversations.tasks.celery.configure`
makes it the one the Tasks backend sends with. With ``DJANGO_TASKS=celery`` the
demo's settings queue background runs on it (``CELERY_BROKER_URL``, default Redis
``redis://127.0.0.1:6379/0``); the worker needs the same environment.
"""

import os

from celery import Celery

from llm_conversations.tasks.celery import configure

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

app = configure(Celery("project"))
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["llm_conversations.tasks"], related_name="celery")
