"""Images and files at the HTTP boundary: each adapter's exact request body, and refusals."""

from __future__ import annotations

import base64

import httpx
import pytest

from llm_conversations.core.messages import ChatMessage, FilePart, ImagePart, TextPart, ToolCall
from llm_conversations.exceptions import InvalidMessage, UnsupportedContent
from llm_conversations.providers import (
    AnthropicProvider,
    EchoProvider,
    GeminiProvider,
    OllamaProvider,
    OpenAIProvider,
)

from . import test_anthropic, test_gemini, test_ollama, test_openai
from .conftest import Recorder

PNG = b"\x89PNG\r\n\x1a\nfake"
PDF = b"%PDF-1.4 fake %%EOF"
PNG64 = base64.b64encode(PNG).decode()
PDF64 = base64.b64encode(PDF).decode()

IMAGE = ImagePart("a1", mime_type="image/png", filename="cat.png", data=PNG)
DOCUMENT = FilePart("a2", mime_type="application/pdf", filename="spec.pdf", data=PDF)
USER = ChatMessage.user([TextPart("What is this?"), IMAGE, DOCUMENT])
CALL = ChatMessage.assistant_tool_calls([ToolCall("call_1", "screenshot", {})])
TOOL_IMAGE = ChatMessage.tool_result("call_1", [TextPart("the screen"), IMAGE])


def test_openai_sends_image_url_and_file_parts(make_provider):
    recorder = Recorder(httpx.Response(200, json=test_openai.TEXT_REPLY))
    provider, _ = make_provider(OpenAIProvider, recorder, model="gpt-4o")
    provider.complete([USER])
    assert recorder.body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG64}"}},
                {
                    "type": "file",
                    "file": {
                        "filename": "spec.pdf",
                        "file_data": f"data:application/pdf;base64,{PDF64}",
                    },
                },
            ],
        }
    ]


def test_anthropic_sends_image_and_document_blocks_also_in_tool_results(make_provider):
    recorder = Recorder(httpx.Response(200, json=test_anthropic.TEXT_REPLY))
    provider, _ = make_provider(AnthropicProvider, recorder, model="claude-sonnet-4-5", cache=False)
    provider.complete([USER, CALL, TOOL_IMAGE])
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": PNG64},
    }
    assert recorder.body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                image,
                {
                    "type": "document",
                    "source": {"type": "base64", "media_type": "application/pdf", "data": PDF64},
                },
            ],
        },
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "call_1", "name": "screenshot", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "call_1",
                    "content": [{"type": "text", "text": "the screen"}, image],
                }
            ],
        },
    ]


def test_gemini_sends_inline_data(make_provider):
    recorder = Recorder(httpx.Response(200, json=test_gemini.TEXT_REPLY))
    provider, _ = make_provider(GeminiProvider, recorder, model="gemini-2.5-flash")
    provider.complete([USER])
    assert recorder.body["contents"] == [
        {
            "role": "user",
            "parts": [
                {"text": "What is this?"},
                {"inlineData": {"mimeType": "image/png", "data": PNG64}},
                {"inlineData": {"mimeType": "application/pdf", "data": PDF64}},
            ],
        }
    ]


def test_ollama_sends_images_beside_the_text(make_provider):
    recorder = Recorder(httpx.Response(200, json=test_ollama.TEXT_REPLY))
    provider, _ = make_provider(OllamaProvider, recorder, model="llava", api_key=None)
    provider.complete([ChatMessage.user([TextPart("What is this?"), IMAGE])])
    assert recorder.body["messages"] == [
        {"role": "user", "content": "What is this?", "images": [PNG64]}
    ]


@pytest.mark.parametrize(
    ("cls", "messages", "refused"),
    [
        (OpenAIProvider, [USER, CALL, TOOL_IMAGE], "image parts in tool messages"),
        (GeminiProvider, [USER, CALL, TOOL_IMAGE], "image parts in tool messages"),
        (OllamaProvider, [USER], "file parts in user messages"),
        (OllamaProvider, [ChatMessage.user("x"), CALL, TOOL_IMAGE], "image parts in tool"),
    ],
)
def test_a_part_the_provider_cannot_take_is_refused_before_the_call(
    make_provider, cls, messages, refused
):
    recorder = Recorder()
    provider, _ = make_provider(cls, recorder)
    with pytest.raises(UnsupportedContent) as info:
        provider.complete(messages)
    assert info.value.code == "unsupported_content"
    assert refused in info.value.message
    assert recorder.requests == []


def test_unloaded_attachments_are_refused_before_the_call(make_provider):
    recorder = Recorder()
    provider, _ = make_provider(OpenAIProvider, recorder)
    with pytest.raises(InvalidMessage) as info:
        provider.complete([ChatMessage.user([{"type": "image", "attachment_id": "a1"}])])
    assert info.value.code == "unresolved_attachment"
    assert recorder.requests == []


def test_echo_describes_what_it_received():
    image = ImagePart("a1", mime_type="image/png", width=64, height=64, size=1229, data=b"x")
    reply = EchoProvider().complete([ChatMessage.user([TextPart("Look"), image, DOCUMENT])])
    assert reply.content == "Look [image/png 64x64, 1.2 KB] [application/pdf, 19 B]"
