"""Running a turn's tool calls: which wait for a person or a frontend
(:func:`waiting_calls`), and running the rest with their deadlines, in
parallel, stoppable by a cancel (:func:`run_tool_calls`), each call's result a
tool turn.

Nothing here writes to the database: ``runs/transitions.store_results`` stores
what :func:`run_tool_calls` returns.
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
from llm_conversations.models import Decision, Run, WaitingCall, WaitReason
from llm_conversations.runs.live_connections import return_connection
from llm_conversations.runs.tool_contexts import tool_contexts
from llm_conversations.tools import ToolRegistry, async_loop, tool_result_message

__all__ = ["run_tool_calls", "waiting_calls"]

DENIED = "The operator denied this tool call."
TIMED_OUT = "The tool did not answer within {seconds:g} seconds."
STOPPED = "The run stopped before this tool call finished."
NOT_REPEATED = (
    "This call may already have run before its worker was lost, and the tool must not "
    "run twice, so it was not run again. Check its effect before asking for it again."
)


def waiting_calls(calls: Sequence[ToolCall], offered: ToolRegistry, run: Run) -> list[WaitingCall]:
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
        waiting.append(WaitingCall(call, reason))
    return waiting


def _timeout(call: ToolCall, offered: ToolRegistry) -> float | None:
    declared = offered.get(call.name).timeout if call.name in offered else None
    return declared if declared is not None else conf.TOOL_TIMEOUT


def _on_loop(call: ToolCall, offered: ToolRegistry) -> bool:
    """Whether ``call`` is of an async tool, which runs on the shared event loop."""
    return call.name in offered and offered.get(call.name).is_async


def run_tool_calls(
    calls: Sequence[ToolCall],
    offered: ToolRegistry,
    run: Run,
    *,
    stop: threading.Event | None = None,
    ran_before: Collection[str] = (),
) -> list[ChatMessage]:
    """Run each call's tool; the results (tool turns) in call order.

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
    batch = _Batch(calls, offered, run, ran_before)
    # The tools may take long; a tool that queries takes a connection again.
    return_connection()
    if batch.runs_here:
        return [batch.run_call(calls[0])]
    return batch.run_all(stop)


class _Batch:
    """The calls of one turn being run: each call's tool context, deadline and
    where it runs, when it started, and the steps from a call to its result."""

    def __init__(
        self,
        calls: Sequence[ToolCall],
        offered: ToolRegistry,
        run: Run,
        ran_before: Collection[str],
    ) -> None:
        self.calls = calls
        self.offered = offered
        self.run = run
        self.ran_before = ran_before
        self.contexts = tool_contexts(calls, offered, run)
        # The run's span, for the spans of calls executed in pool threads and on the loop.
        self.parent = telemetry.current_context()
        self.timeouts = [_timeout(call, offered) for call in calls]
        self.on_loop = [_on_loop(call, offered) for call in calls]
        self.started: dict[int, float] = {}

    @property
    def runs_here(self) -> bool:
        """One sync call without a deadline runs in this thread, no pool needed."""
        return len(self.calls) == 1 and self.timeouts[0] is None and not self.on_loop[0]

    def refused(self, call: ToolCall) -> ChatMessage | None:
        """The error result of a denied call, or of one that must not run twice."""
        if self.run.decision(call.id) is Decision.DENIED:
            return tool_result_message(call.id, DENIED, is_error=True)
        offered = self.offered
        if (
            call.id in self.ran_before
            and call.name in offered
            and not offered.get(call.name).repeatable
        ):
            return tool_result_message(call.id, NOT_REPEATED, is_error=True)
        return None

    def run_call(self, call: ToolCall) -> ChatMessage:
        """Run a sync call (or refuse it) in this thread."""
        if (message := self.refused(call)) is not None:
            return message
        with telemetry.tool_execution(call, self.parent) as traced:
            return traced.result(self.offered.execute(call, self.contexts.get(call.id)))

    def run_in_thread(self, index: int) -> ChatMessage:
        """Run a sync call on a pool thread, its deadline counted from now."""
        self.started[index] = time.monotonic()
        try:
            return self.run_call(self.calls[index])
        finally:
            # A tool that used the ORM opened this thread's own connection.
            connections.close_all()

    async def run_on_loop(self, index: int) -> ChatMessage:
        """Run an async call on the shared event loop, its deadline counted from now."""
        self.started[index] = time.monotonic()
        call = self.calls[index]
        if (message := self.refused(call)) is not None:
            return message
        with telemetry.tool_execution(call, self.parent) as traced:
            tool = self.offered.get(call.name)
            return traced.result(await tool.execute_async(call, self.contexts.get(call.id)))

    def run_all(self, stop: threading.Event | None) -> list[ChatMessage]:
        """Start every call where it runs, then wait for their results, in call order."""
        threaded = self.on_loop.count(False)
        pool = (
            ThreadPoolExecutor(max_workers=min(conf.TOOL_WORKERS, threaded)) if threaded else None
        )
        futures: dict[Future[ChatMessage], int] = {}
        try:
            for index in range(len(self.calls)):
                futures[self._start(index, pool)] = index
            results = self._gather(futures, stop)
            return [results[index] for index in range(len(self.calls))]
        finally:
            # Never wait for a call that timed out or was stopped; cancel the async ones.
            for future in futures:
                future.cancel()
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)

    def _start(self, index: int, pool: ThreadPoolExecutor | None) -> Future[ChatMessage]:
        if self.on_loop[index]:
            return async_loop.submit(self.run_on_loop(index))
        assert pool is not None
        return pool.submit(self.run_in_thread, index)

    def _gather(
        self, futures: dict[Future[ChatMessage], int], stop: threading.Event | None
    ) -> dict[int, ChatMessage]:
        """Each call's result by its index: its tool's, or an error once it is past its
        deadline or the run stopped."""
        results: dict[int, ChatMessage] = {}
        while len(results) < len(self.calls):
            pending = [f for f, index in futures.items() if index not in results]
            done, _ = wait(pending, timeout=0.05, return_when=FIRST_COMPLETED)
            for future in done:
                results[futures[future]] = future.result()
            running = {f: futures[f] for f in pending if f not in done}
            if stop is not None and stop.is_set():
                for index in running.values():
                    results.setdefault(index, self._error(index, STOPPED))
                break
            results.update(self._timed_out(running))
        return results

    def _timed_out(self, running: dict[Future[ChatMessage], int]) -> dict[int, ChatMessage]:
        """The error results of running calls past their deadline, each call cancelled."""
        now = time.monotonic()
        results = {}
        for future, index in running.items():
            limit = self.timeouts[index]
            if limit is None or index not in self.started or now - self.started[index] < limit:
                continue
            results[index] = self._error(index, TIMED_OUT.format(seconds=limit))
            future.cancel()  # cancels an async call's coroutine; a thread runs on
        return results

    def _error(self, index: int, text: str) -> ChatMessage:
        return tool_result_message(self.calls[index].id, text, is_error=True)
