"""The demo's Celery app: ``celery -A project worker --pool threads --concurrency 32``.

With ``DJANGO_TASKS=celery`` the demo queues background runs on Celery
(``CELERY_BROKER_URL``, default Redis ``redis://127.0.0.1:6379/0``).
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
os.environ.setdefault("DJANGO_TASKS", "celery")

import django

django.setup()

from llm_conversations.celery_backend import configure  # noqa: E402

app = configure(Celery("project"))
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["llm_conversations"], related_name="celery_backend")
