"""The demo page with runs in flight and long histories, in a real headless Chromium.

A reload while a tool works reopens the conversation and follows the run's
log to its end (no model call repeated); a 300-message conversation opens at
its newest messages and pages back to the first; Stop keeps the text shown;
the sidebar pages and searches. On a worker engine (``llm_worker``, Celery) a
run's text shows as the model writes it, and Stop keeps what was shown; a
reload while the model writes reattaches and the rest arrives live, wherever
the run executes, from the one request the provider got.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from llm_conversations.conversations import create_conversation
from llm_conversations.core.messages import ChatMessage
from llm_conversations.models import Message, Run, RunStatus
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

__all__ = ["engine", "story", "wherever"]  # fixtures

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def live_runs(settings: Any) -> Iterator[None]:
    yield from live_run_settings(settings)


@pytest.fixture
def staff() -> Any:
    return get_user_model().objects.create_superuser("staff", "staff@example.com", PASSWORD)


@pytest.fixture
def signed_in(page: Any, live_server: Any, staff: Any) -> Any:
    return sign_in(page, live_server.url, "/")


# The text of the last assistant bubble, streaming or stored (its role label left out).
SHOWN = """() => {
    const last = [...document.querySelectorAll('.msg.assistant')].at(-1);
    if (!last) return null;
    const texts = [...last.childNodes].filter((node) => node.nodeType === Node.TEXT_NODE);
    return texts.map((node) => node.textContent).join('');
}"""


def shows(page: Any, text: str, seconds: float = 10) -> None:
    """Wait until the last assistant bubble shows ``text``, exactly."""
    page.wait_for_function(f"text => ({SHOWN})() === text", arg=text, timeout=seconds * 1000)


def test_a_reload_mid_run_reattaches_to_the_run(signed_in: Any) -> None:
    page = signed_in
    send(page, calls(("g", "wait_for_gate", {})))
    page.locator(".card[data-tool-call-id=g] .state", has_text="running").wait_for()
    page.reload()
    # The hash reopens the conversation; its log shows the tool at work.
    page.locator(".card[data-tool-call-id=g] .state", has_text="running").wait_for()
    assert page.locator("#stop").is_visible()
    gate.set()
    page.locator(".card[data-tool-call-id=g] .result").wait_for()
    page.locator("#status", has_text="Run completed").wait_for()
    page.locator("#stop").wait_for(state="hidden")
    run = Run.objects.get()
    assert (run.status, run.iterations) == ("completed", 2)
    answer = Message.objects.filter(role="assistant").order_by("position").last()
    assert answer is not None
    bubbles = page.locator(f".msg.assistant[data-message-id='{answer.pk}']")
    assert bubbles.count() == 1
    assert page.locator(".msg").count() == 3  # the question, the call, the answer


def test_a_long_conversation_opens_at_its_newest_message_and_pages_back(
    signed_in: Any, live_server: Any, staff: Any
) -> None:
    turns = []
    for n in range(150):
        turns += [ChatMessage.user(f"question {n}"), ChatMessage.assistant(f"answer {n}")]
    conversation = create_conversation(owner=staff, title="Long", messages=turns)
    page = signed_in
    page.goto(f"{live_server.url}/#c={conversation.pk}")
    page.reload()  # a new hash alone does not load the page again
    page.locator(".msg.assistant", has_text="answer 149").wait_for()
    assert page.locator(".msg").count() == 50
    for shown in (100, 150, 200, 250, 300):
        page.click("#load-earlier")
        page.wait_for_function(f"document.querySelectorAll('.msg').length === {shown}")
    assert page.locator("#load-earlier").is_hidden()
    texts = page.locator(".msg").all_text_contents()
    assert texts[0].endswith("question 0")
    assert texts[-1].endswith("answer 149")
    ids = page.locator(".msg").evaluate_all("nodes => nodes.map((n) => n.dataset.messageId)")
    stored = [
        str(pk) for pk in conversation.messages.order_by("position").values_list("pk", flat=True)
    ]
    assert ids == stored


def test_stop_keeps_the_text_shown_as_the_answer(signed_in: Any) -> None:
    page = signed_in
    send(page, STORY_PROMPT)
    shows(page, HALTED)  # and the model halts there
    page.click("#stop")
    page.locator("#status", has_text="Run cancelled").wait_for()
    answer = Message.objects.get(role="assistant")
    assert (answer.content, answer.finish_reason) == (HALTED, "cancelled")
    bubble = page.locator(f".msg.assistant[data-message-id='{answer.pk}']")
    assert "stopped" in (bubble.locator(".role").text_content() or "")
    assert bubble.text_content().endswith(HALTED)
    assert Run.objects.get().status == "cancelled"


def test_the_sidebar_pages_and_searches(signed_in: Any, live_server: Any, staff: Any) -> None:
    for n in range(24):
        create_conversation(owner=staff, title=f"Chat {n}")
    create_conversation(owner=staff, title="The needle")
    page = signed_in
    page.reload()
    page.locator("#conversations li").nth(19).wait_for()
    assert page.locator("#conversations li").count() == 20
    page.click("#more-conversations")
    page.wait_for_function("document.querySelectorAll('#conversations li').length === 25")
    assert page.locator("#more-conversations").is_hidden()
    page.fill("#search", "needle")
    page.wait_for_function("document.querySelectorAll('#conversations li').length === 1")
    assert page.locator("#conversations li").inner_text() == "The needle"


def test_a_background_run_shows_its_text_as_the_model_writes_it(
    engine: str, story: Story, signed_in: Any
) -> None:
    page = signed_in
    send(page, "Tell me a story.")
    for told in range(1, len(PIECES)):
        # The model halts after each piece: what the page shows came before the rest.
        shows(page, story.told(told), FIRST_PIECE_SECONDS if told == 1 else 10)
        assert Run.objects.get().status == RunStatus.RUNNING
        story.go_on()
    shows(page, STORY)
    page.locator("#status", has_text="Run completed").wait_for()
    assert_told_once(story.provider, Run.objects.get())


def test_stop_keeps_the_text_a_background_run_showed(
    engine: str, story: Story, signed_in: Any
) -> None:
    page = signed_in
    send(page, "Tell me a story.")
    shows(page, story.told(1), FIRST_PIECE_SECONDS)
    story.go_on()
    # Stop as soon as the next piece is logged, while it may still be on its way.
    wait_until(lambda: logged_text(Run.objects.get()) == story.told(2))
    page.click("#stop")
    page.locator("#status", has_text="Run cancelled").wait_for()
    answer = Message.objects.get(role="assistant")
    assert (answer.content, answer.finish_reason) == (story.told(2), "cancelled")
    assert Run.objects.get().status == RunStatus.CANCELLED
    assert page.evaluate(SHOWN) == answer.content
    page.reload()
    shows(page, answer.content)


def test_a_reload_while_the_model_writes_reattaches_and_streams_the_rest(
    wherever: str, story: Story, signed_in: Any
) -> None:
    page = signed_in
    send(page, "Tell me a story.")
    shows(page, story.told(1), FIRST_PIECE_SECONDS)
    page.reload()
    # The hash reopens the conversation: its run's log so far, then the rest live.
    shows(page, story.told(1))
    story.go_on()
    shows(page, story.told(2))
    assert Run.objects.get().status == RunStatus.RUNNING
    story.go_on()
    shows(page, STORY)
    page.locator("#status", has_text="Run completed").wait_for()
    assert_told_once(story.provider, Run.objects.get())
    assert page.locator(".msg.assistant").count() == 1
