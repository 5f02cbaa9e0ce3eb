"""``manage.py delete_user_data USERNAME --yes``: delete a user's conversations and ratings.

Refused while one of the user's conversations has an active run. Without
``--yes`` it only counts. The user account stays (it belongs to the site).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from llm_conversations.conversations.retention import delete_user_data
from llm_conversations.exceptions import ConversationBusy
from llm_conversations.management.commands.export_conversations import users
from llm_conversations.models import Conversation, Feedback, Message


class Command(BaseCommand):
    help = "Delete every conversation a user owns and every rating they gave."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--yes", action="store_true", help="Delete (otherwise only count).")

    def handle(self, *args: Any, username: str, yes: bool = False, **options: Any) -> None:
        user = users([username])[0]
        if not yes:
            owned = Conversation.objects.filter(owner=user)
            self.stdout.write(
                f"Would delete {owned.count()} conversation(s) "
                f"({Message.objects.filter(conversation__in=owned).count()} message(s)) and "
                f"{Feedback.objects.filter(user=user).count()} rating(s) of {username}. "
                "Pass --yes to delete."
            )
            return
        try:
            deleted = delete_user_data(user)
        except ConversationBusy as exc:
            raise CommandError(f"Nothing deleted: {exc.message}") from None
        left = Conversation.objects.filter(owner=user).count()
        summary = (
            f"Deleted {deleted.conversations} conversation(s) ({deleted.messages} message(s)) "
            f"and {deleted.feedback} rating(s) of {username}"
            + (f", and {deleted.attachments} attachment(s)." if deleted.attachments else ".")
        )
        if left:
            raise CommandError(
                f"{summary} {left} conversation(s) started a run meanwhile; run again."
            )
        self.stdout.write(self.style.SUCCESS(summary))
