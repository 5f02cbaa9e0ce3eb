"""Tools the loop tests offer; importable by dotted path."""

from __future__ import annotations

import threading
import time
from typing import Any

from django.db import connection

from llm_conversations.providers import EchoProvider
from llm_conversations.tools import Tool, ToolRegistry, tool


class Gauge:
    """Counts calls and the most calls in flight at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.in_flight = 0
        self.peak = 0
        self.calls: list[str] = []

    def enter(self, name: str) -> None:
        with self.lock:
            self.calls.append(name)
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)

    def leave(self) -> None:
        with self.lock:
            self.in_flight -= 1


gauge = Gauge()


@tool
def get_weather(city: str) -> dict[str, object]:
    """Current weather for a city."""
    gauge.enter(f"get_weather:{city}")
    try:
        time.sleep(0.05)  # long enough for the other calls of the turn to start
        return {"city": city, "temperature": 18}
    finally:
        gauge.leave()


@tool
def get_time() -> str:
    """The current time."""
    gauge.enter("get_time")
    try:
        time.sleep(0.05)
        return "09:00"
    finally:
        gauge.leave()


@tool
def fail() -> str:
    """Always fails."""
    raise RuntimeError("disk on fire")


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file (needs approval)."""
    gauge.enter(f"delete_file:{path}")
    gauge.leave()
    return f"deleted {path}"


pick_color = Tool.client_side(
    "pick_color",
    "Ask the user to pick a colour in the browser.",
    {"type": "object", "properties": {"prompt": {"type": "string"}}, "required": ["prompt"]},
)


def registry() -> ToolRegistry:
    return ToolRegistry(
        [get_weather, get_time, fail, delete_file, pick_color, cancel_own_run, probe]
    )


@tool
def cancel_own_run() -> str:
    """Cancels the running run while it executes: another actor's cancel, made deterministic."""
    from llm_conversations.models import Run, RunStatus
    from llm_conversations.runs import ToolLoopService

    ToolLoopService().cancel(Run.objects.get(status=RunStatus.RUNNING).pk)
    return "finished after the cancel"


atomic_seen: list[tuple[str, bool]] = []
"""(where, in_atomic_block) for each provider call and tool call of the probes."""


class ProbeProvider(EchoProvider):
    """The echo backend, noting whether a transaction is open when it is called.

    ``complete`` and ``stream`` both reach the ``send`` hook, so it sees both.
    """

    def send(self, request: Any) -> Any:
        atomic_seen.append(("provider", connection.in_atomic_block))
        return super().send(request)


@tool
def probe() -> str:
    """Notes whether a transaction is open while a tool runs."""
    atomic_seen.append(("tool", connection.in_atomic_block))
    return "probed"
