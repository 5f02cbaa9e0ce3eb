"""One broken configuration per check id, shared by the tests of ``llm_conversations.checks``."""

from __future__ import annotations

import re
from typing import Any

from llm_conversations.checks.installation import CELERY_BACKEND

FIXTURES = "tests.support.tools_fixtures"
ID = re.compile(r"llm_conversations\.[EW]\d{3}")


def entry(**values: Any) -> dict[str, Any]:
    """Settings with one provider entry ``p``, the default."""
    return {"PROVIDERS": {"p": values}, "DEFAULT_PROVIDER": "p"}


# One broken configuration per id: (LLM_CONVERSATIONS, DEBUG).
BROKEN: dict[str, tuple[Any, bool]] = {
    "llm_conversations.E001": (["x"], True),
    "llm_conversations.E002": ({"MAX_ITERATION": 3}, True),
    "llm_conversations.E003": ({"TOOL_WORKERS": 0}, True),
    "llm_conversations.E004": ({"MAX_ITERATIONS": 10, "MAX_ITERATIONS_LIMIT": 5}, True),
    "llm_conversations.E005": ({"TOOL_TIMEOUT": 0}, True),
    "llm_conversations.E006": ({"STRUCTURED_OUTPUT_REPAIRS": -1}, True),
    "llm_conversations.E007": ({"CONVERSATION_RETENTION_DAYS": 0}, True),
    "llm_conversations.E010": ({"PROVIDERS": {}}, True),
    "llm_conversations.E011": ({"PROVIDERS": {"p": "openai"}, "DEFAULT_PROVIDER": "p"}, True),
    "llm_conversations.E012": (entry(BACKEND="mistral", MODEL="m"), True),
    "llm_conversations.E013": (entry(BACKEND="ollama"), True),
    "llm_conversations.E014": (entry(BACKEND="gemini", MODEL="gemini-2.5-flash"), True),
    "llm_conversations.E015": ({"DEFAULT_PROVIDER": "missing"}, True),
    "llm_conversations.E016": (entry(BACKEND="ollama", MODEL="m", MODLE="x"), True),
    "llm_conversations.E017": (entry(BACKEND="ollama", MODEL="m", TIMEOUT=0), True),
    "llm_conversations.E018": (entry(BACKEND="ollama", MODEL="m", OPTIONS=[1]), True),
    "llm_conversations.E048": (entry(BACKEND="ollama", MODEL="m", STREAM="no"), True),
    "llm_conversations.E009": ({"TITLE_PROVIDER": "missing"}, True),
    "llm_conversations.E019": (entry(BACKEND="ollama", MODEL="m", MODELS="m2"), True),
    "llm_conversations.W010": (entry(BACKEND="echo", MODEL="echo"), False),
    "llm_conversations.E040": (
        entry(BACKEND="ollama", MODEL="m", MODEL_INFO={"m": {"context_window": 0}}),
        True,
    ),
    "llm_conversations.E041": (
        entry(BACKEND="ollama", MODEL="m", CONTEXT_STRATEGY="shrink"),
        True,
    ),
    "llm_conversations.W041": (
        entry(BACKEND="ollama", MODEL="m", CONTEXT_STRATEGY="truncate"),
        True,
    ),
    "llm_conversations.E042": ({"SUMMARY_PROVIDER": "missing"}, True),
    "llm_conversations.E043": (entry(BACKEND="ollama", MODEL="m", FALLBACKS="q"), True),
    "llm_conversations.E044": (entry(BACKEND="ollama", MODEL="m", FALLBACKS=["q"]), True),
    "llm_conversations.E045": (entry(BACKEND="ollama", MODEL="m", FALLBACKS=["p"]), True),
    "llm_conversations.E046": (
        {
            "PROVIDERS": {
                "p": {"BACKEND": "ollama", "MODEL": "m", "FALLBACKS": ["q"]},
                "q": {"BACKEND": "ollama", "MODEL": "m", "FALLBACKS": ["p"]},
            },
            "DEFAULT_PROVIDER": "p",
        },
        True,
    ),
    "llm_conversations.E047": (
        entry(BACKEND="ollama", MODEL="m", CIRCUIT_BREAKER={"FAILURES": 0, "RESET_AFTER": 30}),
        True,
    ),
    "llm_conversations.E020": ({"TOOLS": ["no_such_module.tool"]}, True),
    "llm_conversations.E021": ({"TOOLS": [f"{FIXTURES}.add", f"{FIXTURES}.another_add"]}, True),
    "llm_conversations.E022": ({"DEFAULT_TOOLS": "add"}, True),
    "llm_conversations.E023": ({"TOOLS": [f"{FIXTURES}.add"], "DEFAULT_TOOLS": ["ad"]}, True),
    "llm_conversations.E030": ({"MCP_SERVERS": {"a.b": {"COMMAND": "x"}}}, True),
    "llm_conversations.E031": ({"MCP_SERVERS": {"s": {"ARGS": []}}}, True),
    "llm_conversations.E032": ({"MCP_SERVERS": {"s": {"COMMAND": "x", "COMAND": "y"}}}, True),
    "llm_conversations.E033": ({"MCP_SERVERS": {"s": {"COMMAND": "x", "TIMEOUT": 0}}}, True),
    "llm_conversations.E034": (
        {"MCP_SERVERS": {"s": {"URL": "http://h/mcp", "HEADERS": {"X-Key": "LLMCONV_UNSET"}}}},
        True,
    ),
    # Reported where the mcp package cannot be imported (see ``without_sdk``).
    "llm_conversations.E035": ({"MCP_SERVERS": {"s": {"COMMAND": "x"}}}, True),
    "llm_conversations.E050": ({"RUN_POLICY": "tests.no_such_module.Policy"}, True),
    "llm_conversations.E051": ({"RUN_RATE": "20 per minute"}, True),
    "llm_conversations.E052": ({"MAX_ACTIVE_RUNS_PER_USER": 0}, True),
    "llm_conversations.E053": ({"BUSY_STRATEGY": "queue"}, True),
    "llm_conversations.E054": ({"MAX_WAITING_RUNS": 0}, True),
    "llm_conversations.E060": ({"USER_DAILY_BUDGET": {"tokens": "many"}}, True),
    "llm_conversations.E061": ({"BUDGET_HOOK": "tests.no_such_module.limits"}, True),
    "llm_conversations.E070": ({"ATTACHMENT_MAX_BYTES": 0}, True),
    "llm_conversations.E071": ({"ATTACHMENT_TYPES": ["image/png", "image/svg+xml"]}, True),
    "llm_conversations.E072": ({"ATTACHMENT_MAX_PIXELS": "many"}, True),
    "llm_conversations.E073": ({"ATTACHMENT_MAX_PDF_PAGES": -1}, True),
    "llm_conversations.E074": ({"ORPHAN_ATTACHMENT_HOURS": 0}, True),
    "llm_conversations.E080": ({"WEBHOOKS": {"ops": {"URL": "ftp://x", "SECRET": "s"}}}, True),
    "llm_conversations.E081": ({"WEBHOOK_ALLOWED_HOSTS": "127.0.0.1"}, True),
    "llm_conversations.E090": ({"SHARE_RATE": "60 a minute"}, True),
    "llm_conversations.E091": ({"TRASH_RETENTION_DAYS": 0}, True),
    "llm_conversations.E008": ({"TELEMETRY_CAPTURE_CONTENT": "false"}, True),
}


# Ids whose broken configuration is a project setting beside LLM_CONVERSATIONS.
BROKEN_PROJECT: dict[str, dict[str, Any]] = {
    # No Celery app configured in this process (see ``without_celery_app``).
    "llm_conversations.E092": {"TASKS": {"default": {"BACKEND": CELERY_BACKEND}}},
}
