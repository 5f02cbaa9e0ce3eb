"""System checks for ``LLM_CONVERSATIONS["TOOLS"]`` (ids ``llm_conversations.E020``/``E021``)."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error, Tags, register

from llm_conversations.conf import user_settings
from llm_conversations.tools import ToolError, load_tool


@register(Tags.compatibility)
def check_tools(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """E020 an entry that cannot be imported or is not a tool; E021 duplicate tool names."""
    paths = user_settings().get("TOOLS", [])
    if isinstance(paths, str) or not isinstance(paths, list | tuple):
        return [
            Error(
                "LLM_CONVERSATIONS['TOOLS'] must be a list of dotted paths.",
                hint=f"Got {type(paths).__name__}.",
                id="llm_conversations.E020",
            )
        ]
    errors: list[CheckMessage] = []
    seen: dict[str, str] = {}
    for path in paths:
        if not isinstance(path, str):
            errors.append(
                Error(
                    f"LLM_CONVERSATIONS['TOOLS'] entry {path!r} is not a dotted path.",
                    id="llm_conversations.E020",
                )
            )
            continue
        try:
            loaded = load_tool(path)
        except ToolError as exc:
            errors.append(
                Error(
                    f"LLM_CONVERSATIONS['TOOLS'] entry {path!r} is not a usable tool.",
                    hint=exc.message,
                    id="llm_conversations.E020",
                )
            )
            continue
        except Exception as exc:  # the module itself fails to import
            errors.append(
                Error(
                    f"LLM_CONVERSATIONS['TOOLS'] entry {path!r} cannot be imported.",
                    hint=f"{type(exc).__name__}: {exc}",
                    id="llm_conversations.E020",
                )
            )
            continue
        if loaded.name in seen:
            errors.append(
                Error(
                    f"LLM_CONVERSATIONS['TOOLS'] has two tools named {loaded.name!r}.",
                    hint=f"{seen[loaded.name]!r} and {path!r}; pass name= to @tool to rename one.",
                    id="llm_conversations.E021",
                )
            )
        else:
            seen[loaded.name] = path
    return errors
