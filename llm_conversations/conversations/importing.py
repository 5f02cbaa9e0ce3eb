"""Importing conversations written in the full-fidelity export form.

Each line of the file is one conversation (:mod:`llm_conversations.conversations.export`
writes them), imported in a transaction of its own and only if every part of it
passes the rules a conversation stored here passes: the message and sequence
rules and what the columns hold (``conversations/store.insert_history`` applies
``check_sequence`` and ``_check_storable``), each row's field rules
(``clean_fields()``, ``Message.clean()``), the rating rules
(``conversations/feedback.check_rating``), only ended runs, and messages that point
to runs of their own conversation. Owners and raters are found by username.
Ids, timestamps and counts are kept, so exporting again gives the same bytes.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.db import IntegrityError, connection, transaction
from django.db.models import Field, Model

from llm_conversations.conversations.export import FORMAT, FORMAT_VERSION
from llm_conversations.conversations.feedback import check_rating
from llm_conversations.conversations.import_shapes import (
    CONVERSATION_KEYS,
    FEEDBACK_KEYS,
    MESSAGE_KEYS,
    MESSAGE_KEYS_V1,
    MESSAGE_KEYS_V2,
    READ_VERSIONS,
    RUN_KEYS,
    check_attachment_list,
    check_storable,
    clean_row,
    decimal_value,
    invalid,
    list_value,
    moment,
    object_value,
    optional_moment,
    usage_value,
    uuid_value,
    within,
)
from llm_conversations.conversations.store import insert_history
from llm_conversations.core.messages import ChatMessage
from llm_conversations.core.tool_specs import ToolSpec
from llm_conversations.exceptions import InvalidImport
from llm_conversations.models import (
    MESSAGE_FIELDS,
    Conversation,
    Decision,
    Feedback,
    Message,
    PendingCall,
    Run,
)
from llm_conversations.users import User

__all__ = ["Imported", "Importer"]


def _times(row: Any, *names: str) -> dict[str, Any]:
    return {name: getattr(row, name) for name in names}


def _restore_times(model: type[Model], pks: list[Any], times: list[dict[str, Any]]) -> None:
    """Write ``times`` over the times an insert set, one prepared ``UPDATE`` for all rows.

    ``bulk_update`` would too, but builds a ``CASE`` per row and costs more
    than the import itself; ``QuerySet.update`` would take a statement per row.
    """
    if not pks:
        return
    meta = model._meta
    fields = [field for name in times[0] if isinstance(field := meta.get_field(name), Field)]
    pk = meta.pk
    assert pk is not None  # every model has one
    quote = connection.ops.quote_name
    sql = (
        f"UPDATE {quote(meta.db_table)} SET "
        + ", ".join(f"{quote(str(field.column))} = %s" for field in fields)
        + f" WHERE {quote(str(pk.column))} = %s"
    )
    params = [
        [field.get_db_prep_value(values[field.name], connection) for field in fields]
        + [pk.get_db_prep_value(key, connection)]
        for key, values in zip(pks, times, strict=True)
    ]
    with connection.cursor() as cursor:
        cursor.executemany(sql, params)


@dataclass
class Imported:
    """What an import stored and what it skipped (ids taken, ``skip_existing``)."""

    conversations: int = 0
    messages: int = 0
    skipped: int = 0


class Importer:
    """Reads full-fidelity lines into the database, one conversation per transaction.

    ``default_owner`` owns conversations whose owner's username is not a user
    here (without it they are refused, ``unknown_user``). Conversations whose
    id is taken are refused (``conversation_exists``) unless ``skip_existing``.
    ``line`` is the number of the line being read, for error reports.
    """

    def __init__(self, *, default_owner: User | None = None, skip_existing: bool = False) -> None:
        self.default_owner = default_owner
        self.skip_existing = skip_existing
        self.line = 0
        self.imported = Imported()
        # The format version of the line being imported.
        self.version = FORMAT_VERSION
        self._users: dict[str, User | None] = {}

    def import_lines(self, lines: Iterable[str]) -> Imported:
        """Import each non-blank line; raises :class:`InvalidImport` (or another
        rule's error) at the first conversation refused, keeping those before it."""
        for self.line, text in enumerate(lines, start=1):
            if not text.strip():
                continue
            try:
                record = json.loads(text)
            except ValueError as exc:
                raise InvalidImport("invalid_import", f"not a JSON line: {exc}.") from None
            self.import_record(record)
        return self.imported

    def import_record(self, record: Any) -> Conversation | None:
        """Import one conversation; ``None`` when skipped because its id is taken."""
        record = object_value(record, "", CONVERSATION_KEYS)
        if record["format"] != FORMAT or record["version"] not in READ_VERSIONS:
            raise InvalidImport(
                "unsupported_version",
                f"expected format {FORMAT!r} version {FORMAT_VERSION} (or an earlier one), got "
                f"{record['format']!r} version {record['version']!r}.",
                field="version",
            )
        self.version = record["version"]
        conversation_id = uuid_value(record["id"], "id")
        if Conversation.objects.filter(pk=conversation_id).exists():
            if self.skip_existing:
                self.imported.skipped += 1
                return None
            raise InvalidImport(
                "conversation_exists", f"conversation {conversation_id} exists.", field="id"
            )
        conversation = Conversation(
            id=conversation_id,
            owner=self._owner(record["owner"]),
            title=record["title"],
            title_source=record["title_source"],
            metadata=record["metadata"],
            # A source not here (not imported, or later in the file) is not linked.
            forked_from_id=self._fork_source(record["forked_from"]),
            forked_at_position=record["forked_at_position"],
        )
        check_storable({"title": record["title"], "metadata": record["metadata"]}, "")
        clean_row(conversation, "", ["owner", "id", "forked_from"])
        runs = [
            self._run(item, f"runs[{i}]", conversation_id)
            for i, item in enumerate(list_value(record["runs"], "runs"))
        ]
        run_ids = {run.pk for run in runs}
        items, ratings = self._messages(list_value(record["messages"], "messages"), run_ids)
        # Inserts set created_at and updated_at to now (auto_now); the times
        # read are written back after them.
        run_times = [_times(run, "created_at", "updated_at") for run in runs]
        rating_times = [_times(rating, "created_at", "updated_at") for rating in ratings]
        try:
            with transaction.atomic():
                conversation.save(force_insert=True)
                Run.objects.bulk_create(runs)
                _restore_times(Run, [run.pk for run in runs], run_times)
                rows = insert_history(conversation, items)
                _restore_times(
                    Message,
                    [row.pk for row in rows],
                    [{"created_at": extra["created_at"]} for _, extra in items],
                )
                Feedback.objects.bulk_create(ratings)
                _restore_times(Feedback, [rating.pk for rating in ratings], rating_times)
                # Last, after the store set updated_at to now.
                Conversation.objects.filter(pk=conversation_id).update(
                    created_at=moment(record["created_at"], "created_at"),
                    updated_at=moment(record["updated_at"], "updated_at"),
                )
        except IntegrityError:
            raise InvalidImport(
                "conversation_exists",
                f"a run or message id of conversation {conversation_id} is taken.",
                field="id",
            ) from None
        self.imported.conversations += 1
        self.imported.messages += len(rows)
        return conversation

    def _fork_source(self, value: Any) -> uuid.UUID | None:
        if value is None:
            return None
        source = uuid_value(value, "forked_from")
        return source if Conversation.objects.filter(pk=source).exists() else None

    def _user(self, username: Any, field: str) -> User | None:
        if not isinstance(username, str):
            raise invalid(field, "must be a username")
        if username not in self._users:
            model = get_user_model()
            self._users[username] = model._default_manager.filter(
                **{model.USERNAME_FIELD: username}
            ).first()
        return self._users[username]

    def _owner(self, username: Any) -> User | None:
        if username is None:
            return None
        user = self._user(username, "owner")
        if user is None:
            if self.default_owner is None:
                raise InvalidImport(
                    "unknown_user", f"no user is named {username!r}.", field="owner"
                )
            return self.default_owner
        return user

    def _run(self, value: Any, field: str, conversation_id: uuid.UUID) -> Run:
        data = object_value(value, field, RUN_KEYS)
        check_storable(dict(data), field)
        run = Run(
            id=uuid_value(data["id"], f"{field}.id"),
            conversation_id=conversation_id,
            status=data["status"],
            termination_reason=data["termination_reason"],
            provider=data["provider"],
            model=data["model"],
            instructions=data["instructions"],
            parameters=data["parameters"],
            max_iterations=data["max_iterations"],
            iterations=data["iterations"],
            **usage_value(data["usage"], f"{field}.usage", null=False),
            cost=decimal_value(data["cost"], f"{field}.cost"),
            error_type=data["error_type"],
            error_message=data["error_message"],
            attempts=data["attempts"],
            created_at=moment(data["created_at"], f"{field}.created_at"),
            updated_at=moment(data["updated_at"], f"{field}.updated_at"),
            started_at=optional_moment(data["started_at"], f"{field}.started_at"),
            finished_at=optional_moment(data["finished_at"], f"{field}.finished_at"),
        )
        run.offered_tools = [
            within(f"{field}.tools[{i}]", ToolSpec.from_dict, item)
            for i, item in enumerate(list_value(data["tools"], f"{field}.tools"))
        ]
        run.pending_tool_calls = Run.stored_waiting(
            within(f"{field}.pending_tool_calls[{i}]", PendingCall.from_dict, item)
            for i, item in enumerate(
                list_value(data["pending_tool_calls"], f"{field}.pending_tool_calls")
            )
        )
        decisions = data["decisions"]
        if not isinstance(decisions, dict):
            raise invalid(f"{field}.decisions", "must be an object")
        run.decisions = {
            str(call_id): within(f"{field}.decisions", Decision, decision).value
            for call_id, decision in decisions.items()
        }
        clean_row(run, field, ["conversation", "id"])
        if run.is_active:
            raise InvalidImport(
                "active_run", "only ended runs are imported.", field=f"{field}.status"
            )
        return run

    def _messages(
        self, values: list[Any], run_ids: set[uuid.UUID]
    ) -> tuple[list[tuple[ChatMessage, dict[str, Any]]], list[Feedback]]:
        items: list[tuple[ChatMessage, dict[str, Any]]] = []
        ratings: list[Feedback] = []
        for index, value in enumerate(values):
            field = f"messages[{index}]"
            keys = (MESSAGE_KEYS_V1, MESSAGE_KEYS_V2, MESSAGE_KEYS)[self.version - 1]
            data = object_value(value, field, keys)
            message = within(
                field,
                ChatMessage.from_dict,
                {key: data[key] for key in (*MESSAGE_FIELDS, "reasoning") if key in data},
            )
            if self.version > 1:
                check_attachment_list(message, data["attachments"], f"{field}.attachments")
            run_id = None if data["run"] is None else uuid_value(data["run"], f"{field}.run")
            if run_id is not None and run_id not in run_ids:
                raise invalid(f"{field}.run", "must be a run of this conversation")
            extra = {
                "id": uuid_value(data["id"], f"{field}.id"),
                "run_id": run_id,
                "provider": data["provider"],
                "model": data["model"],
                "finish_reason": data["finish_reason"],
                **usage_value(data["usage"], f"{field}.usage", null=True),
                "cost": None
                if data["cost"] is None
                else decimal_value(data["cost"], f"{field}.cost"),
                "parsed": data["parsed"],
                "metadata": data["metadata"],
                "created_at": moment(data["created_at"], f"{field}.created_at"),
            }
            row = Message(position=index, **Message.fields_from_chat_message(message), **extra)
            clean_row(row, field, ["conversation", "run", "id"])
            items.append((message, extra))
            for i, item in enumerate(list_value(data["feedback"], f"{field}.feedback")):
                ratings.append(self._rating(row, item, f"{field}.feedback[{i}]"))
        return items, ratings

    def _rating(self, message: Message, value: Any, field: str) -> Feedback:
        data = object_value(value, field, FEEDBACK_KEYS)
        within(field, check_rating, message, data["rating"], data["comment"])
        user = self._user(data["user"], f"{field}.user")
        if user is None:
            raise InvalidImport(
                "unknown_user", f"no user is named {data['user']!r}.", field=f"{field}.user"
            )
        return Feedback(
            message_id=message.pk,
            user=user,
            rating=data["rating"],
            comment=data["comment"],
            created_at=moment(data["created_at"], f"{field}.created_at"),
            updated_at=moment(data["updated_at"], f"{field}.updated_at"),
        )
