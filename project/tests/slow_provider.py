"""The fake provider of the worker tests (``provider`` fixture, re-exported by conftest):
on 127.0.0.1, slow on purpose, so a test can act while a run waits on it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.test import override_settings

from llm_conversations.conversations import load_messages
from llm_conversations.core.sequence import check_sequence
from llm_conversations.models import Run, RunStatus
from llm_conversations.runs.tool_runs import NOT_REPEATED
from project.tests.worker_tools import conversation_settings
from tests.faults.server import Exchange, FakeProvider

__all__ = ["SlowProvider", "assert_finished_without_charging_twice", "provider"]


class SlowProvider(FakeProvider):
    """Answers each call after ``delay`` seconds: with a ``charge_card`` call when the
    user asked to pay and nothing answered it yet, else with ``text``.

    A streamed answer is sent an event every ``pace`` seconds, halting after the
    event of index ``n`` until ``holds[n]`` is set (see ``Exchange.pace``).
    """

    delay = 1.0
    text = "done"
    pace = 0.0

    def __init__(self) -> None:
        super().__init__(fallback=self.answer)
        self.holds: dict[int, threading.Event] = {}

    def answer(self, exchange: Exchange) -> None:
        if exchange.stop.wait(self.delay):
            return
        last = exchange.body["messages"][-1]
        if last["role"] == "user" and "pay" in str(last["content"]):
            calls = [("call_pay", "charge_card", "{}")]
            exchange.send(exchange.render(calls=calls, finish="tool"))
        elif exchange.stream:
            exchange.pace(exchange.render(self.text), self.pace, self.holds)
        else:
            exchange.send(exchange.render(self.text))


@pytest.fixture
def provider() -> Iterator[SlowProvider]:
    fake = SlowProvider()
    server = fake.start()
    try:
        url = fake.base_urls()["openai"]
        with override_settings(
            LLM_CONVERSATIONS=conversation_settings(settings.LLM_CONVERSATIONS, url)
        ):
            yield fake
    finally:
        server.stop.set()
        server.shutdown()
        server.server_close()


def assert_finished_without_charging_twice(run: Run, charged: Path) -> None:
    """A run whose worker was killed mid-``charge_card`` completed on its second
    attempt: the card charged once, the call answered as not repeated."""
    run.refresh_from_db()
    assert (run.status, run.attempts) == (RunStatus.COMPLETED, 2)
    assert charged.read_text() == "charged\n"  # once, not again
    messages = load_messages(run.conversation_id)
    check_sequence(messages)
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[2].content == NOT_REPEATED
