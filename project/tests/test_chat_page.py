"""The demo chat page in a real headless Chromium."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model

from llm_conversations.conversations import create_conversation
from llm_conversations.core.messages import ChatMessage
from llm_conversations.core.reasoning import Reasoning, ReasoningKind
from llm_conversations.models import Conversation, Message, Run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "browser-pass"


@pytest.fixture
def staff() -> Any:
    return get_user_model().objects.create_superuser("staff", "staff@example.com", PASSWORD)


def log_in(page: Any, base: str) -> None:
    page.goto(f"{base}/admin/login/?next=/")
    page.fill("#id_username", "staff")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")


def test_demo_page_streams_a_tool_call_and_its_result(
    page: Any, live_server: Any, staff: Any
) -> None:
    log_in(page, live_server.url)
    page.wait_for_url(f"{live_server.url}/")
    page.click("button.example[data-example=weather]")
    page.click("#send")
    card = page.locator(".card[data-tool-call-id]").first
    card.wait_for(state="visible")
    assert card.locator(".name").inner_text() == "get_weather"
    card.locator(".result").wait_for(state="visible")
    assert "Paris" in card.locator(".result").inner_text()
    page.locator("#status", has_text="Run completed").wait_for()
    # The echo backend's closing reply quotes the results.
    reply = page.locator(".msg.assistant").last
    assert "get_time" in reply.inner_text()
    conversation = Conversation.objects.get()
    assert [m.role for m in conversation.messages.all()] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    # Reloading shows the stored transcript, results paired with their calls.
    page.reload()
    page.locator("#conversations li").first.click()
    page.locator(".card .result").nth(1).wait_for(state="visible")
    assert page.locator(".msg.tool").count() == 0


def test_demo_page_approves_a_paused_run(page: Any, live_server: Any, staff: Any) -> None:
    log_in(page, live_server.url)
    page.wait_for_url(f"{live_server.url}/")
    page.click("button.example[data-example=email]")
    page.click("#send")
    page.locator("#action").wait_for(state="visible")
    assert "send_email" in page.locator("#pending").inner_text()
    run = Run.objects.get()
    assert run.status == "requires_action"
    page.click("#approve")
    page.locator("#status", has_text="Run completed").wait_for()
    run.refresh_from_db()
    assert run.status == "completed"
    assert list(run.decisions.values()) == ["approved"]
    result = Message.objects.get(role="tool")
    assert not result.is_error
    assert page.locator(".card .result").first.inner_text().strip() == result.content


@pytest.fixture
def two_providers(settings: Any) -> None:
    settings.LLM_CONVERSATIONS = {
        **settings.LLM_CONVERSATIONS,
        "DEFAULT_PROVIDER": "echo",
        "PROVIDERS": {
            "echo": {"BACKEND": "echo", "MODEL": "echo"},
            "second": {"BACKEND": "echo", "MODEL": "echo-small", "MODELS": ["echo-large"]},
        },
    }


def test_settings_panel_sends_run_parameters_and_shows_the_parsed_answer(
    page: Any, live_server: Any, staff: Any, two_providers: None
) -> None:
    log_in(page, live_server.url)
    page.wait_for_url(f"{live_server.url}/")
    page.click("#settings summary")
    # The panel lists GET /api/providers/: the default first chosen, its models.
    page.locator("#provider option[value=second]").wait_for(state="attached")
    assert page.input_value("#provider") == "echo"
    page.select_option("#provider", "second")
    assert page.locator("#model option").all_inner_texts() == ["echo-small", "echo-large"]
    page.select_option("#model", "echo-large")
    page.fill("#instructions", "Answer in JSON.")
    page.fill("#temperature", "0.3")
    page.click("button.example[data-example=structured]")
    assert page.is_checked("#structured")
    page.click("#send")
    page.locator("#status", has_text="Run completed").wait_for()
    parsed = page.locator(".msg.assistant .parsed").last
    parsed.wait_for(state="visible")
    assert '"answer":"Paris"' in parsed.inner_text()
    run = Run.objects.get()
    chosen = run.run_parameters
    assert (run.provider, run.model, chosen.instructions) == (
        "second",
        "echo-large",
        "Answer in JSON.",
    )
    assert chosen.temperature == 0.3
    assert chosen.response_format is not None
    assert chosen.response_format.schema["required"] == ["answer"]
    assert Message.objects.get(role="assistant").parsed == {"answer": "Paris", "confidence": 0.9}


def test_settings_panel_leaves_unset_parameters_out(
    page: Any, live_server: Any, staff: Any
) -> None:
    log_in(page, live_server.url)
    page.wait_for_url(f"{live_server.url}/")
    page.locator("#provider option[value=echo]").wait_for(state="attached")
    page.fill("#input", "hello")
    page.click("#send")
    page.locator("#status", has_text="Run completed").wait_for()
    run = Run.objects.get()
    assert run.provider == "echo"
    # Only the model the panel shows is sent; everything else is left to the provider.
    assert run.parameters == {"model": "echo"}
    assert run.instructions == ""


def test_demo_page_attaches_an_image(
    page: Any, live_server: Any, staff: Any, settings: Any, tmp_path: Any
) -> None:
    import io

    from PIL import Image

    from llm_conversations.models import Attachment

    settings.MEDIA_ROOT = tmp_path
    buffer = io.BytesIO()
    Image.new("RGB", (64, 48), (30, 90, 200)).save(buffer, format="PNG")
    log_in(page, live_server.url)
    page.wait_for_url(f"{live_server.url}/")
    page.fill("#input", "What colour is this?")
    page.set_input_files(
        "#attach",
        files=[{"name": "blue.png", "mimeType": "image/png", "buffer": buffer.getvalue()}],
    )
    assert page.locator("#attached").inner_text() == "blue.png"
    page.click("#send")
    page.locator("#status", has_text="Run completed").wait_for()
    attachment = Attachment.objects.get()
    assert (attachment.filename, attachment.width, attachment.height) == ("blue.png", 64, 48)
    # The user turn shows the image, loaded through the owner-checked view.
    thumb = page.locator(".msg.user img.thumb").last
    thumb.wait_for(state="visible")
    assert thumb.get_attribute("src") == f"/api/attachments/{attachment.pk}/content/"
    page.wait_for_function("document.querySelector('.msg.user img.thumb').naturalWidth === 64")
    # The echo provider describes what it received.
    reply = page.locator(".msg.assistant").last.inner_text()
    assert f"What colour is this? [image/png 64x48, {attachment.size} B]" in reply
    # Reloading shows the stored transcript with the image.
    page.reload()
    page.locator("#conversations li").first.click()
    page.locator(".msg.user img.thumb").wait_for(state="visible")
    message = Message.objects.get(role="user")
    assert message.content_parts == [
        {"type": "text", "text": "What colour is this?"},
        {"type": "image", "attachment_id": str(attachment.pk)},
    ]


def test_new_leaves_the_title_to_the_automatic_one(page: Any, live_server: Any, staff: Any) -> None:
    log_in(page, live_server.url)
    page.wait_for_url(f"{live_server.url}/")
    with page.expect_request(
        lambda r: r.url.endswith("/api/conversations/") and r.method == "POST"
    ) as sent:
        page.click("#new-conversation")
    assert sent.value.post_data_json == {}
    page.locator("#conversations li.active", has_text="New conversation").wait_for()
    conversation = Conversation.objects.get()
    assert (conversation.title, conversation.title_source) == ("", "")
    page.fill("#input", "Weekend in Lisbon")
    page.click("#send")
    page.locator("#status", has_text="Run completed").wait_for()
    # The echo backend titles a conversation with its first question, after the reply.
    for _ in range(50):
        conversation.refresh_from_db()
        if conversation.title:
            break
        page.wait_for_timeout(100)
    assert (conversation.title, conversation.title_source) == ("Weekend in Lisbon", "auto")
    page.reload()
    page.locator("#conversations li", has_text="Weekend in Lisbon").wait_for()


def test_a_first_message_without_a_conversation_creates_it_untitled(
    page: Any, live_server: Any, staff: Any
) -> None:
    log_in(page, live_server.url)
    page.wait_for_url(f"{live_server.url}/")
    page.fill("#input", "Hello there")
    page.click("#send")
    page.locator("#status", has_text="Run completed").wait_for()
    conversation = Conversation.objects.get()
    # Not the user's: the automatic title may fill it (or has already).
    assert conversation.title_source != "user"
    assert conversation.title in ("", "Hello there")


def test_demo_page_marks_where_a_provider_compacted(
    page: Any, live_server: Any, staff: Any
) -> None:
    compacted = Reasoning("anthropic", ReasoningKind.COMPACTION, "The user asked about ferries.")
    create_conversation(
        owner=staff,
        title="Long trip",
        messages=[
            ChatMessage.user("Ferries to Bergen?"),
            ChatMessage.assistant("Daily at 08:15.", reasoning=[compacted]),
            ChatMessage.user("And back?"),
            ChatMessage.assistant("At 17:40."),
        ],
    )
    log_in(page, live_server.url)
    page.wait_for_url(f"{live_server.url}/")
    page.locator("#conversations li", has_text="Long trip").click()
    page.locator(".msg.assistant").nth(1).wait_for(state="visible")
    marks = page.locator(".compacted")
    assert marks.count() == 1
    assert "Compacted by anthropic" in marks.first.inner_text()
    # The mark sits on the turn that carries the state, and the state is never shown.
    assert "Daily at 08:15." in page.locator(".msg.assistant", has=marks).inner_text()
    assert "The user asked about ferries." not in page.content()
