"""``checks/installation.py``: E092, a project setting beside LLM_CONVERSATIONS (the Celery
backend itself: tests/tasks/test_celery.py)."""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from llm_conversations import checks
from tests.checks.broken import BROKEN_PROJECT


@pytest.fixture
def without_celery_app(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in a process whose project never loaded its Celery module."""
    from llm_conversations.tasks import celery as celery_backend

    monkeypatch.setattr(celery_backend, "_configured", None)


# Django 6.1 runs the model checks against the database (JSONField support).
@pytest.mark.django_db
@pytest.mark.usefixtures("without_celery_app")
@pytest.mark.parametrize("check_id", sorted(BROKEN_PROJECT))
def test_manage_py_check_with_the_apps_tag_reports_each_project_id(check_id: str) -> None:
    with (
        override_settings(**BROKEN_PROJECT[check_id]),
        pytest.raises(SystemCheckError, match=re.escape(check_id)),
    ):
        call_command("check", "--tag", checks.TAG)
