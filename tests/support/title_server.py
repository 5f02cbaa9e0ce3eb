"""A title provider for the tests: the OpenAI adapter over an ``httpx.MockTransport``.

The provider is built from settings like any other (``TITLE_PROVIDER`` names
it); its transport answers with whatever the current :class:`TitleServer`
holds, so each test scripts the replies and reads the exact requests.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx

from llm_conversations.providers import OpenAIProvider

API_KEY = "sk-title-SECRET-0123456789abcdef"


def reply(content: str) -> httpx.Response:
    """An OpenAI Chat Completions answer with this text."""
    return httpx.Response(
        200,
        json={
            "id": "chatcmpl-title",
            "model": "gpt-title",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 40, "completion_tokens": 4, "total_tokens": 44},
        },
    )


class TitleServer:
    """Answers each request with the next reply (or raises it); keeps the requests.

    ``before_reply`` runs while the provider waits for its answer, as another
    request would.
    """

    def __init__(self) -> None:
        self.replies: list[httpx.Response | Exception] = []
        self.requests: list[httpx.Request] = []
        self.before_reply: Callable[[], None] | None = None

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.before_reply is not None:
            self.before_reply()
        answer = self.replies.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    @property
    def bodies(self) -> list[Any]:
        return [json.loads(request.content) for request in self.requests]


current = TitleServer()


class MockedOpenAI(OpenAIProvider):
    """The OpenAI adapter whose HTTP client talks to :data:`current`."""

    def __init__(self, **kwargs: Any) -> None:
        transport = httpx.MockTransport(lambda request: current(request))
        super().__init__(http_client=httpx.Client(transport=transport), **kwargs)


def title_settings(base: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """``base`` with the provider ``titles`` as ``TITLE_PROVIDER``."""
    return {
        **base,
        "PROVIDERS": {
            **base["PROVIDERS"],
            "titles": {
                "BACKEND": "tests.support.title_server.MockedOpenAI",
                "MODEL": "gpt-title",
                "API_KEY": API_KEY,
                "MAX_RETRIES": 0,
                "OPTIONS": {"max_tokens": 20},
            },
        },
        "TITLE_PROVIDER": "titles",
        **extra,
    }
