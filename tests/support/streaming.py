"""Driving the loop of a run by hand, to stop it while its model streams."""

from __future__ import annotations

import uuid
from collections.abc import Generator
from typing import Any

from llm_conversations.runs import ToolLoopService
from llm_conversations.runs import events as loop_events


def streamed(loop: ToolLoopService, run_id: uuid.UUID, deltas: int) -> Generator[Any, None, None]:
    """The run's loop, stepped until it yielded ``deltas`` text deltas and left there:
    its model is still answering (close the generator when done with it)."""
    executing = loop.events(run_id)
    seen = 0
    for event in executing:
        seen += isinstance(event, loop_events.TextDelta)
        if seen == deltas:
            return executing
    raise AssertionError(f"the run streamed {seen} deltas, not {deltas}")
