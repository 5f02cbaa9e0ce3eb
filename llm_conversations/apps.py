from django.apps import AppConfig
from django.core.checks import Tags, register


class LLMConversationsConfig(AppConfig):
    name = "llm_conversations"
    verbose_name = "LLM conversations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Imported here, not at the top, so loading the app config does not
        # import the provider and tool modules the checks need.
        from llm_conversations import checks

        register(Tags.compatibility)(checks.check_settings)
        register(checks.check_providers)
        register(Tags.compatibility)(checks.check_tools)
        register(Tags.compatibility)(checks.check_mcp_servers)
