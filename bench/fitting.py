"""Fit a 5,000-message conversation into an 8k context window, 50 rounds.

Prints the time of the first round (every message counted; the median of
five runs) and of the later rounds (only what each round added), per strategy, and the number of summaries
the ``summarize`` strategy asks for over the 50 rounds (one per dropped range:
a new one only when the kept part no longer fits). Pure Python: the fitter of
``llm_conversations/core/fitting.py`` with the heuristic counter, no database.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from llm_conversations.core.fitting import ContextFitter, ContextStrategy
from llm_conversations.core.messages import ChatMessage
from llm_conversations.core.tool_calls import ToolCall

MESSAGES = 5000
WINDOW = 8192
ROUNDS = 50
SUMMARY_TOKENS = 1024
REPEATS = 5
TEXT = "The weather in the city is mild today, with a light wind from the west. " * 3


def conversation(size: int) -> list[ChatMessage]:
    """A system prompt, then turns of a user, two parallel calls, results and an answer."""
    history = [ChatMessage.system("You are a helpful assistant.")]
    turn = 0
    while len(history) < size:
        calls = [ToolCall(f"c{turn}_{i}", "weather", {"city": f"city {i}"}) for i in range(2)]
        history += [
            ChatMessage.user(f"{turn}: {TEXT}"),
            ChatMessage.assistant_tool_calls(calls),
            *(ChatMessage.tool_result(c.id, TEXT) for c in calls),
            ChatMessage.assistant(TEXT),
        ]
        turn += 1
    return history[:size]


def bench(strategy: ContextStrategy) -> tuple[float, float, float, int]:
    """First-round ms, median and worst later-round ms, summaries made."""
    history = conversation(MESSAGES)
    fitter = ContextFitter(WINDOW - 1024)
    summary_end: int | None = None
    summaries = 0
    times = []
    for turn in range(ROUNDS):
        if turn:
            history += [ChatMessage.user(f"more {turn}: {TEXT}"), ChatMessage.assistant(TEXT)]
        started = time.perf_counter()
        fitter.extend(history)
        known = {} if summary_end is None else {"summary_end": summary_end}
        cut = fitter.fit(
            200,
            strategy=strategy,
            summary_tokens=SUMMARY_TOKENS,
            summary_budget=SUMMARY_TOKENS,
            **known,  # type: ignore[arg-type]
        )
        times.append((time.perf_counter() - started) * 1000)
        if cut.summary_end is not None and cut.summary_end != summary_end:
            summaries += 1
            summary_end = cut.summary_end
    return times[0], statistics.median(times[1:]), max(times[1:]), summaries


def main() -> None:
    print(f"{MESSAGES} messages into a {WINDOW}-token window, {ROUNDS} rounds")
    for strategy in (ContextStrategy.TRUNCATE, ContextStrategy.SUMMARIZE):
        results = [bench(strategy) for _ in range(REPEATS)]
        first = statistics.median(r[0] for r in results)
        later = statistics.median(r[1] for r in results)
        worst = max(r[2] for r in results)
        summaries = results[0][3]
        line = (
            f"{strategy.value:>9}: first round {first:.2f} ms (median of {REPEATS}), later "
            f"rounds {later:.3f} ms (median), {worst:.3f} ms (worst)"
        )
        if strategy is ContextStrategy.SUMMARIZE:
            line += f", {summaries} summaries made"
        print(line)


if __name__ == "__main__":
    main()
