"""The Celery backend sends with the app given to ``configure()``, from any thread
(check E092 when there is none), over a real kombu transport (in memory)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from celery import Celery
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from llm_conversations.checks import check_installation
from llm_conversations.checks.installation import CELERY_BACKEND
from llm_conversations.runs.service import execute_run
from llm_conversations.tasks import celery as celery_backend

TASKS = {"default": {"BACKEND": CELERY_BACKEND}}


@pytest.fixture
def no_app(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(celery_backend, "_configured", None)


@pytest.fixture
def app(monkeypatch: pytest.MonkeyPatch) -> Iterator[Celery]:
    """A project's app on an in-memory broker, configured as a project's Celery module does."""
    monkeypatch.setattr(celery_backend, "_configured", None)
    project_app = Celery("project-under-test", broker="memory://", set_as_current=False)
    yield celery_backend.configure(project_app)
    project_app.close()


def backend() -> celery_backend.CeleryBackend:
    return celery_backend.CeleryBackend("default", {})


@pytest.mark.usefixtures("no_app")
def test_e092_a_celery_backend_without_a_configured_app() -> None:
    with override_settings(TASKS=TASKS):
        (error,) = check_installation()
    assert error.id == "llm_conversations.E092"
    assert error.obj == "TASKS['default']"
    assert "__init__.py" in error.msg


@pytest.mark.usefixtures("no_app")
def test_e092_says_nothing_without_a_celery_backend() -> None:
    with override_settings(
        TASKS={"default": {"BACKEND": "django_tasks.backends.dummy.DummyBackend"}}
    ):
        assert check_installation() == []


def test_e092_says_nothing_once_an_app_is_configured(app: Celery) -> None:
    with override_settings(TASKS=TASKS):
        assert check_installation() == []


@pytest.mark.usefixtures("no_app")
def test_an_enqueue_without_a_configured_app_says_how_to_configure_one() -> None:
    with pytest.raises(ImproperlyConfigured, match="Celery's Django guide"):
        backend().enqueue(execute_run, ["00000000-0000-0000-0000-000000000000"], {})


def test_a_task_enqueued_in_another_thread_goes_to_the_configured_apps_broker(
    app: Celery,
) -> None:
    # Celery's current app is per thread: in a new thread it is Celery's fallback
    # (amqp://localhost). The backend sends with the configured app regardless.
    sent: list[Any] = []

    def enqueue() -> None:
        sent.append(backend().enqueue(execute_run, ["8b1f1d0e-0000-0000-0000-000000000000"], {}))

    thread = threading.Thread(target=enqueue)
    thread.start()
    thread.join(10)
    (result,) = sent
    with app.connection_for_read() as connection:
        message = connection.SimpleQueue("default", no_ack=True).get(timeout=5)
    assert message.headers["task"] == celery_backend.TASK_NAME
    assert message.headers["id"] == result.id
    module_path, args, kwargs = message.decode()[0]
    assert (module_path, args, kwargs) == (
        execute_run.module_path,
        ["8b1f1d0e-0000-0000-0000-000000000000"],
        {},
    )
