"""Settings of ``bench/load_runs.py``: the demo project's, pointed at the fake provider.

The benchmark starts every process (web server, task workers, reaper) with
``DJANGO_SETTINGS_MODULE=bench.settings.load_runs`` and these variables:
``DATABASE_URL`` (PostgreSQL), ``BENCH_PROVIDER_URL`` (the fake
OpenAI-compatible server) and ``BENCH_LEASE_SECONDS`` (short, so the reaper
requeues a killed worker's run within seconds), and optionally
``BENCH_POOL_SIZE`` / ``BENCH_POOL_TIMEOUT`` (each process's connection pool)
and ``BENCH_TOOL_LOG`` (where ``bench.settings.tools.get_time`` logs its calls).
"""

import os

from project.settings import *  # noqa: F403
from project.settings import DATABASES, LLM_CONVERSATIONS, REST_FRAMEWORK

DEBUG = False
# The readiness check logs the user in once with basic auth; the clients then
# send a session cookie (basic auth hashes the password on every request).
REST_FRAMEWORK = {
    **REST_FRAMEWORK,
    "DEFAULT_AUTHENTICATION_CLASSES": [
        *REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"],
        "rest_framework.authentication.BasicAuthentication",
    ],
}
# Under ASGI each request's synchronous part runs in a thread of its own, so a
# persistent connection would be left open per request until PostgreSQL runs
# out of connections, and connecting anew for each (CONN_MAX_AGE 0) costs both
# sides CPU: each process takes its connections from a pool instead.
DATABASES["default"]["CONN_MAX_AGE"] = 0
DATABASES["default"]["OPTIONS"] = {
    "pool": {
        "min_size": 2,
        "max_size": int(os.environ.get("BENCH_POOL_SIZE", "20")),
        "timeout": float(os.environ.get("BENCH_POOL_TIMEOUT", "10")),
    }
}
LLM_CONVERSATIONS = {
    **LLM_CONVERSATIONS,
    "DEFAULT_PROVIDER": "default",
    "PROVIDERS": {
        "default": {
            "BACKEND": "openai",
            "MODEL": "bench-model",
            "API_KEY": "sk-bench-not-a-key",
            "BASE_URL": os.environ.get("BENCH_PROVIDER_URL", "http://127.0.0.1:9/v1"),
        }
    },
    # No automatic titles: each would be one more model call per conversation.
    "TITLE_PROVIDER": None,
    "TOOLS": ["bench.settings.tools.get_time"],
    "LEASE_SECONDS": int(os.environ.get("BENCH_LEASE_SECONDS", "5")),
    # Above the longest queue wait (200 runs on 8 workers: about 50 s), so only
    # a task lost with a killed worker is enqueued again, within the phase.
    "REQUEUE_SECONDS": 60,
}
# One line per claimed lease would drown the workers' logs.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"llm_conversations": {"handlers": ["console"], "level": "WARNING"}},
}
