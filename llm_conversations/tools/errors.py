"""Errors of tools: declared, registered, looked up or called the wrong way.

Both live in :mod:`llm_conversations.exceptions` under the library's one root.
"""

from llm_conversations.exceptions import ToolArgumentsError, ToolError

__all__ = ["ToolArgumentsError", "ToolError"]
