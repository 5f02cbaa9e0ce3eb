"""Foreign import files of any size, for the import tests and ``bench/import_memory.py``:
ChatGPT export conversations (a chain of nodes) and the same as OpenAI JSON Lines."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["chatgpt_conversation", "openai_line"]

WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "reading",
    "its",
    "exported",
    "history",
]


def _text(number: int, turn: int, chars: int) -> str:
    """``chars`` of words, told apart by the conversation and the turn."""
    words = " ".join(WORDS[(number + turn + n) % len(WORDS)] for n in range(chars))
    return f"{number}.{turn}: {words}"[:chars]


def chatgpt_conversation(number: int, messages: int, chars: int) -> dict[str, Any]:
    """Conversation ``number`` of ChatGPT's export: ``messages`` turns of ``chars``
    characters, user and assistant in turn, each node the child of the one before."""
    mapping: dict[str, Any] = {
        "root": {"id": "root", "message": None, "parent": None, "children": ["n0"]}
    }
    for turn in range(messages):
        node = f"n{turn}"
        role = "user" if turn % 2 == 0 else "assistant"
        mapping[node] = {
            "id": node,
            "parent": "root" if turn == 0 else f"n{turn - 1}",
            "children": [f"n{turn + 1}"] if turn + 1 < messages else [],
            "message": {
                "id": node,
                "author": {"role": role},
                "create_time": 1704067200.0 + number * 60 + turn,
                "content": {"content_type": "text", "parts": [_text(number, turn, chars)]},
                "metadata": {"model_slug": "gpt-4o"} if role == "assistant" else {},
            },
        }
    return {
        "id": f"conv-{number}",
        "title": f"Conversation {number}",
        "create_time": 1704067200.0 + number * 60,
        "update_time": 1704067200.0 + number * 60 + messages,
        "current_node": f"n{messages - 1}",
        "mapping": mapping,
    }


def openai_line(conversation: dict[str, Any]) -> str:
    """A ChatGPT conversation's turns as a line of OpenAI JSON Lines (``{"messages": [...]}``)."""
    turns = [node["message"] for node in conversation["mapping"].values() if node["message"]]
    messages = [{"role": m["author"]["role"], "content": m["content"]["parts"][0]} for m in turns]
    return json.dumps({"messages": messages})
