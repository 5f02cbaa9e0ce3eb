"""Tools the fault scenarios offer; importable by dotted path."""

from __future__ import annotations

import threading

from llm_conversations.tools import tool

# Released when a test ends, so a hung tool's thread does not outlive it for long.
release = threading.Event()


@tool
def lookup(city: str) -> str:
    """Look a city up."""
    return f"{city}: sunny"


@tool
def fault_raises() -> str:
    """Always raises."""
    raise RuntimeError("the tool broke")


@tool(timeout=0.2)
def fault_hangs() -> str:
    """Answers long after its timeout."""
    release.wait(2.0)
    return "too late"


@tool
def fault_nul() -> str:
    """Returns text with a NUL character."""
    return "before\x00after"


@tool
def fault_surrogate() -> str:
    """Returns text with a lone surrogate."""
    return "before\ud800after"


TOOLS = [
    f"tests.faults.tools.{name}"
    for name in ("lookup", "fault_raises", "fault_hangs", "fault_nul", "fault_surrogate")
]
