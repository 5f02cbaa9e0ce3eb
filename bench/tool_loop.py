"""Tool loop overhead and parallel tool speed-up.

1. Overhead per round: a zero-latency provider asks for one tool call per
   round; runs with 1 and 6 tool rounds (below the default iteration limit)
   are timed and their queries counted, and the difference divided by 5 is
   the cost of one round (a provider round plus a tool round) spent in the
   loop, the store, the event log and the database. SQL statements and
   transaction control (BEGIN/COMMIT) are counted apart.
2. Five tools that each sleep 0.2 s, run in parallel (TOOL_WORKERS=5) against
   one after another (TOOL_WORKERS=1): printed as a ratio.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

import django

django.setup()

from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext, setup_test_environment

from llm_conversations.conversations import create_conversation
from llm_conversations.core.completions import CompletionResponse, Usage
from llm_conversations.core.messages import (
    ChatMessage,
    MessageInput,
    Role,
    ToolCall,
    as_chat_messages,
)
from llm_conversations.providers import Provider
from llm_conversations.runs import ToolLoopService
from llm_conversations.tools import ToolRegistry, tool


class ScriptedProvider(Provider):
    """Answers instantly: one call to ``tick`` per round until ``rounds``, then text."""

    backend = "scripted"
    uses_http = False

    def __init__(self, rounds: int) -> None:
        super().__init__(model="scripted")
        self.rounds = rounds

    def complete(
        self,
        messages: Iterable[MessageInput],
        *,
        tools: Sequence[Any] | None = None,
        **options: Any,
    ) -> CompletionResponse:
        history = as_chat_messages(messages)
        done = sum(1 for m in history if m.role is Role.ASSISTANT)
        if done < self.rounds:
            return CompletionResponse("", (ToolCall(f"c{done}", "tick"),), usage=Usage(1, 1))
        return CompletionResponse("done", usage=Usage(1, 1))


@tool
def tick() -> str:
    """Returns at once."""
    return "ok"


@tool
def slow(n: int) -> str:
    """Sleeps 0.2 s."""
    time.sleep(0.2)
    return f"slow {n}"


TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE SAVEPOINT")


def timed_run(rounds: int) -> tuple[float, int, int]:
    """Seconds, SQL statements, and transaction control statements of one run."""
    service = ToolLoopService(ScriptedProvider(rounds), tools=ToolRegistry([tick]))
    run = service.start(create_conversation(), ChatMessage.user("go"))
    with CaptureQueriesContext(connection) as queries:
        started = time.perf_counter()
        assert service.execute(run.pk).status == "completed"
        elapsed = time.perf_counter() - started
    control = sum(1 for q in queries if q["sql"].startswith(TRANSACTION_CONTROL))
    return elapsed, len(queries) - control, control


def parallel_seconds(workers: int) -> float:
    class FiveSlowCalls(ScriptedProvider):
        def complete(self, messages: Iterable[MessageInput], **kwargs: Any) -> CompletionResponse:
            if any(m.role is Role.TOOL for m in as_chat_messages(messages)):
                return CompletionResponse("done")
            calls = tuple(ToolCall(f"s{i}", "slow", {"n": i}) for i in range(5))
            return CompletionResponse("", calls)

    service = ToolLoopService(FiveSlowCalls(1), tools=ToolRegistry([slow]))
    with override_settings(LLM_CONVERSATIONS={"TOOL_WORKERS": workers}):
        run = service.start(create_conversation(), ChatMessage.user("go"))
        started = time.perf_counter()
        service.execute(run.pk)
        return time.perf_counter() - started


def main() -> None:
    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0)
    try:
        timed_run(2)  # warm up
        short = min((timed_run(1) for _ in range(5)), key=lambda r: r[0])
        long = min((timed_run(6) for _ in range(5)), key=lambda r: r[0])
        per_round_ms = (long[0] - short[0]) / 5 * 1000
        per_round_statements = (long[1] - short[1]) / 5
        per_round_control = (long[2] - short[2]) / 5
        print(f"database: {connection.vendor}")
        print(
            f"loop overhead per tool round (provider round + tool round): "
            f"{per_round_ms:.2f} ms, {per_round_statements:g} SQL statements "
            f"(target <= 8) in {per_round_control / 2:g} transactions "
            f"(+{per_round_control:g} BEGIN/COMMIT)"
        )
        sequential = parallel_seconds(1)
        parallel = parallel_seconds(5)
        print(f"five 0.2 s tools one after another: {sequential:.3f} s")
        print(f"five 0.2 s tools in parallel:       {parallel:.3f} s")
        print(f"speed-up: {sequential / parallel:.2f}x (ideal 5x)")
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
