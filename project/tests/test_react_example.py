"""The React example (examples/react-chat/, the AI SDK's useChat) in a real headless Chromium.

It sends, approves a call, survives a reload while a tool works (the stream
resumes, no model call is repeated) and stops a streaming reply (the text
shown is the text stored). On a worker engine (``llm_worker``, Celery) a run's
text shows as the model writes it, and a stop keeps it; a reload while the
model writes reattaches and the rest arrives live, wherever the run executes,
from the one request the provider got.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from llm_conversations.models import Conversation, Message, Run, RunStatus
from project.tests.background_runs import (
    FIRST_PIECE_SECONDS,
    PIECES,
    STORY,
    Story,
    assert_told_once,
    engine,
    logged_text,
    story,
    wait_until,
    wherever,
)
from project.tests.live_runs import (
    HALTED,
    PASSWORD,
    STORY_PROMPT,
    calls,
    gate,
    live_run_settings,
    send,
    sign_in,
)
from project.views import REACT_BUNDLE
from tests.browser.chromium import running_under_ci

if not REACT_BUNDLE.is_file() and running_under_ci(os.environ):
    raise RuntimeError("examples/react-chat is not built (`make install`). CI=true: no skipping.")

__all__ = ["engine", "story", "wherever"]  # fixtures

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not REACT_BUNDLE.is_file(), reason="examples/react-chat is not built"),
]


@pytest.fixture(autouse=True)
def example_settings(settings: Any) -> Iterator[None]:
    yield from live_run_settings(settings)


@pytest.fixture
def opened(page: Any, live_server: Any) -> Any:
    get_user_model().objects.create_superuser("staff", "staff@example.com", PASSWORD)
    page = sign_in(page, live_server.url, "/examples/react-chat/")
    page.locator("#input").wait_for()
    return page


def test_send_and_approve_a_call(opened: Any) -> None:
    page = opened
    send(page, calls(("e", "send_email", {"to": "a@b.c", "subject": "Hi", "body": "Hello"})))
    page.locator(".tool[data-call-id=e] .approve").click()
    page.locator(".tool[data-call-id=e][data-state=output-available]").wait_for()
    page.locator("#status[data-status=ready]").wait_for()
    run = Run.objects.get()
    assert (run.status, run.decisions) == ("completed", {"e": "approved"})
    answer = Message.objects.filter(role="assistant").order_by("position").last()
    assert answer is not None
    page.locator(".msg.assistant .text", has_text=answer.content).wait_for()


def test_a_reload_mid_run_resumes_the_stream_without_calling_the_model_again(
    opened: Any,
) -> None:
    page = opened
    send(page, calls(("g", "wait_for_gate", {})))
    page.locator(".tool[data-call-id=g][data-state=input-available]").wait_for()
    page.reload()
    # The reloaded page reattaches to the run from its log, the tool still at work.
    page.locator(".tool[data-call-id=g][data-state=input-available]").wait_for()
    gate.set()
    page.locator(".tool[data-call-id=g][data-state=output-available]").wait_for()
    page.locator("#status[data-status=ready]").wait_for()
    run = Run.objects.get()
    assert (run.status, run.iterations) == ("completed", 2)  # one model call per round
    answer = Message.objects.filter(role="assistant").order_by("position").last()
    assert answer is not None
    texts = page.locator(".msg.assistant .text").all_text_contents()
    assert texts == [answer.content]
    # Reopened once more, the history alone renders the same message.
    page.reload()
    page.locator(".tool[data-call-id=g][data-state=output-available]").wait_for()
    assert page.locator(".msg.assistant .text").all_text_contents() == [answer.content]


def test_stop_keeps_the_text_shown_as_the_answer(opened: Any) -> None:
    page = opened
    send(page, STORY_PROMPT)
    shows(page, HALTED)  # and the model halts there
    page.click("#stop")
    page.locator("#status[data-status=ready]").wait_for()
    shown = page.locator(".msg.assistant .text").all_text_contents()
    run = Run.objects.get()
    for _ in range(100):
        run.refresh_from_db()
        if run.status == "cancelled":
            break
        time.sleep(0.05)
    assert run.status == "cancelled"
    answer = Message.objects.get(role="assistant")
    assert answer.finish_reason == "cancelled"
    assert shown == [answer.content] == [HALTED]
    # Reopened, the page shows the kept text: what the user saw is what is stored.
    page.reload()
    page.locator(".msg.assistant .text").wait_for()
    assert page.locator(".msg.assistant .text").all_text_contents() == [answer.content]
    assert Conversation.objects.get().messages.count() == 2


SHOWN = """() => {
    const last = [...document.querySelectorAll('.msg.assistant')].at(-1);
    return last ? [...last.querySelectorAll('.text')].map((part) => part.textContent).join('') : null;
}"""


def shows(page: Any, text: str, seconds: float = 10) -> None:
    """Wait until the last assistant message shows ``text``, exactly."""
    page.wait_for_function(f"text => ({SHOWN})() === text", arg=text, timeout=seconds * 1000)


def test_a_background_run_shows_its_text_as_the_model_writes_it(
    engine: str, story: Story, opened: Any
) -> None:
    page = opened
    send(page, "Tell me a story.")
    for told in range(1, len(PIECES)):
        # The model halts after each piece: what the page shows came before the rest.
        shows(page, story.told(told), FIRST_PIECE_SECONDS if told == 1 else 10)
        assert Run.objects.get().status == RunStatus.RUNNING
        story.go_on()
    shows(page, STORY)
    page.locator("#status[data-status=ready]").wait_for()
    assert_told_once(story.provider, Run.objects.get())


def test_stop_keeps_the_text_a_background_run_showed(
    engine: str, story: Story, opened: Any
) -> None:
    page = opened
    send(page, "Tell me a story.")
    shows(page, story.told(1), FIRST_PIECE_SECONDS)
    story.go_on()
    # Stop as soon as the next piece is logged, while it may still be on its way.
    wait_until(lambda: logged_text(Run.objects.get()) == story.told(2))
    page.click("#stop")
    page.locator("#status[data-status=ready]").wait_for()
    run = Run.objects.get()
    for _ in range(100):
        run.refresh_from_db()
        if run.status == RunStatus.CANCELLED:
            break
        time.sleep(0.05)
    assert run.status == RunStatus.CANCELLED
    answer = Message.objects.get(role="assistant")
    assert answer.finish_reason == "cancelled"
    assert answer.content == story.told(2)
    # The text the page showed when its stream ended is the text kept.
    assert page.evaluate(SHOWN) == answer.content
    page.reload()
    shows(page, answer.content)


def test_a_reload_while_the_model_writes_reattaches_and_streams_the_rest(
    wherever: str, story: Story, opened: Any
) -> None:
    page = opened
    send(page, "Tell me a story.")
    shows(page, story.told(1), FIRST_PIECE_SECONDS)
    page.reload()
    # Reattached: the text so far from the run's log, then the rest as it is written.
    shows(page, story.told(1))
    story.go_on()
    shows(page, story.told(2))
    assert Run.objects.get().status == RunStatus.RUNNING
    story.go_on()
    shows(page, STORY)
    page.locator("#status[data-status=ready]").wait_for()
    assert_told_once(story.provider, Run.objects.get())
    assert page.locator(".msg.assistant").count() == 1
