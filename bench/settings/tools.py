"""The tool the load benchmarks offer: ``get_time``, declared ``repeatable=False``.

Each execution appends its call id to the file ``BENCH_TOOL_LOG`` names (one
short ``O_APPEND`` write, whole even from many processes), so a benchmark can
count calls executed twice: after a worker is killed, none may be.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

from llm_conversations.tools import ToolContext, tool


@tool(name="get_time", repeatable=False)
def get_time(context: ToolContext) -> str:
    """The current time in UTC."""
    path = os.environ.get("BENCH_TOOL_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(context.call_id + "\n")
    return datetime.now(UTC).isoformat()
