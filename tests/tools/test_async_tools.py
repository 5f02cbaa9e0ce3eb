"""``async def`` tools run on the one event loop of the process: together, cancellable.

Real loop, real threads: the calls of a turn are run by
``run_tool_calls`` (and by a whole run) as the loop runs them, and each tool
records the thread and the loop it ran on, how many calls ran at once, and
whether it was cancelled.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
import warnings
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from llm_conversations.conversations import create_conversation, load_messages
from llm_conversations.core.messages import ChatMessage, Role, ToolCall
from llm_conversations.exceptions import ToolError
from llm_conversations.models import Run, RunEvent, RunEventType
from llm_conversations.providers import EchoProvider
from llm_conversations.runs import ToolLoopService
from llm_conversations.runs.tool_runs import STOPPED, TIMED_OUT, run_tool_calls
from llm_conversations.tools import ToolContext, ToolRegistry, tool
from llm_conversations.tools.async_loop import shared_loop, submit

pytestmark = pytest.mark.django_db


class Probe:
    """What the async tools of a test saw: threads, loops, overlap, cancellations."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.threads: set[int] = set()
        self.loops: set[int] = set()
        self.running = 0
        self.peak = 0
        self.cancelled: list[str] = []
        self.was_cancelled = threading.Event()

    def enter(self) -> None:
        with self.lock:
            self.threads.add(threading.get_ident())
            self.loops.add(id(asyncio.get_running_loop()))
            self.running += 1
            self.peak = max(self.peak, self.running)

    def leave(self) -> None:
        with self.lock:
            self.running -= 1

    async def wait_to_be_cancelled(self, name: str) -> str:
        """Wait far longer than any test, noting the cancel that ends the wait."""
        self.enter()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            with self.lock:
                self.cancelled.append(name)
            self.was_cancelled.set()
            raise
        finally:
            self.leave()
        return "too late"


def probed_tools(probe: Probe, stop: threading.Event | None = None) -> ToolRegistry:
    @tool
    async def nap(seconds: float) -> str:
        """Sleep a while, then answer."""
        probe.enter()
        try:
            await asyncio.sleep(seconds)
            return f"slept {seconds:g}"
        finally:
            probe.leave()

    @tool
    async def together(count: int) -> str:
        """Wait (at most 5 s) until ``count`` calls have run at once."""
        probe.enter()
        try:
            deadline = time.monotonic() + 5
            while probe.peak < count and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            return f"{probe.peak} at once"
        finally:
            probe.leave()

    @tool(timeout=0.2)
    async def hang() -> str:
        """Never answers in time."""
        return await probe.wait_to_be_cancelled("hang")

    @tool
    async def fails() -> str:
        """Always raises."""
        probe.enter()
        probe.leave()
        raise ValueError("the async tool broke")

    @tool
    async def stops_its_run() -> str:
        """The run is stopped while this call waits."""
        assert stop is not None
        stop.set()
        return await probe.wait_to_be_cancelled("stops_its_run")

    @tool
    def sync_time() -> str:
        """A synchronous tool in the same turn."""
        return "09:00"

    return ToolRegistry([nap, together, hang, fails, stops_its_run, sync_time])


def a_run() -> Run:
    """A queued run whose calls the tests answer."""
    return ToolLoopService(EchoProvider(), tools=ToolRegistry()).start(
        create_conversation(), ChatMessage.user("go")
    )


def contents(results: list[ChatMessage]) -> list[tuple[str | None, bool, str]]:
    return [(r.tool_call_id, r.is_error, r.content) for r in results]


def test_the_async_calls_of_turns_run_together_on_one_loop_thread(settings: Any) -> None:
    # One pool thread and no timeout: async calls take no pool thread, even alone.
    settings.LLM_CONVERSATIONS = {
        **settings.LLM_CONVERSATIONS,
        "TOOL_WORKERS": 1,
        "TOOL_TIMEOUT": None,
    }
    probe = Probe()
    tools, run = probed_tools(probe), a_run()
    calls = [
        ToolCall("a", "nap", {"seconds": 0.3}),
        ToolCall("t", "sync_time"),
        ToolCall("b", "nap", {"seconds": 0.1}),
        ToolCall("c", "nap", {"seconds": 0.2}),
    ]
    results = run_tool_calls(calls, tools, run)
    assert contents(results) == [
        ("a", False, "slept 0.3"),
        ("t", False, "09:00"),
        ("b", False, "slept 0.1"),
        ("c", False, "slept 0.2"),
    ]
    assert probe.peak == 3  # all three slept at once
    # A second turn, and a lone call: the same loop on the same thread.
    assert contents(run_tool_calls([ToolCall("d", "nap", {"seconds": 0})], tools, run)) == [
        ("d", False, "slept 0")
    ]
    assert len(probe.threads) == 1
    assert len(probe.loops) == 1
    assert probe.threads != {threading.get_ident()}
    assert probe.loops == {id(shared_loop())}


