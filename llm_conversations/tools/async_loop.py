"""The one asyncio event loop of a process that ``async def`` tools run on.

A worker process executes many runs at once, each on its own thread, and
each may wait on tools. An ``async def`` tool spends its time awaiting
(a socket, a sleep), so one event loop serves the async calls of every run
of the process: no thread and no new loop per call, and a call that outlives
its timeout, or whose run stopped, is cancelled rather than left running.

The loop runs forever on a daemon thread, started on first use. It is started
again when its thread has died, and in a forked child (a fork copies the loop
object but not its thread), which is told apart by its process id.

Webhook attempts run here too (``runs/webhooks/delivery.py``), each cancelled
at its deadline. Only coroutines that do not block may run here: one blocking
call (the ORM, ``time.sleep``, a synchronous HTTP client) stalls every async
call of the process.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

__all__ = ["shared_loop", "submit"]

_T = TypeVar("_T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
_pid: int | None = None


def _reset_lock_after_fork() -> None:
    # A lock another thread held at the fork stays held in the child forever.
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_reset_lock_after_fork)


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        # The loop stopped (something called ``stop()`` or a callback raised
        # ``SystemExit``): cancel what it still ran, so nobody waits on it forever.
        tasks = asyncio.all_tasks(loop)
        for task in tasks:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        loop.close()


def shared_loop() -> asyncio.AbstractEventLoop:
    """This process's loop, running on its daemon thread; started (again) when needed."""
    global _loop, _thread, _pid
    with _lock:
        running = (
            _loop is not None
            and _thread is not None
            and _pid == os.getpid()
            and _thread.is_alive()
            and not _loop.is_closed()
        )
        if not running:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(
                target=_serve, args=(loop,), name="llm-conversations-async-tools", daemon=True
            )
            thread.start()
            _loop, _thread, _pid = loop, thread, os.getpid()
        assert _loop is not None
        return _loop


def submit(coroutine: Coroutine[Any, Any, _T]) -> Future[_T]:
    """Run ``coroutine`` on the shared loop; its future, from any thread.

    ``future.result()`` blocks the caller until the coroutine ends;
    ``future.cancel()`` cancels the coroutine (it sees ``CancelledError`` at
    its current ``await``). Must not be waited on from the loop's own thread.
    """
    return asyncio.run_coroutine_threadsafe(coroutine, shared_loop())
