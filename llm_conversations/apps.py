from django.apps import AppConfig


class LLMConversationsConfig(AppConfig):
    name = "llm_conversations"
    verbose_name = "LLM conversations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Importing registers the system checks.
        from llm_conversations import checks, tools_checks  # noqa: F401
        from llm_conversations.providers import checks as provider_checks  # noqa: F401
