"""Export 100,000 messages (1,000 conversations of 100) in both forms; import them back.

Prints, for the full-fidelity and the fine-tuning form, messages per second
and the peak RSS of the exporting process (``resource.getrusage``) at 10,000,
50,000 and 100,000 messages: the export streams, so the peak stays flat while
the rows grow tenfold. Each export runs in a forked child, so each peak is its
own; the growth column is the child's peak less its RSS before exporting. Then
imports the 100,000 messages into the emptied database and prints the rate.
Runs on the demo project's database settings (``DATABASE_URL`` for PostgreSQL)
in a throwaway test database.
"""

from __future__ import annotations

import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

import django

django.setup()

from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection, connections
from django.test.utils import setup_test_environment

from llm_conversations.conversations.transfer.export import (
    FinetuneExport,
    full_records,
    select_conversations,
    write_lines,
)
from llm_conversations.conversations.transfer.importing import Importer
from llm_conversations.core.messages import ChatMessage
from llm_conversations.core.tool_specs import ToolSpec
from llm_conversations.models import Conversation, Feedback, Message, Run

CONVERSATIONS = 1000
MESSAGES = 100  # per conversation: user, assistant with a call, tool, assistant, ...
TOOL = ToolSpec("get_time", "The time now.", {"type": "object", "properties": {}})


def populate(owner: User) -> None:
    """Valid rows in bulk, 100 conversations at a time (the store's rules hold for them)."""
    for start in range(0, CONVERSATIONS, 100):
        conversations = Conversation.objects.bulk_create(
            Conversation(owner=owner, title=f"c{n}", message_count=MESSAGES)
            for n in range(start, start + 100)
        )
        runs = Run.objects.bulk_create(
            Run(
                conversation=c,
                status="completed",
                termination_reason="completed",
                tools=[TOOL.to_stored()],
            )
            for c in conversations
        )
        rows = []
        for conversation, run in zip(conversations, runs, strict=True):
            for p in range(0, MESSAGES, 4):
                call = ChatMessage.from_dict(
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": f"c{p}",
                                "type": "function",
                                "function": {"name": "get_time", "arguments": "{}"},
                            }
                        ],
                    }
                )
                turns = [
                    (ChatMessage.user(f"What time is it, question {p}?"), {}),
                    (call, {"input_tokens": 50, "output_tokens": 5, "total_tokens": 55}),
                    (ChatMessage.tool_result(f"c{p}", '{"time": "09:00"}'), {}),
                    (
                        ChatMessage.assistant("It is nine o'clock. " * 10),
                        {
                            "input_tokens": 80,
                            "output_tokens": 40,
                            "total_tokens": 120,
                            "provider": "echo",
                            "model": "echo",
                            "finish_reason": "stop",
                        },
                    ),
                ]
                for offset, (message, extra) in enumerate(turns):
                    rows.append(
                        Message(
                            conversation=conversation,
                            position=p + offset,
                            run=run,
                            **message.to_stored(),
                            **extra,
                        )
                    )
        Message.objects.bulk_create(rows, batch_size=2000)
        Feedback.objects.bulk_create(
            Feedback(message=row, user=owner, rating=1) for row in rows[3::MESSAGES]
        )


# The parent's database connections, in a forked child.
INHERITED: list[object] = []


def rss_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux


def in_child(work: Callable[[], str]) -> str:
    """Run ``work`` in a forked child, so the peak RSS it measures is its own; what it returns."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read)
        in_memory = getattr(connection, "is_in_memory_db", None)  # SQLite's backend only
        if not (callable(in_memory) and in_memory()):
            # A connection of its own. The parent's is dropped, not closed (closing
            # would end the parent's session too) and kept referenced until
            # os._exit, so no finaliser closes it either. An in-memory SQLite
            # database is the child's own copy and is read as it is.
            for alias in connections:
                INHERITED.append(connections[alias].connection)
                connections[alias].connection = None
        os.write(write, work().encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        text = pipe.read()
    os.waitpid(pid, 0)
    return text


def export_in_child(form: str, conversations: int) -> tuple[float, int, int]:
    """Export the first ``conversations`` in a forked child to /dev/null:
    (seconds, peak RSS KiB, growth KiB)."""

    def export() -> str:
        before = rss_kib()
        ids = select_conversations().values_list("pk", flat=True)[:conversations]
        chosen = select_conversations().filter(pk__in=list(ids))
        started = time.perf_counter()
        with open(os.devnull, "w", encoding="utf-8") as sink:
            if form == "full":
                write_lines(full_records(chosen), sink)
            else:
                write_lines(FinetuneExport().records(chosen), sink)
        seconds = time.perf_counter() - started
        return f"{seconds} {rss_kib()} {rss_kib() - before}"

    seconds, peak, growth = in_child(export).split()
    return float(seconds), int(peak), int(growth)


def main() -> None:
    setup_test_environment()
    settings.DEBUG = False
    old_name = connection.creation.create_test_db(verbosity=0)
    try:
        owner = User.objects.create_user("bench")
        populate(owner)
        total = Message.objects.count()
        print(
            f"database: {connection.vendor}; {total:,} messages in {CONVERSATIONS:,} conversations"
        )
        for form in ("full", "finetune"):
            for count in (100, 500, CONVERSATIONS):
                seconds, peak, growth = export_in_child(form, count)
                messages = count * MESSAGES
                print(
                    f"  export {form:<8} {messages:>7,} messages: {messages / seconds:>9,.0f} msg/s"
                    f"  peak RSS {peak / 1024:6.1f} MiB (+{growth / 1024:5.1f} MiB while exporting)"
                )
        with tempfile.TemporaryFile("w+", encoding="utf-8") as dump:
            write_lines(full_records(select_conversations()), dump)
            size = dump.tell()
            Conversation.objects.all().delete()
            dump.seek(0)
            started = time.perf_counter()
            imported = Importer().import_lines(dump)
            seconds = time.perf_counter() - started
        print(
            f"  import   {imported.messages:>7,} messages: {imported.messages / seconds:>9,.0f} msg/s"
            f"  ({size / 1e6:.1f} MB of JSON Lines)"
        )
        assert imported.messages == total
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
