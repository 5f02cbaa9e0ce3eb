from django.apps import AppConfig
from django.core.checks import register
from django.core.signals import request_finished, request_started
from django.utils.translation import gettext_lazy as _


class LLMConversationsConfig(AppConfig):
    name = "llm_conversations"
    verbose_name = _("LLM conversations")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Imported here, not at the top, so loading the app config does not
        # import the provider and tool modules the checks need.
        from django.db.models.signals import post_delete

        from llm_conversations import checks
        from llm_conversations.conversations import after_response, titles
        from llm_conversations.conversations.attachments import delete_file_on_commit
        from llm_conversations.models import Attachment, Run
        from llm_conversations.runs.service import enqueue_waited
        from llm_conversations.runs.webhooks import outbox
        from llm_conversations.signals import run_finished, run_requires_action, waiting_run_queued

        # Tagged, so that `manage.py check --tag llm_conversations` runs them alone.
        for check in (
            checks.check_settings,
            checks.check_providers,
            checks.check_tools,
            checks.check_mcp_servers,
            checks.check_run_limits,
            checks.check_attachments,
            checks.check_webhooks,
            checks.check_share_links,
            checks.check_trash,
            checks.check_installation,
        ):
            register(check, checks.TAG)
        # Work that must not delay a response (automatic titles) runs after it.
        request_started.connect(
            after_response.open_scope,
            dispatch_uid="llm_conversations.conversations.after_response.open",
        )
        request_finished.connect(
            after_response.run_queued,
            dispatch_uid="llm_conversations.conversations.after_response.run",
        )
        run_finished.connect(titles.on_run_finished, dispatch_uid="llm_conversations.titles")
        # Webhooks of runs that end or pause (docs/webhooks.md).
        run_finished.connect(outbox.on_run_finished, dispatch_uid="llm_conversations.webhooks")
        run_requires_action.connect(
            outbox.on_run_requires_action, dispatch_uid="llm_conversations.webhooks.action"
        )
        # A run that waited behind the conversation's active run goes to a task worker.
        waiting_run_queued.connect(
            enqueue_waited, sender=Run, dispatch_uid="llm_conversations.enqueue_waited"
        )
        # An attachment's file goes with its row, however the row goes.
        post_delete.connect(
            delete_file_on_commit,
            sender=Attachment,
            dispatch_uid="llm_conversations.attachment_files",
        )
