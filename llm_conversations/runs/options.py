"""The options of a run as the functions that start one take them, typed for callers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from llm_conversations.core.parameters import RunParameterInput
from llm_conversations.users import AnyUser

__all__ = ["RunOptions"]


class RunOptions(RunParameterInput, total=False):
    """The keyword arguments of :meth:`ToolLoopService.start
    <llm_conversations.runs.service.ToolLoopService.start>`, the run parameters
    (:class:`~llm_conversations.core.parameters.RunParameterInput`) included, as
    ``send()``, ``edit_message()`` and ``regenerate()`` pass them on: a type checker
    refuses a misspelt option or a value of the wrong type (``temperature="hot"``)."""

    provider: str | None
    tools: Iterable[str] | None
    max_iterations: int | None
    background: bool
    user: AnyUser | None
    context_strategy: str | None
    metadata: Mapping[str, Any] | None
    if_busy: str | None
