"""The pure core: value objects and rules of messages, tool calls, replies and runs.

Nothing here imports Django or httpx (an import-linter contract in
``pyproject.toml`` says so); every rule about a message's shape lives here once
and raises :class:`InvalidMessage` with a stable code.
"""

from llm_conversations.core.completions import CompletionResponse, FinishReason, Usage
from llm_conversations.core.content_parts import ContentPart, FilePart, ImagePart, TextPart
from llm_conversations.core.fitting import ContextFitter, ContextStrategy
from llm_conversations.core.limits import Limit, Limits, Spent
from llm_conversations.core.messages import (
    ChatMessage,
    InvalidMessage,
    MessageInput,
    Role,
    as_chat_messages,
)
from llm_conversations.core.model_info import ModelInfo, Prices
from llm_conversations.core.parameters import RunParameters, ToolChoice
from llm_conversations.core.sequence import check_sequence, unanswered_tool_call_ids
from llm_conversations.core.structured import Judgment, ResponseFormat
from llm_conversations.core.tool_calls import ToolCall
from llm_conversations.core.tool_specs import ToolSpec

__all__ = [
    "ChatMessage",
    "CompletionResponse",
    "ContentPart",
    "ContextFitter",
    "ContextStrategy",
    "FilePart",
    "FinishReason",
    "ImagePart",
    "InvalidMessage",
    "Judgment",
    "Limit",
    "Limits",
    "MessageInput",
    "ModelInfo",
    "Prices",
    "ResponseFormat",
    "Role",
    "RunParameters",
    "Spent",
    "TextPart",
    "ToolCall",
    "ToolChoice",
    "ToolSpec",
    "Usage",
    "as_chat_messages",
    "check_sequence",
    "unanswered_tool_call_ids",
]
