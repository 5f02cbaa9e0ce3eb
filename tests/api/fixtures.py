"""A provider that always fails, for the API's provider-error paths."""

from __future__ import annotations

from llm_conversations.completions import CompletionResponse
from llm_conversations.providers import (
    CompletionRequest,
    EchoProvider,
    ProviderUnavailableError,
)


class BrokenProvider(EchoProvider):
    """Answers every call with a server error, as a provider that is down would."""

    backend = "broken"

    def send(self, request: CompletionRequest) -> CompletionResponse:
        raise ProviderUnavailableError(
            "broken: the service is unavailable (HTTP 503).", provider=self.backend, status_code=503
        )
