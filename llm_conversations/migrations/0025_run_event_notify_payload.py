"""On PostgreSQL the log's writer sends each batch's ``NOTIFY`` itself, the events as
payload (``runs/log/writer.record``), so the trigger of migration 0004, which sent
the run's id for every row, is dropped: readers take what is pushed without a query."""

from typing import Any

from django.db import migrations

FORWARD = (
    "DROP TRIGGER IF EXISTS llm_conversations_runevent_notify ON llm_conversations_runevent",
    "DROP FUNCTION IF EXISTS llm_conversations_notify_run_event()",
)
# Back to migration 0004's trigger.
REVERSE = (
    """
    CREATE OR REPLACE FUNCTION llm_conversations_notify_run_event() RETURNS trigger AS $$
    BEGIN
        PERFORM pg_notify('llm_conversations_run_events', NEW.run_id::text);
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


def run(statements: tuple[str, ...]) -> Any:
    def apply(apps: Any, schema_editor: Any) -> None:
        if schema_editor.connection.vendor == "postgresql":
            for sql in statements:
                schema_editor.execute(sql)

    return apply


class Migration(migrations.Migration):
    dependencies = [("llm_conversations", "0024_superseded_text")]

    operations = [migrations.RunPython(run(FORWARD), run(REVERSE), elidable=False)]
