"""Per-item rules for stored tool calls, enforced by the database.

A CHECK constraint cannot look inside each item of a JSON array on SQLite (no
subqueries) nor find duplicates on PostgreSQL, so triggers do it: every call
needs a non-empty string id unique within the turn, a non-empty function name,
``type`` "function", and arguments that are an object (or the raw text of
malformed ones). Other databases rely on ``Message.clean()`` and the store.
"""

from typing import Any

from django.db import migrations

SQLITE_INVALID = """
    NEW.tool_calls IS NOT NULL AND json_type(NEW.tool_calls) = 'array' AND (
        EXISTS (
            SELECT 1 FROM json_each(NEW.tool_calls) AS item WHERE
                item.type != 'object'
                OR json_type(item.value, '$.id') IS NOT 'text'
                OR json_extract(item.value, '$.id') = ''
                OR json_type(item.value, '$.function.name') IS NOT 'text'
                OR json_extract(item.value, '$.function.name') = ''
                OR json_extract(item.value, '$.type') IS NOT 'function'
                OR IFNULL(json_type(item.value, '$.function.arguments'), '')
                    NOT IN ('object', 'text')
        )
        OR (SELECT count(*) FROM json_each(NEW.tool_calls))
            != (SELECT count(DISTINCT json_extract(value, '$.id')) FROM json_each(NEW.tool_calls))
    )
"""

SQLITE_FORWARD = [
    f"""
    CREATE TRIGGER llmconv_message_tool_calls_items_{event.split()[0].lower()}
    BEFORE {event} ON llm_conversations_message
    WHEN {SQLITE_INVALID}
    BEGIN
        SELECT RAISE(ABORT, 'CHECK constraint failed: llmconv_message_tool_calls_items');
    END
    """
    for event in ("INSERT", "UPDATE OF tool_calls")
]
SQLITE_REVERSE = [
    "DROP TRIGGER IF EXISTS llmconv_message_tool_calls_items_insert",
    "DROP TRIGGER IF EXISTS llmconv_message_tool_calls_items_update",
]

POSTGRESQL_FORWARD = [
    """
    CREATE FUNCTION llmconv_message_tool_calls_items() RETURNS trigger AS $$
    BEGIN
        IF NEW.tool_calls IS NOT NULL AND jsonb_typeof(NEW.tool_calls) = 'array' THEN
            IF EXISTS (
                SELECT 1 FROM jsonb_array_elements(NEW.tool_calls) AS item WHERE
                    jsonb_typeof(item) IS DISTINCT FROM 'object'
                    OR jsonb_typeof(item -> 'id') IS DISTINCT FROM 'string'
                    OR item ->> 'id' = ''
                    OR jsonb_typeof(item -> 'function' -> 'name') IS DISTINCT FROM 'string'
                    OR item -> 'function' ->> 'name' = ''
                    OR item ->> 'type' IS DISTINCT FROM 'function'
                    OR coalesce(jsonb_typeof(item -> 'function' -> 'arguments'), '')
                        NOT IN ('object', 'string')
            ) OR (SELECT count(*) FROM jsonb_array_elements(NEW.tool_calls))
                <> (SELECT count(DISTINCT item ->> 'id')
                    FROM jsonb_array_elements(NEW.tool_calls) AS item)
            THEN
                RAISE EXCEPTION 'new row violates check constraint "llmconv_message_tool_calls_items"'
                    USING ERRCODE = 'check_violation';
            END IF;
        END IF;
        RETURN NEW;
    END
    $$ LANGUAGE plpgsql
    """,
    """
    CREATE TRIGGER llmconv_message_tool_calls_items
    BEFORE INSERT OR UPDATE OF tool_calls ON llm_conversations_message
    FOR EACH ROW EXECUTE FUNCTION llmconv_message_tool_calls_items()
    """,
]
POSTGRESQL_REVERSE = [
    "DROP TRIGGER IF EXISTS llmconv_message_tool_calls_items ON llm_conversations_message",
    "DROP FUNCTION IF EXISTS llmconv_message_tool_calls_items()",
]

STATEMENTS = {
    "sqlite": (SQLITE_FORWARD, SQLITE_REVERSE),
    "postgresql": (POSTGRESQL_FORWARD, POSTGRESQL_REVERSE),
}


def run(direction: int) -> Any:
    def apply(apps: Any, schema_editor: Any) -> None:
        statements = STATEMENTS.get(schema_editor.connection.vendor)
        for sql in statements[direction] if statements else ():
            schema_editor.execute(sql)

    return apply


class Migration(migrations.Migration):
    dependencies = [("llm_conversations", "0001_initial")]

    operations = [migrations.RunPython(run(0), run(1), elidable=False)]
