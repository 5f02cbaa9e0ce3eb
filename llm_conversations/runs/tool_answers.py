"""Answering a turn's tool calls: which wait for a person or a frontend
(:func:`waiting_calls`), and running the rest with their deadlines, in
parallel, stoppable by a cancel (:func:`answer_calls`).

Nothing here writes to the database: ``runs/transitions.store_results`` stores
what :func:`answer_calls` returns.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

from django.db import connections

from llm_conversations import telemetry
from llm_conversations.conf import conf
from llm_conversations.core.messages import ChatMessage, ToolCall
from llm_conversations.exceptions import ToolArgumentsError
from llm_conversations.models import Decision, PendingCall, Run, WaitReason
from llm_conversations.runs.live_connections import return_connection
from llm_conversations.runs.tool_contexts import tool_contexts
from llm_conversations.tools import ToolRegistry, tool_result_message

__all__ = ["answer_calls", "waiting_calls"]

DENIED = "The operator denied this tool call."
TIMED_OUT = "The tool did not answer within {seconds:g} seconds."
STOPPED = "The run stopped before this tool call finished."
NOT_REPEATED = (
    "This call may already have run before its worker was lost, and the tool must not "
    "run twice, so it was not run again. Check its effect before asking for it again."
)


def waiting_calls(calls: Sequence[ToolCall], offered: ToolRegistry, run: Run) -> list[PendingCall]:
    """Calls that need a person or a frontend before the turn's calls may run.

    A call whose arguments fail its tool's schema waits for nobody: it is
    answered with an error result like any other tool's.
    """
    waiting = []
    for call in calls:
        if call.name not in offered:
            continue
        tool = offered.get(call.name)
        if tool.is_client_side:
            reason = WaitReason.CLIENT_SIDE
        elif tool.requires_approval and run.decision(call.id) is None:
            reason = WaitReason.REQUIRES_APPROVAL
        else:
            continue
        try:
            tool.validate_call(call)
        except ToolArgumentsError:
            continue
        waiting.append(PendingCall(call, reason))
    return waiting


def _timeout(call: ToolCall, offered: ToolRegistry) -> float | None:
    declared = offered.get(call.name).timeout if call.name in offered else None
    return declared if declared is not None else conf.TOOL_TIMEOUT


def answer_calls(
    calls: Sequence[ToolCall],
    offered: ToolRegistry,
    run: Run,
    *,
    stop: threading.Event | None = None,
    ran_before: Collection[str] = (),
) -> list[ChatMessage]:
    """Answer each call, in call order.

    Calls run on a bounded thread pool when there are several or a timeout
    applies; a call still running at its timeout is answered with an error
    result and its thread is left to finish on its own (Python cannot stop it).
    When ``stop`` is set (the run was cancelled elsewhere) waiting ends at once
    and the calls not done are answered as stopped; the caller stores nothing.
    A call in ``ran_before`` (it may have run before its worker was lost) of a
    tool declared ``repeatable=False`` is answered with an error, not run again.
    """

    contexts = tool_contexts(calls, offered, run)
    # The run's span, for the spans of calls executed in pool threads.
    parent = telemetry.current_context()

    def answer(call: ToolCall) -> ChatMessage:
        if run.decision(call.id) is Decision.DENIED:
            return tool_result_message(call.id, DENIED, is_error=True)
        if call.id in ran_before and call.name in offered and not offered.get(call.name).repeatable:
            return tool_result_message(call.id, NOT_REPEATED, is_error=True)
        with telemetry.tool_execution(call, parent) as traced:
            return traced.result(offered.execute(call, contexts.get(call.id)))

    timeouts = [_timeout(call, offered) for call in calls]
    # The tools may take long; a tool that queries takes a connection again.
    return_connection()
    if len(calls) == 1 and timeouts[0] is None:
        return [answer(calls[0])]
    started: dict[int, float] = {}

    def answer_in_thread(index: int) -> ChatMessage:
        started[index] = time.monotonic()
        try:
            return answer(calls[index])
        finally:
            # A tool that used the ORM opened this thread's own connection.
            connections.close_all()

    pool = ThreadPoolExecutor(max_workers=min(conf.TOOL_WORKERS, len(calls)))
    try:
        futures = {pool.submit(answer_in_thread, i): i for i in range(len(calls))}
        results: dict[int, ChatMessage] = {}
        while len(results) < len(calls):
            pending = [f for f, i in futures.items() if i not in results]
            done, _ = wait(pending, timeout=0.05, return_when=FIRST_COMPLETED)
            for future in done:
                results[futures[future]] = future.result()
            if stop is not None and stop.is_set():
                for future in pending:
                    index = futures[future]
                    results.setdefault(
                        index, tool_result_message(calls[index].id, STOPPED, is_error=True)
                    )
                break
            now = time.monotonic()
            for future in pending:
                index = futures[future]
                limit = timeouts[index]
                if future in done or limit is None or index not in started:
                    continue
                if now - started[index] >= limit:
                    message = TIMED_OUT.format(seconds=limit)
                    results[index] = tool_result_message(calls[index].id, message, is_error=True)
        return [results[i] for i in range(len(calls))]
    finally:
        # Never wait for a call that timed out.
        pool.shutdown(wait=False, cancel_futures=True)
