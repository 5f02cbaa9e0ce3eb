"""The provider entries a run's model calls go to: its own, then its fallbacks.

A call that fails with a retryable error (:attr:`ProviderError.retryable`:
the provider unavailable, throttled or too slow, after the entry's own
retries) goes to the next entry of the chain (``FALLBACKS``,
docs/providers.md#fallbacks-and-circuit-breaker), with the same messages,
before anything of the failed attempt is stored. Other errors end the call:
a request the provider refused (invalid, or a bad key) says something about
the request or the configuration, which another provider would not fix.

An entry whose circuit breaker is open is skipped without a request. Each
move to another entry is logged as ``run.fallback`` (from, to, why); when
the failed attempt had streamed text, the event's ``superseded_after`` marks
that text as answered again, as a new attempt's ``run.running`` does.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from llm_conversations.core.parameters import RunParameters
from llm_conversations.exceptions import ParameterError
from llm_conversations.models import Run, RunEventType, RunStatus
from llm_conversations.providers import (
    Provider,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailableError,
    RateLimitError,
    get_provider,
)
from llm_conversations.providers.circuit_breaker import CircuitBreaker
from llm_conversations.providers.registry import circuit_breaker, fallback_chain
from llm_conversations.runs.events import FellBack
from llm_conversations.runs.log.reader import unstored_text_after
from llm_conversations.runs.log.writer import record
from llm_conversations.runs.transitions import held

__all__ = ["FALLBACK_REASONS", "Attempt", "ProviderChain", "failure_reason", "record_fallback"]

CIRCUIT_OPEN = "circuit_open"
FALLBACK_REASONS = ("unavailable", "rate_limited", "timeout", CIRCUIT_OPEN)
"""The words ``run.fallback`` gives for leaving an entry (:func:`failure_reason`)."""


def failure_reason(error: ProviderError | None) -> str:
    """The word a ``run.fallback`` event gives for leaving an entry."""
    if error is None:
        return CIRCUIT_OPEN
    if isinstance(error, ProviderTimeout):
        return "timeout"
    if isinstance(error, RateLimitError):
        return "rate_limited"
    return "unavailable"


@dataclass(frozen=True)
class Attempt:
    """One entry of the chain asked for one model call."""

    entry: str
    provider: Provider
    parameters: RunParameters
    breaker: CircuitBreaker | None = None
    fell_back: FellBack | None = None
    """How the call came to this entry, when it is not the run's own first choice."""

    def answered(self) -> None:
        """The entry answered (a reply, or a refusal of the request): its breaker closes."""
        if self.breaker is not None:
            self.breaker.succeeded()

    def interrupted(self) -> None:
        """The call was stopped by the run (a cancel, its deadline): no outcome."""
        if self.breaker is not None:
            self.breaker.release()


class ProviderChain:
    """A run's entry and its fallbacks, in the order they are tried.

    Built with a provider instance (``single``) there are no fallbacks and no
    breaker: the chain is that provider alone.
    """

    def __init__(self, entries: list[str], provider: Provider | None = None) -> None:
        self.entries = entries
        self._single = provider
        self._error: ProviderError | None = None

    @classmethod
    def of_entry(cls, name: str) -> ProviderChain:
        """The chain of the ``PROVIDERS`` entry ``name``."""
        return cls(fallback_chain(name))

    @classmethod
    def single(cls, name: str, provider: Provider) -> ProviderChain:
        """``provider`` alone, recorded as ``name``."""
        return cls([name], provider)

    @property
    def primary(self) -> Provider:
        """The provider of the run's own entry."""
        return self._single or get_provider(self.entries[0])

    def attempts(self, run: Run, parameters: RunParameters) -> Iterator[Attempt]:
        """The entries to ask for one call, in order; the caller reports each outcome.

        The next one is taken only after the last failed with a retryable
        error (:meth:`failed`); an entry whose breaker is open, or that cannot
        honour the run's parameters, is skipped. ``ProviderUnavailableError``
        when every entry is skipped.
        """
        self._error = None
        left: str | None = None
        for index, entry in enumerate(self.entries):
            if self._single is not None:
                yield Attempt(entry, self._single, parameters)
                break
            breaker = circuit_breaker(entry)
            if breaker is not None and not breaker.allow():
                left = left or entry
                continue
            provider = get_provider(entry)
            # A fallback answers with its own model: the run's may be another provider's.
            asked = parameters if index == 0 else replace(parameters, model=None)
            try:
                provider.check_parameters(asked)
            except ParameterError:
                if index == 0:
                    raise
                if breaker is not None:
                    breaker.release()
                continue
            fell_back = None
            if left is not None:
                fell_back = record_fallback(run, left, entry, self._error)
                if fell_back is None:
                    return
            yield Attempt(entry, provider, asked, breaker, fell_back)
            if self._error is None:
                return  # answered, or stopped: nothing more to try
            left = entry
        if self._error is not None:
            raise self._error
        first = self.entries[0]
        raise ProviderUnavailableError(
            f"provider entry {first!r} and its fallbacks are skipped: each one's circuit "
            "breaker is open after repeated failures.",
            provider=get_provider(first).backend,
        )

    def failed(self, attempt: Attempt, error: ProviderError) -> bool:
        """Report that ``attempt`` failed; whether the next entry is to be tried."""
        if not error.retryable:
            attempt.answered()  # the provider answered, refusing the request
            return False
        if attempt.breaker is not None:
            attempt.breaker.failed()
        self._error = error
        return True

    def succeeded(self, attempt: Attempt) -> None:
        """Report that ``attempt`` answered."""
        attempt.answered()
        self._error = None


def record_fallback(
    run: Run, left: str, entry: str, error: ProviderError | None
) -> FellBack | None:
    """Log ``run.fallback`` from entry ``left`` to ``entry`` and count it on the run;
    ``None`` (nothing written) when the run stopped running or was taken over.

    Text the failed attempt streamed is superseded: the event names the id of
    the last event before it, as a new attempt's ``run.running`` does.
    """
    data: dict[str, Any] = {
        "from_entry": left,
        "to_entry": entry,
        "reason": failure_reason(error),
    }
    if error is not None and error.status_code is not None:
        data["status_code"] = error.status_code
    with transaction.atomic():
        if not Run.objects.filter(held(run), status=RunStatus.RUNNING).update(
            fallbacks=F("fallbacks") + 1, updated_at=timezone.now()
        ):
            return None
        superseded = unstored_text_after(run.pk)
        if superseded is not None:
            data["superseded_after"] = superseded
            Run.objects.filter(pk=run.pk).update(superseded_text=True)
        record(run, [(RunEventType.RUN_FALLBACK, data)])
    run.fallbacks += 1
    return FellBack(left, entry, data["reason"], superseded=superseded is not None)
