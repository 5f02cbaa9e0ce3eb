"""On PostgreSQL, a stored run event notifies listeners, through a trigger.

Every insert into the event log sends ``NOTIFY`` on one channel with the run's
id as payload, delivered when the transaction commits (PostgreSQL folds the
same payload sent twice in one transaction into one). Readers of
:mod:`llm_conversations.runs.log.followers` share one listening connection
per process. Other databases have no ``NOTIFY``: their readers poll.
"""

from typing import Any

from django.db import migrations

CHANNEL = "llm_conversations_run_events"

FORWARD = (
    f"""
    CREATE OR REPLACE FUNCTION llm_conversations_notify_run_event() RETURNS trigger AS $$
    BEGIN
        PERFORM pg_notify('{CHANNEL}', NEW.run_id::text);
        RETURN NULL;
    END;
    $$ LANGUAGE plpgsql
    """,
    """
    CREATE TRIGGER llm_conversations_runevent_notify
    AFTER INSERT ON llm_conversations_runevent
    FOR EACH ROW EXECUTE FUNCTION llm_conversations_notify_run_event()
    """,
)
REVERSE = (
    "DROP TRIGGER IF EXISTS llm_conversations_runevent_notify ON llm_conversations_runevent",
    "DROP FUNCTION IF EXISTS llm_conversations_notify_run_event()",
)


def run(statements: tuple[str, ...]) -> Any:
    def apply(apps: Any, schema_editor: Any) -> None:
        if schema_editor.connection.vendor == "postgresql":
            for sql in statements:
                schema_editor.execute(sql)

    return apply


class Migration(migrations.Migration):
    dependencies = [("llm_conversations", "0003_replies_leases_events_idempotency")]

    operations = [migrations.RunPython(run(FORWARD), run(REVERSE), elidable=False)]
