"""Providers for the API's failure paths: one always fails, one is cancelled mid-reply."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any

from llm_conversations.core.completions import CompletionResponse
from llm_conversations.core.messages import MessageInput
from llm_conversations.models import Run, RunEvent, RunEventType, RunStatus
from llm_conversations.providers import (
    CompletionRequest,
    EchoProvider,
    ProviderUnavailableError,
    ResponseCompleted,
    StreamEvent,
    TextDelta,
)
from llm_conversations.runs import ToolLoopService


class BrokenProvider(EchoProvider):
    """Answers every call with a server error, as a provider that is down would."""

    backend = "broken"

    def send(self, request: CompletionRequest) -> CompletionResponse:
        raise ProviderUnavailableError(
            "broken: the service is unavailable (HTTP 503).", provider=self.backend, status_code=503
        )


class CancelledMidReply(EchoProvider):
    """Streams a reply during which another request cancels the run."""

    backend = "cancelled_mid_reply"

    def stream(
        self, messages: Iterable[MessageInput], *, tools: Any = None, **options: Any
    ) -> Iterator[StreamEvent]:
        yield TextDelta("before ")
        cancel_running_run()
        for _ in range(5):
            yield TextDelta("after ")
        yield ResponseCompleted(CompletionResponse("before after", provider=self.backend))


def cancel_running_run() -> None:
    """Cancel the running run from a provider's stream, as another request would,
    once the text streamed so far is in its log (the stream is read on a thread of
    its own, beside the loop's that writes the log)."""
    run = Run.objects.get(status=RunStatus.RUNNING)
    for _ in range(500):
        if RunEvent.objects.filter(run=run, type=RunEventType.TEXT_DELTA).exists():
            ToolLoopService().cancel(run.pk)
            return
        time.sleep(0.01)
    raise AssertionError("the streamed text was never logged")
