"""A provider that always fails, for the API's provider-error paths."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from llm_conversations.completions import CompletionResponse
from llm_conversations.messages import MessageInput
from llm_conversations.providers import EchoProvider, ProviderUnavailableError


class BrokenProvider(EchoProvider):
    """Answers every call with a server error, as a provider that is down would."""

    backend = "broken"

    def complete(
        self, messages: Iterable[MessageInput], *, tools: Any = None, **options: Any
    ) -> CompletionResponse:
        raise ProviderUnavailableError(
            "broken: the service is unavailable (HTTP 503).", provider=self.backend, status_code=503
        )
