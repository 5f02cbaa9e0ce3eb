"""Management commands of llm_conversations."""
