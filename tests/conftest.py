from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Generator, Iterator
from importlib.util import find_spec
from typing import Any

import pytest
from django.db import connection, connections
from django.test import client as client_module

from llm_conversations.conversations.after_response import _queue as after_response_queue
from llm_conversations.core.messages import ChatMessage, ToolCall
from tests.support import random_order
from tests.support import title_server as titles

# The Agents SDK sends its traces to OpenAI unless told not to: never from the tests
# (read when the SDK is first imported).
os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")


def pytest_configure(config: pytest.Config) -> None:
    random_order.register(config)


def parallel_call_history() -> list[ChatMessage]:
    """A system prompt, a user turn, two parallel calls (one with empty
    arguments), their results (one an error), and a final user turn."""
    return [
        ChatMessage.system("Be brief."),
        ChatMessage.user("Weather in Paris and the time?"),
        ChatMessage.assistant_tool_calls(
            [
                ToolCall("call_1", "get_weather", {"city": "Paris"}),
                ToolCall("call_2", "get_time", {}),
            ]
        ),
        ChatMessage.tool_result("call_1", '{"temperature": 18}'),
        ChatMessage.tool_result("call_2", "clock unavailable", is_error=True),
        ChatMessage.user("Thanks. And tomorrow?"),
    ]


@pytest.fixture
def history() -> list[ChatMessage]:
    return parallel_call_history()


# Django's Tasks framework: built in from Django 6.0, the backport before.
TASKS_PACKAGE = "django.tasks" if find_spec("django.tasks") else "django_tasks"


def task_backend(name: str) -> str:
    """The dotted path of one of the framework's own backends, e.g. ``dummy.DummyBackend``."""
    return f"{TASKS_PACKAGE}.backends.{name}"


requires_postgresql = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="needs PostgreSQL row locks"
)


def run_together(workers: int, work: Callable[[int], Any]) -> list[Any]:
    """Run ``work(0)`` .. ``work(workers - 1)`` in threads released at once.

    Returns each one's result, or the exception it raised, in worker order.
    Each thread closes its own database connection.
    """
    barrier = threading.Barrier(workers)
    outcomes: list[Any] = [None] * workers

    def run(n: int) -> None:
        try:
            barrier.wait()
            outcomes[n] = work(n)
        except BaseException as exc:  # returned to the test
            outcomes[n] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(n,)) for n in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


@pytest.fixture
def title_server(settings: Any) -> titles.TitleServer:
    """A fresh title provider's HTTP side, and settings whose ``TITLE_PROVIDER`` uses it."""
    titles.current = titles.TitleServer()
    settings.LLM_CONVERSATIONS = titles.title_settings(settings.LLM_CONVERSATIONS)
    return titles.current


@pytest.fixture(autouse=True)
def outside_a_request() -> Iterator[None]:
    """Each test starts outside a request, as a worker or a script does: a request
    another test served and left unfinished would keep its after-response queue
    open, and work queued there (a title) would wait for a response never sent."""
    token = after_response_queue.set(None)
    yield
    after_response_queue.reset(token)


@pytest.fixture(autouse=True)
def close_streams(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Close each streamed test-client response a test left unread, as a server
    closes every response: its follower stops listening (a left one would keep
    the listener's connection open into later tests)."""
    opened: list[Generator[Any, None, None]] = []
    wrap = client_module.closing_iterator_wrapper

    def tracked(iterable: Any, close: Callable[[], None]) -> Generator[Any, None, None]:
        generator = wrap(iterable, close)
        opened.append(generator)
        return generator

    monkeypatch.setattr(client_module, "closing_iterator_wrapper", tracked)
    yield
    for generator in opened:
        with contextlib.suppress(ValueError):  # still read by a thread: it closes it
            generator.close()
