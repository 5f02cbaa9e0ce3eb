"""The ``Tool`` value and the ``@tool`` decorator."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from copy import deepcopy
from dataclasses import dataclass, field
from typing import Any, Generic, TypedDict, Unpack, overload

import pydantic
from typing_extensions import ParamSpec, TypeVar

from llm_conversations.core.messages import ChatMessage, InvalidMessage, ToolCall
from llm_conversations.core.structured import VALIDATION_SECONDS, SchemaTimeout, errors_within
from llm_conversations.core.tool_specs import ToolSpec
from llm_conversations.exceptions import ToolArgumentsError, ToolError
from llm_conversations.tools import async_loop
from llm_conversations.tools.results import exception_summary, malformed_reason, tool_result_message
from llm_conversations.tools.schema import (
    arguments_model,
    cut,
    description_from_doc,
    provider_schema,
    schema_validator,
)
from llm_conversations.tools.tool_context import ToolContext, tool_context_parameter

logger = logging.getLogger("llm_conversations.tools")

_ARGUMENT_ERROR_CHARS = 300

# The signature and return type of a tool's function, kept by ``@tool`` for type checkers;
# a bare ``Tool`` (an MCP or client-side tool) takes any arguments and returns ``Any``.
P = ParamSpec("P", default=...)
R = TypeVar("R", default=Any)


class ToolOptions(TypedDict, total=False):
    """The options of :func:`tool` and :meth:`Tool.from_function`."""

    name: str | None
    description: str | None
    schema: dict[str, Any] | None
    requires_approval: bool
    timeout: float | None
    repeatable: bool


@dataclass(frozen=True)
class Tool(Generic[P, R]):
    """A tool offered to the model.

    ``function`` is ``None`` for a client-side tool (see :meth:`client_side`).
    Calling a ``Tool`` calls its function, so ``@tool`` leaves the function usable, with its
    signature: type checkers see ``Tool[P, R]``, the function's parameters ``P`` and result ``R``.
    """

    name: str
    description: str
    parameters: dict[str, Any] = field(hash=False)
    function: Callable[P, R] | None = None
    requires_approval: bool = False
    # Seconds a call may run before it is answered with an error result;
    # None means the TOOL_TIMEOUT setting.
    timeout: float | None = None
    # False for a tool whose effect must not happen twice (a payment, an email):
    # a call that may have run before its worker was lost is answered with an
    # error result instead of being executed again.
    repeatable: bool = True
    # How arguments are checked: a pydantic model for generated schemas,
    # a jsonschema validator for explicit ones.
    _model: type[pydantic.BaseModel] | None = field(
        default=None, repr=False, compare=False, hash=False
    )
    # The parameter annotated ToolContext, which the loop fills (see tools/tool_context.py).
    _tool_context: str | None = field(default=None, repr=False, compare=False, hash=False)
    _validator: Any = field(init=False, default=None, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        try:
            ToolSpec(self.name, self.description, self.parameters)
        except InvalidMessage as exc:
            raise ToolError(exc.code, exc.message) from None
        if self._model is None:
            object.__setattr__(self, "_validator", schema_validator(self.name, self.parameters))
        if self.function is not None:
            # Keep help() and introspection pointing at the wrapped function.
            object.__setattr__(self, "__wrapped__", self.function)
            object.__setattr__(self, "__doc__", self.function.__doc__)

    @classmethod
    def from_function(cls, function: Callable[P, R], **options: Unpack[ToolOptions]) -> Tool[P, R]:
        """Wrap ``function``: name, description and schema default to its own.

        With ``schema`` the arguments are checked with ``jsonschema`` and passed
        to the function as given; otherwise pydantic validates (and coerces)
        them against the signature.
        """
        if not callable(function):
            raise ToolError("not_a_tool", f"{function!r} is not callable.")
        tool_name = options.get("name") or str(getattr(function, "__name__", ""))
        description = options.get("description")
        if description is None:
            description = description_from_doc(function)
        schema = options.get("schema")
        tool_context = tool_context_parameter(tool_name, function)
        if schema is not None:
            parameters, model = deepcopy(schema), None
        else:
            model = arguments_model(tool_name, function, exclude=tool_context)
            parameters = provider_schema(model, tool_name)
        return cls(
            tool_name,
            description,
            parameters,
            function,
            options.get("requires_approval", False),
            timeout=options.get("timeout"),
            repeatable=options.get("repeatable", True),
            _model=model,
            _tool_context=tool_context,
        )

    @classmethod
    def client_side(
        cls,
        name: str,
        description: str = "",
        parameters: dict[str, Any] | None = None,
        *,
        requires_approval: bool = False,
    ) -> Tool:
        """A tool declared by schema only; a frontend runs it (the run pauses)."""
        schema = deepcopy(parameters) if parameters is not None else None
        schema = schema or {"type": "object", "properties": {}, "required": []}
        return cls(name, description, schema, None, requires_approval)

    @property
    def is_client_side(self) -> bool:
        """True when there is no Python function: the call is answered from outside."""
        return self.function is None

    @property
    def offered_by_default(self) -> bool:
        """Whether a run that names no tools offers this one while ``DEFAULT_TOOLS``
        is ``None``: every ``@tool`` does; an MCP tool only when its server says so."""
        return True

    @property
    def spec(self) -> ToolSpec:
        """What providers are sent (a copy: adapters may not alter this tool)."""
        return ToolSpec(self.name, self.description, deepcopy(self.parameters))

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Call the function directly, without validation."""
        if self.function is None:
            raise ToolError("client_side_tool", f"{self.name} is client-side; it has no function.")
        return self.function(*args, **kwargs)

    def validate_call(self, call: ToolCall) -> dict[str, Any]:
        """The keyword arguments for the function, or :class:`ToolArgumentsError`.

        Works for client-side tools too, so a loop can refuse bad arguments
        before it pauses for a frontend.
        """
        prefix = f"Invalid arguments for {self.name}"
        if call.malformed:
            raise ToolArgumentsError(f"{prefix}: {malformed_reason(call.raw_arguments or '')}")
        if self._model is not None:
            try:
                validated = self._model.model_validate(call.arguments)
            except pydantic.ValidationError as exc:
                problems = [
                    cut(
                        f"{'.'.join(map(str, e['loc'])) or '(arguments)'}: {e['msg']}",
                        _ARGUMENT_ERROR_CHARS,
                    )
                    for e in exc.errors(include_url=False)
                ]
                raise ToolArgumentsError(f"{prefix}: {'; '.join(problems)}") from None
            # Only arguments the model sent: the function's own defaults apply to the rest.
            aliases = {key: info.alias or key for key, info in type(validated).model_fields.items()}
            return {aliases[key]: getattr(validated, key) for key in validated.model_fields_set}
        try:
            errors = sorted(
                errors_within(self._validator, call.arguments), key=lambda e: list(e.path)
            )
        except SchemaTimeout:
            raise ToolArgumentsError(
                f"{prefix}: the arguments could not be checked within {VALIDATION_SECONDS:g} s"
            ) from None
        if errors:
            problems = [
                cut(
                    f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
                    if e.absolute_path
                    else e.message,
                    _ARGUMENT_ERROR_CHARS,
                )
                for e in errors
            ]
            raise ToolArgumentsError(f"{prefix}: {'; '.join(problems)}")
        return dict(call.arguments)

    @property
    def wants_tool_context(self) -> bool:
        """True when the function declares a :class:`ToolContext` parameter."""
        return self._tool_context is not None

    @property
    def is_async(self) -> bool:
        """True for an ``async def`` function: its calls run on the process's shared
        event loop (:mod:`llm_conversations.tools.async_loop`)."""
        return self.function is not None and inspect.iscoroutinefunction(self.function)

    def execute(self, call: ToolCall, tool_context: ToolContext | None = None) -> ChatMessage:
        """Validate, run and answer ``call`` with a tool turn; never raises for tool failures.

        ``tool_context`` is passed to a tool that declares a :class:`ToolContext`
        parameter; without one such a tool is answered with an error result.
        Invalid arguments and exceptions become error results (the traceback
        is logged, not sent), for client-side tools too: a call a frontend
        could not run is answered here. Raises :class:`ToolError` for a valid
        call of a client-side tool, whose result must be submitted.

        An async tool runs on the shared event loop while this thread waits;
        code that runs on an event loop awaits :meth:`execute_async` instead.
        """
        kwargs = self._arguments(call, tool_context)
        if isinstance(kwargs, ChatMessage):
            return kwargs
        # Called with the validated arguments by name, whatever its signature.
        function: Callable[..., Any] | None = self.function
        assert function is not None
        try:
            value = self._wait_for(function, kwargs) if self.is_async else function(**kwargs)
        except Exception as exc:
            return self._failed(call, exc)
        return tool_result_message(call.id, value)

    async def execute_async(
        self, call: ToolCall, tool_context: ToolContext | None = None
    ) -> ChatMessage:
        """:meth:`execute` for an async tool, awaited on the caller's loop.

        The same results and errors as :meth:`execute`. Cancelling the awaiting
        task cancels the tool's coroutine (``CancelledError`` is not an error
        result: it propagates). Raises :class:`ToolError` ``not_async`` for a
        tool whose function is synchronous, which would block the loop.
        """
        if self.function is not None and not self.is_async:
            raise ToolError("not_async", f"{self.name} is synchronous; call execute().")
        kwargs = self._arguments(call, tool_context)
        if isinstance(kwargs, ChatMessage):
            return kwargs
        function: Callable[..., Any] | None = self.function
        assert function is not None
        try:
            value = await function(**kwargs)
        except Exception as exc:
            return self._failed(call, exc)
        return tool_result_message(call.id, value)

    def _arguments(
        self, call: ToolCall, tool_context: ToolContext | None
    ) -> dict[str, Any] | ChatMessage:
        """The function's keyword arguments, or the error result answering ``call``."""
        try:
            kwargs = self.validate_call(call)
        except ToolArgumentsError as exc:
            return tool_result_message(call.id, exc.message, is_error=True)
        if self.function is None:
            raise ToolError(
                "client_side_tool",
                f"{self.name} is client-side: its result must be submitted, not executed.",
            )
        if self._tool_context is not None:
            if tool_context is None:
                message = f"{self.name} needs the tool context of a run; it was called without one."
                return tool_result_message(call.id, message, is_error=True)
            kwargs[self._tool_context] = tool_context
        return kwargs

    def _wait_for(self, function: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
        """The value of the coroutine ``function(**kwargs)``, run on the shared loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass  # no loop in this thread: waiting blocks nothing else
        else:
            raise RuntimeError(
                f"{self.name} is async: await execute_async() on an event loop, "
                "not execute(), which would block it."
            )
        return async_loop.submit(function(**kwargs)).result()

    def _failed(self, call: ToolCall, exc: Exception) -> ChatMessage:
        logger.exception("Tool %s failed answering call %s.", self.name, call.id)
        return tool_result_message(call.id, exception_summary(exc), is_error=True)


@overload
def tool(function: Callable[P, R], /) -> Tool[P, R]: ...


@overload
def tool(**options: Unpack[ToolOptions]) -> Callable[[Callable[P, R]], Tool[P, R]]: ...


def tool(
    function: Callable[..., Any] | None = None, /, **options: Unpack[ToolOptions]
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Declare a function as a tool; use bare (``@tool``) or with options.

    Options (:class:`ToolOptions`): ``name`` defaults to the function's,
    ``description`` to the first paragraph of its docstring, ``schema`` to one
    generated from the signature; ``requires_approval`` pauses the run for an
    operator; ``timeout`` (seconds) overrides the ``TOOL_TIMEOUT`` setting for
    this tool; ``repeatable=False`` marks a tool whose call must not run twice
    (after a lost worker, such a call is answered, not repeated).
    """

    def decorate(func: Callable[..., Any]) -> Tool:
        return Tool.from_function(func, **options)

    return decorate if function is None else decorate(function)
