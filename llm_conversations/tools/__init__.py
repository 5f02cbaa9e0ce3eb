"""Tools the model may call: the ``@tool`` decorator, ``Tool`` values and the registry.

A Python tool is a plain function; its JSON Schema comes from the signature
(pydantic generates it and validates the model's arguments against it). A
client-side tool is a name, a description and a schema with no function: a
frontend runs it and submits the output. Executing a call always produces a
``ChatMessage`` tool turn, so the loop never builds one by hand.
"""

from llm_conversations.exceptions import ToolArgumentsError, ToolError
from llm_conversations.tools.definition import Tool, ToolOptions, tool
from llm_conversations.tools.registry import (
    ToolRegistry,
    default_registry,
    load_tool,
    offered_by_default,
)
from llm_conversations.tools.results import format_tool_output, tool_result_message, truncate_text
from llm_conversations.tools.tool_context import ToolContext

__all__ = [
    "Tool",
    "ToolArgumentsError",
    "ToolContext",
    "ToolError",
    "ToolOptions",
    "ToolRegistry",
    "default_registry",
    "format_tool_output",
    "load_tool",
    "offered_by_default",
    "tool",
    "tool_result_message",
    "truncate_text",
]
