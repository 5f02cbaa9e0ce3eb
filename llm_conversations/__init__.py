"""Keep LLM conversations, tool calls and tool results in the Django database."""

__version__ = "0.1.0"
