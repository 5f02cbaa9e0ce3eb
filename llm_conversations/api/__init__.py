"""The REST API: conversations, messages, runs (with Server-Sent Events) and tools.

Include it with ``path("api/", include("llm_conversations.api.urls"))``; see docs/api.md.
"""
