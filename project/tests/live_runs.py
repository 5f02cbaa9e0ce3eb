"""What the browser tests of live runs share: a tool that waits for a gate, a provider
whose story halts mid-reply, the demo's settings with both, and signing in."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.test import Client
from django.utils.crypto import get_random_string

from llm_conversations.exceptions import ProviderUnavailableError
from llm_conversations.models import Run, RunStatus
from llm_conversations.providers import EchoProvider, StreamEvent, TextDelta
from llm_conversations.tools import tool

PASSWORD = "browser-pass"
# Each word is logged within TEXT_FLUSH_SECONDS: the stream halts with "Once upon a " shown.
STORY = ["Once ", "upon ", "a "]
HALTED = "".join(STORY)
STORY_PROMPT = "Tell me a story."
gate = threading.Event()


@tool
def wait_for_gate() -> str:
    """Works until the test opens the gate."""
    assert gate.wait(30)
    return "through"


class Storyteller(EchoProvider):
    """The echo backend, but a story streams word by word and halts before its end."""

    def send_stream(self, request: Any) -> Iterator[StreamEvent]:
        if request.messages[-1].content != STORY_PROMPT:
            yield from super().send_stream(request)
            return
        for word in STORY:
            time.sleep(0.1)  # past TEXT_FLUSH_SECONDS: the word before is logged by now
            yield TextDelta(word)
        # Halted until the gate opens, or until the run is cancelled: a real
        # provider's call is interrupted then (its connection is closed).
        while not gate.wait(0.05):
            if not Run.objects.filter(status=RunStatus.RUNNING).exists():
                raise ProviderUnavailableError("interrupted by the cancel")
        yield from super().send_stream(request)


def live_run_settings(settings: Any) -> Iterator[None]:
    """The demo's settings with the storyteller as default provider and the gated tool;
    the gate is open again afterwards, so nothing stays blocked."""
    settings.LLM_CONVERSATIONS = {
        **settings.LLM_CONVERSATIONS,
        "DEFAULT_PROVIDER": "story",
        "PROVIDERS": {"story": {"BACKEND": "project.tests.live_runs.Storyteller", "MODEL": "echo"}},
        "TOOLS": [*settings.LLM_CONVERSATIONS["TOOLS"], "project.tests.live_runs.wait_for_gate"],
    }
    gate.clear()
    yield
    gate.set()


def signed_in(user: Any) -> dict[str, str]:
    """The headers of a browser signed in as ``user``: its session, its CSRF token."""
    client = Client()
    client.force_login(user)
    session = client.cookies[settings.SESSION_COOKIE_NAME].value
    token = get_random_string(32)
    cookies = f"{settings.SESSION_COOKIE_NAME}={session}; {settings.CSRF_COOKIE_NAME}={token}"
    return {"Cookie": cookies, "X-CSRFToken": token}


def calls(*items: tuple[str, str, dict[str, Any]]) -> str:
    """A user text the echo backend answers with these tool calls."""
    return json.dumps(
        {
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                for i, n, a in items
            ]
        }
    )


def sign_in(page: Any, base: str, then: str) -> Any:
    """Sign in as the ``staff`` user (``PASSWORD``) and open ``then``; the page is returned."""
    page.goto(f"{base}/admin/login/?next={then}")
    page.fill("#id_username", "staff")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{base}{then}**")  # the page may add a query or a hash
    return page


def send(page: Any, text: str) -> None:
    """Type ``text`` in the page's ``#input`` and press ``#send``."""
    page.fill("#input", text)
    page.click("#send")
