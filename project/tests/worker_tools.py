"""What ``manage.py llm_worker``'s tests share with their worker processes.

A worker is a process of its own, on ``project.tests.worker_settings``: the
demo's settings with :func:`conversation_settings`, which the test process
applies too (``override_settings``), so both offer the same provider (a fake
one on 127.0.0.1, ``WORKER_PROVIDER_URL``) and tools.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from llm_conversations.tools import tool

LEASE_SECONDS = 2
TOOL_SECONDS = 4.0


@tool(repeatable=False)
def charge_card() -> str:
    """Charge the card once: must never run twice (it appends a line to ``WORKER_TOOL_LOG``)."""
    with Path(os.environ["WORKER_TOOL_LOG"]).open("a") as log:
        log.write("charged\n")
    time.sleep(TOOL_SECONDS)  # long enough for a test to kill the worker meanwhile
    return "charged"


def conversation_settings(base: dict[str, Any], provider_url: str) -> dict[str, Any]:
    """``LLM_CONVERSATIONS`` of the demo, on the fake provider, with :func:`charge_card`."""
    return {
        **base,
        "DEFAULT_PROVIDER": "slow",
        "PROVIDERS": {
            "slow": {
                "BACKEND": "openai",
                "MODEL": "fault-model",
                "API_KEY": "sk-worker-test",
                "BASE_URL": provider_url,
            }
        },
        "TITLE_PROVIDER": None,
        "TOOLS": ["project.tests.worker_tools.charge_card"],
        "LEASE_SECONDS": LEASE_SECONDS,
    }
