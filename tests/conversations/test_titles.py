"""Automatic titles: asked of TITLE_PROVIDER after a conversation's first answer.

The provider is the OpenAI adapter over an ``httpx.MockTransport``
(``tests/title_server.py``), so each test reads the exact request.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.core.signals import request_finished, request_started
from django.db import close_old_connections

from llm_conversations.conversations import create_conversation, titles
from llm_conversations.conversations.after_response import after_response
from llm_conversations.conversations.titles import (
    EXCERPT_CHARS,
    TITLE_INSTRUCTIONS,
    clean_title,
    on_run_finished,
    write_title,
)
from llm_conversations.core.messages import ChatMessage, ToolCall
from llm_conversations.models import Conversation, Run, TitleSource
from llm_conversations.providers import EchoProvider
from llm_conversations.providers.caching import prefix_key
from llm_conversations.runs import ToolLoopService
from tests.conftest import TASKS_PACKAGE, task_backend
from tests.support.title_server import API_KEY, TitleServer, reply

QUESTION = "Is the ferry to Stavanger running?\nI need it today."


def answered(title: str = "") -> Conversation:
    return create_conversation(
        title=title, messages=[ChatMessage.user(QUESTION), ChatMessage.assistant("Yes, at 08:15.")]
    )


def title_of(conversation: Conversation) -> tuple[str, str]:
    conversation.refresh_from_db()
    return conversation.title, conversation.title_source


@pytest.mark.django_db
class TestGenerateTitle:
    def test_sends_the_first_question_and_answer_and_stores_the_title(
        self, title_server: TitleServer
    ) -> None:
        conversation = create_conversation(
            messages=[
                ChatMessage.system("Be brief."),
                ChatMessage.user(QUESTION),
                ChatMessage.assistant_tool_calls([ToolCall("c1", "timetable")]),
                ChatMessage.tool_result("c1", "08:15"),
                ChatMessage.assistant("Yes, at 08:15."),
                ChatMessage.user("And back?"),
                ChatMessage.assistant("At six."),
            ]
        )
        before = Conversation.objects.get(pk=conversation.pk).updated_at
        title_server.replies = [reply('"Ferry to Stavanger."')]
        assert write_title(conversation.pk) == "Ferry to Stavanger"
        (request,) = title_server.requests
        assert str(request.url) == "https://api.openai.com/v1/chat/completions"
        assert request.headers["authorization"] == f"Bearer {API_KEY}"
        assert title_server.bodies == [
            {
                "model": "gpt-title",
                "max_tokens": 20,
                "prompt_cache_key": prefix_key(
                    [
                        ChatMessage.system(TITLE_INSTRUCTIONS),
                        ChatMessage.user(f"{QUESTION}\n\n---\n\nYes, at 08:15."),
                    ]
                ),
                "messages": [
                    {"role": "system", "content": TITLE_INSTRUCTIONS},
                    {"role": "user", "content": f"{QUESTION}\n\n---\n\nYes, at 08:15."},
                ],
            }
        ]
        assert title_of(conversation) == ("Ferry to Stavanger", TitleSource.AUTO)
        # Not activity: the conversation keeps its place in the list.
        assert Conversation.objects.get(pk=conversation.pk).updated_at == before
        # Titled once: no second request.
        assert write_title(conversation.pk) is None
        assert len(title_server.requests) == 1

    def test_long_turns_are_cut_and_a_question_alone_is_enough(
        self, title_server: TitleServer
    ) -> None:
        conversation = create_conversation(messages=[ChatMessage.user("q" * (EXCERPT_CHARS + 50))])
        title_server.replies = [reply("Many q")]
        assert write_title(conversation.pk) == "Many q"
        assert title_server.bodies[0]["messages"][1]["content"] == "q" * EXCERPT_CHARS

    def test_a_conversation_without_a_question_is_left_alone(
        self, title_server: TitleServer
    ) -> None:
        conversation = create_conversation(messages=[ChatMessage.system("Be brief.")])
        assert write_title(conversation.pk) is None
        assert title_server.requests == []

    def test_a_title_a_user_sets_meanwhile_wins(self, title_server: TitleServer) -> None:
        conversation = answered()

        def user_renames() -> None:  # as a PATCH while the provider answers
            Conversation.objects.filter(pk=conversation.pk).update(
                title="Mine", title_source=TitleSource.USER
            )

        title_server.before_reply = user_renames
        title_server.replies = [reply("Ferry times")]
        assert write_title(conversation.pk) is None
        assert title_of(conversation) == ("Mine", TitleSource.USER)

    @pytest.mark.parametrize(
        ("title", "source"), [("", TitleSource.USER), ("Trip", ""), ("Trip", TitleSource.AUTO)]
    )
    def test_a_title_someone_set_is_never_replaced(
        self, title_server: TitleServer, title: str, source: str
    ) -> None:
        # An empty title a user chose counts as theirs too.
        conversation = answered()
        Conversation.objects.filter(pk=conversation.pk).update(title=title, title_source=source)
        assert write_title(conversation.pk) is None
        assert title_server.requests == []
        assert title_of(conversation) == (title, source)

    @pytest.mark.parametrize(
        ("answer", "logged"),
        [
            (
                httpx.Response(401, json={"error": {"message": f"Incorrect API key: {API_KEY}"}}),
                "provider_error",
            ),
            (httpx.Response(503, json={"error": {"message": "overloaded"}}), "provider_error"),
            (
                httpx.ConnectError(f"no route to https://llm.example/?key={API_KEY}"),
                "provider_error",
            ),
            (RuntimeError(f"unexpected {API_KEY}"), "(RuntimeError)"),
            (reply("  \n ``  \n"), "the answer was empty"),
        ],
    )
    def test_a_failure_is_logged_without_secrets_and_leaves_the_title_empty(
        self,
        title_server: TitleServer,
        caplog: pytest.LogCaptureFixture,
        answer: Any,
        logged: str,
    ) -> None:
        conversation = answered()
        title_server.replies = [answer]
        with caplog.at_level(logging.WARNING, logger="llm_conversations"):
            assert write_title(conversation.pk) is None
        assert title_of(conversation) == ("", "")
        assert f"Automatic title for conversation {conversation.pk}" in caplog.text
        assert logged in caplog.text
        assert API_KEY not in caplog.text
        assert "SECRET" not in caplog.text

    def test_titles_are_off_by_default(self, settings: Any, django_assert_num_queries: Any) -> None:
        assert "TITLE_PROVIDER" not in settings.LLM_CONVERSATIONS
        conversation = answered()
        run = Run.objects.create(conversation=conversation, status="completed")
        with django_assert_num_queries(0):
            on_run_finished(sender=Run, run=run)
            assert write_title(conversation.pk) is None
        assert title_of(conversation) == ("", "")


@pytest.mark.parametrize(
    ("answer", "title"),
    [
        ("Ferry to Stavanger", "Ferry to Stavanger"),
        ('"Ferry to Stavanger."', "Ferry to Stavanger"),
        ("\u201cFerry times\u201d", "Ferry times"),
        ("**Title:** Ferry   times\nBecause you asked about ferries.", "Ferry times"),
        ("# Ferry times", "Ferry times"),
        ("\n\n  title: 'Ferry' \n", "Ferry"),
        ("Ferry\x00times", "Ferry\ufffdtimes"),
        ("x" * 300, "x" * 200),
        ("  ...  ", ""),
        ("", ""),
    ],
)
def test_clean_title(answer: str, title: str) -> None:
    assert clean_title(answer) == title


@pytest.mark.django_db
class TestAfterARun:
    def send(self, conversation: Conversation, text: str, capture: Any) -> Run:
        with capture(execute=True):
            return ToolLoopService(EchoProvider()).send(conversation, text)

    def test_the_first_answer_gets_a_title_and_later_ones_ask_for_none(
        self, title_server: TitleServer, django_capture_on_commit_callbacks: Any
    ) -> None:
        conversation = create_conversation()
        title_server.replies = [reply("Greeting")]
        run = self.send(conversation, "Hello there", django_capture_on_commit_callbacks)
        assert run.status == "completed"
        # Outside a request the title is written once the run's end is committed.
        assert title_of(conversation) == ("Greeting", TitleSource.AUTO)
        echo = "Hello there\n\n---\n\nHello there"
        assert title_server.bodies[0]["messages"][1]["content"] == echo
        Conversation.objects.filter(pk=conversation.pk).update(title="", title_source="")
        self.send(conversation, "Again", django_capture_on_commit_callbacks)
        assert len(title_server.requests) == 1
        assert title_of(conversation) == ("", "")

    def test_a_failed_run_is_no_answer_and_a_later_first_answer_is(
        self, title_server: TitleServer, django_capture_on_commit_callbacks: Any
    ) -> None:
        conversation = create_conversation()
        bad_call = '{"tool_calls": [{"type": "function", "function": {"name": ""}}]}'
        failed = self.send(conversation, bad_call, django_capture_on_commit_callbacks)
        assert failed.status == "failed"
        assert title_server.requests == []
        title_server.replies = [reply("Second try")]
        self.send(conversation, "Hello", django_capture_on_commit_callbacks)
        assert title_of(conversation) == ("Second try", TitleSource.AUTO)

    def test_a_failing_title_provider_never_fails_the_run(
        self, title_server: TitleServer, django_capture_on_commit_callbacks: Any
    ) -> None:
        conversation = create_conversation()
        title_server.replies = [httpx.Response(500, json={})]
        run = self.send(conversation, "Hello", django_capture_on_commit_callbacks)
        run.refresh_from_db()
        assert (run.status, run.error_message) == ("completed", "")
        assert len(title_server.requests) == 1
        assert title_of(conversation) == ("", "")

    def test_with_background_runs_the_title_is_a_task(
        self,
        title_server: TitleServer,
        settings: Any,
        django_capture_on_commit_callbacks: Any,
    ) -> None:
        settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "BACKGROUND_RUNS": True}
        settings.TASKS = {"default": {"BACKEND": task_backend("dummy.DummyBackend")}}
        conversation = create_conversation()
        self.send(conversation, "Hello", django_capture_on_commit_callbacks)
        backend: Any = importlib.import_module(TASKS_PACKAGE).task_backends["default"]
        (queued,) = backend.results
        assert queued.task.name == titles.generate_title.name
        assert queued.args == [str(conversation.pk)]
        assert title_server.requests == []  # nothing asked in the run's process
        title_server.replies = [reply("Greeting")]
        assert titles.generate_title.call(*queued.args) == "Greeting"
        assert title_of(conversation) == ("Greeting", TitleSource.AUTO)


@pytest.fixture
def request_signals() -> Iterator[None]:
    """Request signals without Django's connection clean-up, which a test's
    connection must not get (as Django's test client does)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.mark.django_db
@pytest.mark.usefixtures("request_signals")
class TestAfterResponse:
    def test_work_waits_for_the_end_of_the_request(self) -> None:
        done: list[int] = []
        request_started.send(sender=None)
        after_response(done.append, 1)
        after_response(done.append, 2)
        assert done == []
        request_finished.send(sender=None)
        assert done == [1, 2]
        # Outside a request: at once.
        after_response(done.append, 3)
        assert done == [1, 2, 3]

    def test_a_failure_is_logged_by_type_and_the_rest_still_runs(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        done: list[str] = []

        def fail() -> None:
            raise ValueError("secret value")

        request_started.send(sender=None)
        after_response(fail)
        after_response(done.append, "after")
        request_finished.send(sender=None)
        assert done == ["after"]
        assert "Work queued after a response failed (ValueError)" in caplog.text
        assert "secret value" not in caplog.text
