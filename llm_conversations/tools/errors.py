"""Errors raised when a tool is declared, registered, looked up or called the wrong way."""

from __future__ import annotations


class ToolError(ValueError):
    """A tool is declared, registered, looked up or executed the wrong way.

    ``code`` is stable: ``invalid_tool``, ``invalid_tool_name``, ``invalid_tool_schema``,
    ``duplicate_tool``, ``unknown_tool``, ``not_a_tool``, ``tool_import_error``,
    ``client_side_tool`` or ``invalid_arguments``.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"


class ToolArgumentsError(ToolError):
    """The model's arguments for a call are malformed or fail the tool's schema.

    The message is written for the model, so it can correct the call and retry.
    """

    def __init__(self, message: str) -> None:
        super().__init__("invalid_arguments", message)
