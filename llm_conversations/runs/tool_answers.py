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
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from django.db import connections

from llm_conversations import telemetry
from llm_conversations.conf import conf
from llm_conversations.core.messages import ChatMessage, ToolCall
from llm_conversations.exceptions import ToolArgumentsError
from llm_conversations.models import Decision, PendingCall, Run, WaitReason
from llm_conversations.runs.live_connections import return_connection
from llm_conversations.runs.tool_contexts import tool_contexts
from llm_conversations.tools import ToolRegistry, async_loop, tool_result_message

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


def _on_loop(call: ToolCall, offered: ToolRegistry) -> bool:
    """Whether ``call`` is of an async tool, which runs on the shared event loop."""
    return call.name in offered and offered.get(call.name).is_async


def answer_calls(
    calls: Sequence[ToolCall],
    offered: ToolRegistry,
    run: Run,
    *,
    stop: threading.Event | None = None,
    ran_before: Collection[str] = (),
) -> list[ChatMessage]:
    """Answer each call, in call order.

    Calls of ``async def`` tools run on the process's shared event loop
    (:mod:`llm_conversations.tools.async_loop`), all at once; the others on a
    bounded thread pool when there are several calls or a timeout applies. A
    call still running at its timeout is answered with an error result: an
    async call is cancelled, a thread is left to finish on its own (Python
    cannot stop it). When ``stop`` is set (the run was cancelled elsewhere)
    waiting ends at once, the calls not done are answered as stopped (async
    ones cancelled); the caller stores nothing. A call in ``ran_before`` (it
    may have run before its worker was lost) of a tool declared
    ``repeatable=False`` is answered with an error, not run again.
    """

    contexts = tool_contexts(calls, offered, run)
    # The run's span, for the spans of calls executed in pool threads and on the loop.
    parent = telemetry.current_context()

    def refused(call: ToolCall) -> ChatMessage | None:
        if run.decision(call.id) is Decision.DENIED:
            return tool_result_message(call.id, DENIED, is_error=True)
        if call.id in ran_before and call.name in offered and not offered.get(call.name).repeatable:
            return tool_result_message(call.id, NOT_REPEATED, is_error=True)
        return None

    def answer(call: ToolCall) -> ChatMessage:
        if (message := refused(call)) is not None:
            return message
        with telemetry.tool_execution(call, parent) as traced:
            return traced.result(offered.execute(call, contexts.get(call.id)))

    timeouts = [_timeout(call, offered) for call in calls]
    on_loop = [_on_loop(call, offered) for call in calls]
    # The tools may take long; a tool that queries takes a connection again.
    return_connection()
    if len(calls) == 1 and timeouts[0] is None and not on_loop[0]:
        return [answer(calls[0])]
    started: dict[int, float] = {}

    def answer_in_thread(index: int) -> ChatMessage:
        started[index] = time.monotonic()
        try:
            return answer(calls[index])
        finally:
            # A tool that used the ORM opened this thread's own connection.
            connections.close_all()

    async def answer_on_loop(index: int) -> ChatMessage:
        started[index] = time.monotonic()
        call = calls[index]
        if (message := refused(call)) is not None:
            return message
        with telemetry.tool_execution(call, parent) as traced:
            tool = offered.get(call.name)
            return traced.result(await tool.execute_async(call, contexts.get(call.id)))

    threaded = on_loop.count(False)
    pool = ThreadPoolExecutor(max_workers=min(conf.TOOL_WORKERS, threaded)) if threaded else None
    futures: dict[Future[ChatMessage], int] = {}
    try:
        for i in range(len(calls)):
            if on_loop[i]:
                futures[async_loop.submit(answer_on_loop(i))] = i
            else:
                assert pool is not None
                futures[pool.submit(answer_in_thread, i)] = i
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
                    future.cancel()  # cancels an async call's coroutine; a thread runs on
        return [results[i] for i in range(len(calls))]
    finally:
        # Never wait for a call that timed out or was stopped; cancel the async ones.
        for future in futures:
            future.cancel()
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
