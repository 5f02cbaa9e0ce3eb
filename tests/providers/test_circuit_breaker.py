"""The circuit breaker of a provider entry, on a clock the tests move by hand."""

from __future__ import annotations

import threading
from typing import Any

from llm_conversations.providers.circuit_breaker import BreakerSettings, CircuitBreaker
from llm_conversations.providers.registry import circuit_breaker, fallback_chain


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def breaker(failures: int = 3, reset_after: float = 10.0) -> tuple[CircuitBreaker, Clock]:
    clock = Clock()
    return CircuitBreaker(BreakerSettings(failures, reset_after), clock), clock


def test_it_opens_after_failures_in_a_row_only() -> None:
    b, _ = breaker(failures=3)
    b.failed()
    b.failed()
    b.succeeded()  # an answer in between starts the count again
    b.failed()
    b.failed()
    assert b.allow()
    assert not b.is_open
    b.failed()
    assert b.is_open
    assert not b.allow()


def test_after_the_reset_one_trial_goes_through() -> None:
    b, clock = breaker(failures=1, reset_after=10)
    b.failed()
    clock.now += 9.9
    assert not b.allow()
    clock.now += 0.2
    assert b.allow()
    assert not b.allow(), "one trial at a time"
    b.succeeded()
    assert b.allow()
    assert b.allow()
    assert not b.is_open


def test_a_failed_trial_opens_it_again_for_a_whole_reset() -> None:
    b, clock = breaker(failures=3, reset_after=10)
    for _ in range(3):
        b.failed()
    clock.now += 10
    assert b.allow()
    b.failed()  # one failure is enough after a trial
    clock.now += 9
    assert not b.allow()
    clock.now += 1
    assert b.allow()


def test_a_trial_without_an_outcome_lets_the_next_caller_try() -> None:
    b, clock = breaker(failures=1, reset_after=1)
    b.failed()
    clock.now += 1
    assert b.allow()
    b.release()
    assert b.allow()


def test_threads_racing_for_the_trial_get_one() -> None:
    b, clock = breaker(failures=1, reset_after=1)
    b.failed()
    clock.now += 1
    start = threading.Barrier(16)
    allowed: list[bool] = []
    lock = threading.Lock()

    def ask() -> None:
        start.wait()
        answer = b.allow()
        with lock:
            allowed.append(answer)

    threads = [threading.Thread(target=ask) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(allowed) == [False] * 15 + [True]


def test_failures_counted_from_many_threads_are_all_counted() -> None:
    b, _ = breaker(failures=400)
    threads = [threading.Thread(target=lambda: [b.failed() for _ in range(50)]) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert b.is_open


def ollama(**values: object) -> dict[str, object]:
    return {"BACKEND": "ollama", "MODEL": "m", **values}


def test_the_chain_is_each_entry_then_its_fallbacks_depth_first_each_once(settings: Any) -> None:
    settings.LLM_CONVERSATIONS = {
        "PROVIDERS": {
            "a": ollama(FALLBACKS=["b", "c"]),
            "b": ollama(FALLBACKS=["d", "c"]),
            "c": ollama(FALLBACKS=["d"]),
            "d": ollama(),
        },
        "DEFAULT_PROVIDER": "a",
    }
    assert fallback_chain("a") == ["a", "b", "d", "c"]
    assert fallback_chain("c") == ["c", "d"]
    assert fallback_chain("d") == ["d"]


def test_each_entry_has_its_own_breaker_until_the_settings_change(settings: Any) -> None:
    breaking = {"FAILURES": 1, "RESET_AFTER": 30}
    settings.LLM_CONVERSATIONS = {
        "PROVIDERS": {"a": ollama(CIRCUIT_BREAKER=breaking), "b": ollama()},
        "DEFAULT_PROVIDER": "a",
    }
    first = circuit_breaker("a")
    assert first is not None
    assert circuit_breaker("a") is first
    assert circuit_breaker("b") is None
    first.failed()
    settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS}
    fresh = circuit_breaker("a")
    assert fresh is not first
    assert fresh is not None
    assert not fresh.is_open
