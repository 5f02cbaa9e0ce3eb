"""Importable sample tools for the settings-path tests of ``test_tools``."""

from llm_conversations.tools import Tool, tool


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


@tool(name="add")
def another_add(x: int) -> int:
    """A second tool that claims the name ``add``."""
    return x


pick_colour = Tool.client_side(
    "pick_colour",
    "Ask the user to pick a colour in the browser.",
    {"type": "object", "properties": {"hint": {"type": "string"}}, "required": []},
)

NOT_A_TOOL = 42