def test_runs_on_other_threads_share_the_loop() -> None:
    probe = Probe()
    tools = probed_tools(probe)
    results: list[list[ChatMessage]] = []
    run = a_run()

    def answer(name: str) -> None:
        results.append(run_tool_calls([ToolCall(name, "together", {"count": 3})], tools, run))

    threads = [threading.Thread(target=answer, args=(f"n{i}",)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert [r[0].content for r in results] == ["3 at once"] * 3
    assert probe.peak == 3
    assert len(probe.threads) == len(probe.loops) == 1


def test_a_timed_out_async_call_is_cancelled_and_the_loop_serves_on() -> None:
    probe = Probe()
    tools, run = probed_tools(probe), a_run()
    started = time.monotonic()
    results = run_tool_calls(
        [ToolCall("h", "hang"), ToolCall("n", "nap", {"seconds": 0.05})], tools, run
    )
    assert time.monotonic() - started < 2  # not the tool's 30 s
    assert contents(results) == [
        ("h", True, TIMED_OUT.format(seconds=0.2)),
        ("n", False, "slept 0.05"),
    ]
    assert probe.was_cancelled.wait(2)
    assert probe.cancelled == ["hang"]
    later = run_tool_calls([ToolCall("m", "nap", {"seconds": 0})], tools, run)
    assert contents(later) == [("m", False, "slept 0")]
    assert len(probe.threads) == 1


def test_a_failing_async_tool_is_an_error_result_and_the_loop_serves_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    probe = Probe()
    tools, run = probed_tools(probe), a_run()
    with caplog.at_level(logging.ERROR, logger="llm_conversations.tools"):
        results = run_tool_calls([ToolCall("f", "fails")], tools, run)
    assert contents(results) == [("f", True, "ValueError: the async tool broke")]
    (record,) = [r for r in caplog.records if r.name == "llm_conversations.tools"]
    assert record.getMessage() == "Tool fails failed answering call f."
    assert record.exc_info is not None
    assert record.exc_info[0] is ValueError
    later = run_tool_calls([ToolCall("n", "nap", {"seconds": 0})], tools, run)
    assert contents(later) == [("n", False, "slept 0")]
    assert len(probe.threads) == 1


def test_a_stopped_async_call_is_cancelled() -> None:
    probe, stop = Probe(), threading.Event()
    tools, run = probed_tools(probe, stop), a_run()
    started = time.monotonic()
    results = run_tool_calls(
        [ToolCall("n", "nap", {"seconds": 0}), ToolCall("s", "stops_its_run")],
        tools,
        run,
        stop=stop,
    )
    assert time.monotonic() - started < 2
    assert [r.tool_call_id for r in results] == ["n", "s"]
    assert contents(results)[1] == ("s", True, STOPPED)
    assert probe.was_cancelled.wait(2)
    assert probe.cancelled == ["stops_its_run"]


def test_invalid_arguments_of_an_async_tool_are_an_error_result() -> None:
    probe = Probe()
    tools, run = probed_tools(probe), a_run()
    (result,) = run_tool_calls([ToolCall("x", "nap", {"seconds": "long"})], tools, run)
    assert result.is_error
    assert result.content.startswith("Invalid arguments for nap: seconds:")
    assert probe.peak == 0  # the function never ran


def test_a_run_stores_the_results_of_its_async_calls_in_call_order() -> None:
    probe = Probe()
    calls = [
        {"id": "a", "type": "function", "function": {"name": "nap", "arguments": {"seconds": 0.2}}},
        {"id": "t", "type": "function", "function": {"name": "sync_time", "arguments": {}}},
        {"id": "b", "type": "function", "function": {"name": "nap", "arguments": {"seconds": 0}}},
    ]
    conversation = create_conversation()
    text = json.dumps({"tool_calls": calls})
    run = ToolLoopService(EchoProvider(), tools=probed_tools(probe)).send(
        conversation, ChatMessage.user(text)
    )
    assert run.status == "completed"
    results = [m for m in load_messages(conversation) if m.role is Role.TOOL]
    assert contents(results) == [
        ("a", False, "slept 0.2"),
        ("t", False, "09:00"),
        ("b", False, "slept 0"),
    ]
    assert probe.peak == 2
    assert probe.loops == {id(shared_loop())}


@pytest.mark.django_db(transaction=True)
def test_an_async_tool_gets_its_context_and_reports_progress_through_sync_to_async() -> None:
    @tool
    async def counts(context: ToolContext) -> str:
        """Reports progress once, then answers."""
        recorded = await sync_to_async(context.progress)("half way", 0.5)
        # The query ran on asgiref's one thread, which lives on: give its connection back.
        await sync_to_async(connections.close_all)()
        return f"{context.call_id} recorded={recorded}"

    calls = [{"id": "c1", "type": "function", "function": {"name": "counts", "arguments": {}}}]
    conversation = create_conversation()
    run = ToolLoopService(EchoProvider(), tools=ToolRegistry([counts])).send(
        conversation, ChatMessage.user(json.dumps({"tool_calls": calls}))
    )
    (result,) = [m for m in load_messages(conversation) if m.role is Role.TOOL]
    assert (result.is_error, result.content) == (False, "c1 recorded=True")
    progress = RunEvent.objects.filter(run=run, type=RunEventType.TOOL_CALL_PROGRESS)
    assert [e.data for e in progress] == [
        {"tool_call_id": "c1", "text": "half way", "fraction": 0.5}
    ]


# Tool.execute and execute_async called directly ----------------------------------------


def test_execute_of_an_async_tool_waits_on_the_shared_loop() -> None:
    probe = Probe()
    tools = probed_tools(probe)
    result = tools.execute(ToolCall("n", "nap", {"seconds": 0.01}))
    assert (result.is_error, result.content) == (False, "slept 0.01")
    assert probe.loops == {id(shared_loop())}
    assert probe.threads != {threading.get_ident()}
    failed = tools.execute(ToolCall("f", "fails"))
    assert (failed.is_error, failed.content) == (True, "ValueError: the async tool broke")


def test_execute_async_is_awaited_on_any_loop_and_execute_refuses_to_block_one() -> None:
    tools = probed_tools(Probe())
    nap = tools.get("nap")

    async def inside_a_loop() -> tuple[ChatMessage, ChatMessage]:
        awaited = await nap.execute_async(ToolCall("a", "nap", {"seconds": 0}))
        return awaited, nap.execute(ToolCall("b", "nap", {"seconds": 0}))

    awaited, blocked = asyncio.run(inside_a_loop())
    assert (awaited.is_error, awaited.content) == (False, "slept 0")
    assert blocked.is_error
    assert blocked.content.startswith("RuntimeError: nap is async: await execute_async()")
    with pytest.raises(ToolError) as info:
        asyncio.run(tools.get("sync_time").execute_async(ToolCall("t", "sync_time")))
    assert info.value.code == "not_async"


# The loop itself -------------------------------------------------------------------------


def test_a_loop_that_stopped_is_replaced_and_its_calls_are_cancelled() -> None:
    loop = shared_loop()
    gate = threading.Event()

    async def waits() -> None:
        gate.set()
        await asyncio.sleep(30)

    waiting = submit(waits())
    assert gate.wait(2)
    loop.call_soon_threadsafe(loop.stop)
    deadline = time.monotonic() + 5
    while not loop.is_closed() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert loop.is_closed()
    assert waiting.cancelled()  # nobody waits forever on the stopped loop

    async def answer() -> int:
        return 42

    assert submit(answer()).result(timeout=5) == 42
    assert shared_loop() is not loop


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_gets_a_loop_of_its_own() -> None:
    async def pid_and_loop() -> tuple[int, int]:
        return os.getpid(), id(asyncio.get_running_loop())

    parent_loop = id(shared_loop())
    assert submit(pid_and_loop()).result(timeout=5)[0] == os.getpid()
    with warnings.catch_warnings():
        # Python 3.12+ warns of forking a process with threads; this child uses none of them.
        warnings.simplefilter("ignore", DeprecationWarning)
        child = os.fork()
    if child == 0:  # the child: its copy of the loop has no thread to run it
        try:
            pid, loop = submit(pid_and_loop()).result(timeout=5)
            os._exit(0 if (pid, loop != parent_loop) == (os.getpid(), True) else 1)
        except BaseException:
            os._exit(2)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        done, status = os.waitpid(child, os.WNOHANG)
        if done:
            break
        time.sleep(0.02)
    else:
        os.kill(child, 9)
        os.waitpid(child, 0)
        pytest.fail("the forked child did not answer")
    assert os.waitstatus_to_exitcode(status) == 0
