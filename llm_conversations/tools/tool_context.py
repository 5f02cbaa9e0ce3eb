"""What a tool may know about the call it answers: :class:`ToolContext`.

A tool declares a parameter annotated ``ToolContext`` (any name); the loop
passes it, built from the run, so it works the same in the pool threads that
run parallel calls and in a worker that executes the run by id. The parameter
is left out of the JSON Schema the model sees, and the model cannot set it.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from llm_conversations.exceptions import ToolError
from llm_conversations.users import User

if TYPE_CHECKING:
    from llm_conversations.models import Conversation, Run

__all__ = ["ProgressReporter", "ToolContext", "tool_context_parameter"]

ProgressReporter = Callable[[str, "float | None"], bool]
"""Records a progress report of one call; ``False`` once the run stopped running."""


@dataclass(frozen=True)
class ToolContext:
    """The call a tool answers: whose conversation, which run, which call.

    ``user`` is the conversation's owner (``None`` for a conversation without
    one). The conversation and the run are the rows as the loop read them; a
    tool should read anything that changes from the database.
    """

    user: User | None
    conversation: Conversation
    run: Run
    call_id: str
    _report: ProgressReporter = field(repr=False, compare=False)

    def progress(self, message: str, fraction: float | None = None) -> bool:
        """Report progress as a ``tool_call.progress`` run event; clients following the
        run see it. ``fraction`` is how much is done, 0 to 1. Returns ``False`` (nothing
        recorded) once the run stopped running, for instance cancelled: the tool may
        then stop early. Raises ``ValueError`` for a fraction outside 0 to 1.
        """
        if fraction is not None:
            if isinstance(fraction, bool) or not isinstance(fraction, int | float):
                raise ValueError("fraction must be a number from 0 to 1.")
            if not 0 <= fraction <= 1:
                raise ValueError("fraction must be from 0 to 1.")
            fraction = float(fraction)
        return self._report(str(message), fraction)


def tool_context_parameter(name: str, function: Callable[..., Any]) -> str | None:
    """The name of ``function``'s parameter annotated :class:`ToolContext`, if any."""
    try:
        hints = typing.get_type_hints(function)
        parameters = inspect.signature(function).parameters.values()
    except Exception:
        # arguments_model reports unresolvable hints with the tool's name.
        return None
    found = [p.name for p in parameters if hints.get(p.name) is ToolContext]
    if len(found) > 1:
        raise ToolError("invalid_tool", f"{name}: only one parameter may be a ToolContext.")
    return found[0] if found else None
