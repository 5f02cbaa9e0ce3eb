"""Migration 0023: a link made before it, which held only a position, names the messages
it showed when it was made."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("llm_conversations", "0022_busy_strategies")]
AFTER = [("llm_conversations", "0023_share_snapshot_messages")]


def test_an_older_link_names_what_it_showed_when_it_was_made() -> None:
    executor = MigrationExecutor(connection)
    leaves = executor.loader.graph.leaf_nodes()
    executor.migrate(BEFORE)
    try:
        apps = executor.loader.project_state(BEFORE).apps
        users = apps.get_model("auth", "User")
        conversations = apps.get_model("llm_conversations", "Conversation")
        messages = apps.get_model("llm_conversations", "Message")
        links = apps.get_model("llm_conversations", "ShareLink")
        owner = users.objects.create(username="owner")
        made = timezone.now() - timedelta(hours=1)
        conversation = conversations.objects.create(owner=owner, message_count=5)
        texts = ["Hi", "Hidden before", "Hidden after", "Answer", "Stored later"]
        rows = [
            messages.objects.create(
                conversation=conversation, position=n, role="user", content=text
            )
            for n, text in enumerate(texts)
        ]
        messages.objects.filter(pk__in=[row.pk for row in rows[:4]]).update(
            created_at=made - timedelta(minutes=5)
        )
        # A turn stored after the link at a position it covers (a rolled-back one's).
        messages.objects.filter(pk=rows[4].pk).update(created_at=made + timedelta(minutes=5))
        messages.objects.filter(pk=rows[1].pk).update(hidden_at=made - timedelta(minutes=1))
        messages.objects.filter(pk=rows[2].pk).update(hidden_at=made + timedelta(minutes=1))
        link = links.objects.create(
            conversation=conversation,
            created_by=owner,
            token_hash="0" * 64,
            up_to_position=4,
            created_at=made,
        )
        executor = MigrationExecutor(connection)
        executor.migrate(AFTER)
        apps = executor.loader.project_state(AFTER).apps
        entries = apps.get_model("llm_conversations", "SharedMessage")
        named = entries.objects.filter(link_id=link.pk).order_by("message__position")
        # Hidden after the link: named, and left out while it stays hidden.
        assert [entry.message.content for entry in named] == ["Hi", "Hidden after", "Answer"]
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(leaves)
