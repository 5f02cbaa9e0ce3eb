"""The memory an import takes: a ChatGPT export and a JSON Lines file, at two sizes.

Writes a ChatGPT ``conversations.json`` (one JSON array, on one line, as the
export has it) and an OpenAI JSON Lines file holding the same conversations
(``--conversations`` of them, ``--messages`` turns each, ``--chars`` of text a
turn), and a fifth of each, then imports each file with ``manage.py
import_conversations`` in a forked child. Prints each import's rate and the
child's peak RSS (``resource.getrusage``) less its RSS before it began: an
import that streams takes the same memory for the fifth and the whole file.
Runs on the demo project's database settings (``DATABASE_URL`` for PostgreSQL)
in a throwaway test database (SQLite's in a file, so it is not in the RSS).

Usage::

    python bench/import_memory.py [--conversations 3000] [--messages 40] [--chars 200]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from io import StringIO
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

import django

django.setup()

from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection
from django.test.utils import setup_test_environment

from bench.export import in_child, rss_kib
from llm_conversations.models import Conversation
from tests.support.import_files import chatgpt_conversation, openai_line


def write_files(folder: Path, count: int, messages: int, chars: int) -> dict[str, Path]:
    """The ChatGPT export (one line) and the JSON Lines file, written a conversation at a time."""
    export, lines = folder / f"chatgpt-{count}.json", folder / f"openai-{count}.jsonl"
    with export.open("w", encoding="utf-8") as array, lines.open("w", encoding="utf-8") as jsonl:
        array.write("[")
        for number in range(count):
            conversation = chatgpt_conversation(number, messages, chars)
            array.write(("," if number else "") + json.dumps(conversation))
            jsonl.write(openai_line(conversation) + "\n")
        array.write("]")
    return {"chatgpt": export, "openai": lines}


def import_in_child(path: Path, fmt: str) -> tuple[float, int, str]:
    """Import ``path`` in a forked child: (seconds, RSS growth KiB, the command's summary)."""

    def run() -> str:
        if connection.vendor == "sqlite":
            # Commits not waiting on the disk, as the in-memory test databases do not.
            with connection.cursor() as cursor:
                cursor.execute("PRAGMA synchronous = OFF")
        before = rss_kib()
        out = StringIO()
        started = time.perf_counter()
        call_command(
            "import_conversations",
            str(path),
            "--format",
            fmt,
            "--default-owner",
            "bench",
            stdout=out,
            stderr=StringIO(),
        )
        seconds = time.perf_counter() - started
        return f"{seconds} {rss_kib() - before} {out.getvalue().strip()}"

    took, growth, summary = in_child(run).split(" ", 2)
    Conversation.objects.all().delete()
    return float(took), int(growth), summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=3000)
    parser.add_argument("--messages", type=int, default=40)
    parser.add_argument("--chars", type=int, default=200)
    options = parser.parse_args()
    setup_test_environment()
    settings.DEBUG = False
    folder = tempfile.TemporaryDirectory()
    if connection.vendor == "sqlite":
        # A file, not memory: the process's RSS is then the import's, not the database's.
        connection.settings_dict["TEST"]["NAME"] = str(Path(folder.name) / "bench.sqlite3")
    old_name = connection.creation.create_test_db(verbosity=0)
    try:
        User.objects.create_user("bench")
        print(f"database: {connection.vendor}")
        for count in (options.conversations // 5, options.conversations):
            files = write_files(Path(folder.name), count, options.messages, options.chars)
            for fmt, path in files.items():
                seconds, growth, summary = import_in_child(path, fmt)
                messages = count * options.messages
                print(
                    f"  {fmt:<8} {path.stat().st_size / 1e6:6.1f} MB, {count:>6,} conversations:"
                    f" {messages / seconds:>7,.0f} msg/s, +{growth / 1024:6.1f} MiB peak RSS"
                )
                assert f"Imported {count} conversation(s)" in summary, summary
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
        folder.cleanup()


if __name__ == "__main__":
    main()
