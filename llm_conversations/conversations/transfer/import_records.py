"""Reading a line of our full-fidelity export form into the rows it stores.

:class:`RecordReader` checks each value of a line (``import_shapes``), each
row's field rules (``clean_fields()``, ``Message.clean()``), the rating rules
(``conversations/feedback.check_rating``) and that messages point to runs of
their own conversation, and builds the unsaved rows; the importer
(``conversations/transfer/importing.py``) stores them through the store. Owners and
raters are found by username. A run exported unfinished (queued, running,
waiting) is read as cancelled, ``imported_unfinished``, and the calls it left
open get the results a cancel gives (:func:`answered_unfinished`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model

from llm_conversations.conversations.feedback import check_rating
from llm_conversations.conversations.lifecycle import tool_groups
from llm_conversations.conversations.transfer.export import FORMAT, FORMAT_VERSION
from llm_conversations.conversations.transfer.import_attachments import InlineFile, inline_file
from llm_conversations.conversations.transfer.import_shapes import (
    CONVERSATION_KEYS,
    FEEDBACK_KEYS,
    MESSAGE_KEYS,
    MESSAGE_KEYS_V1,
    MESSAGE_KEYS_V2,
    MESSAGE_KEYS_V3,
    READ_VERSIONS,
    RUN_KEYS,
    check_attachment_list,
    check_storable_value,
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
from llm_conversations.conversations.unanswered import unanswered_results
from llm_conversations.core.messages import ChatMessage
from llm_conversations.core.sequence import unanswered_tool_call_ids
from llm_conversations.core.tool_specs import ToolSpec
from llm_conversations.exceptions import InvalidImport
from llm_conversations.models import (
    MESSAGE_FIELDS,
    Conversation,
    Decision,
    Feedback,
    Message,
    Run,
    RunStatus,
    TerminationReason,
    WaitingCall,
)
from llm_conversations.users import User

__all__ = ["Items", "ReadRecord", "RecordReader", "answered_unfinished"]

Items = list[tuple[ChatMessage, dict[str, Any]]]
"""A history to store: each message with the other column values of its row."""


@dataclass
class ReadRecord:
    """The unsaved rows of one line, and the times its conversation had."""

    conversation: Conversation
    runs: list[Run]
    items: Items
    ratings: list[Feedback]
    times: tuple[datetime, datetime]
    # The files the line carries inline, by attachment id.
    inline: dict[str, InlineFile] = field(default_factory=dict)


class RecordReader:
    """Reads lines of our export form; ``default_owner`` owns those whose owner is
    not a user here (they are refused, ``unknown_user``, without one)."""

    def __init__(self, default_owner: User | None = None) -> None:
        self.default_owner = default_owner
        # The format version of the line being read.
        self.version = FORMAT_VERSION
        self._users: dict[str, User | None] = {}

    def conversation_id(self, record: Any) -> uuid.UUID:
        """The id of the conversation a line holds, once its format and version are known."""
        record = object_value(record, "", CONVERSATION_KEYS)
        if record["format"] != FORMAT or record["version"] not in READ_VERSIONS:
            raise InvalidImport(
                "unsupported_version",
                f"expected format {FORMAT!r} version {FORMAT_VERSION} (or an earlier one), got "
                f"{record['format']!r} version {record['version']!r}.",
                field="version",
            )
        self.version = record["version"]
        return uuid_value(record["id"], "id")

    def read(self, record: Any) -> ReadRecord:
        """Every row of the line, checked; raises :class:`InvalidImport` (or a
        value object's error) naming the field."""
        conversation_id = self.conversation_id(record)
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
        check_storable_value({"title": record["title"], "metadata": record["metadata"]}, "")
        clean_row(conversation, "", ["owner", "id", "forked_from"])
        runs = [
            self._run(item, f"runs[{i}]", conversation_id)
            for i, item in enumerate(list_value(record["runs"], "runs"))
        ]
        run_ids = {run.pk for run in runs}
        inline: dict[str, InlineFile] = {}
        items, ratings = self._messages(list_value(record["messages"], "messages"), run_ids, inline)
        items += answered_unfinished(runs, items)
        times = (
            moment(record["created_at"], "created_at"),
            moment(record["updated_at"], "updated_at"),
        )
        return ReadRecord(conversation, runs, items, ratings, times, inline)

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
        check_storable_value(dict(data), field)
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
        run.waiting_calls = [
            within(f"{field}.pending_tool_calls[{i}]", WaitingCall.from_dict, item)
            for i, item in enumerate(
                list_value(data["pending_tool_calls"], f"{field}.pending_tool_calls")
            )
        ]
        decisions = data["decisions"]
        if not isinstance(decisions, dict):
            raise invalid(f"{field}.decisions", "must be an object")
        run.decisions = {
            str(call_id): within(f"{field}.decisions", Decision, decision).value
            for call_id, decision in decisions.items()
        }
        clean_row(run, field, ["conversation", "id"])
        if run.is_active:
            # Nothing here executes it: it ends as a cancel would end it
            # (its open calls are answered by _answered_unfinished).
            run.status = RunStatus.CANCELLED
            run.termination_reason = TerminationReason.IMPORTED_UNFINISHED
            run.waiting_calls = []
            run.finished_at = run.finished_at or run.updated_at
        return run

    def _messages(
        self, values: list[Any], run_ids: set[uuid.UUID], inline: dict[str, InlineFile]
    ) -> tuple[Items, list[Feedback]]:
        """The history's items and ratings; files the lines carry go into ``inline``."""
        items: Items = []
        ratings: list[Feedback] = []
        for index, value in enumerate(values):
            field = f"messages[{index}]"
            keys = (
                MESSAGE_KEYS_V1,
                MESSAGE_KEYS_V2,
                MESSAGE_KEYS_V3,
                MESSAGE_KEYS_V3,
                MESSAGE_KEYS,
            )[self.version - 1]
            data = object_value(value, field, keys)
            message = within(
                field,
                ChatMessage.from_dict,
                {key: data[key] for key in (*MESSAGE_FIELDS, "reasoning") if key in data},
            )
            if self.version > 1:
                where = f"{field}.attachments"
                listed = check_attachment_list(
                    message, data["attachments"], where, version=self.version
                )
                for i, listed_item in enumerate(listed):
                    file = inline_file(listed_item, f"{where}[{i}]")
                    if file is not None:
                        inline[str(listed_item["id"])] = file
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
            if self.version >= 5 and data["hidden_at"] is not None:
                extra["hidden_at"] = moment(data["hidden_at"], f"{field}.hidden_at")
                extra["hidden_reason"] = data["hidden_reason"]
            row = Message(position=index, **Message.fields_from_chat_message(message), **extra)
            clean_row(row, field, ["conversation", "run", "id"])
            items.append((message, extra))
            for i, item in enumerate(list_value(data["feedback"], f"{field}.feedback")):
                ratings.append(self._rating(row, item, f"{field}.feedback[{i}]"))
        hidden = [extra.get("hidden_at") is not None for _, extra in items]
        for group in tool_groups([message for message, _ in items]):
            if len(set(hidden[group.start : group.stop])) > 1:
                raise invalid(
                    f"messages[{group.start}].hidden_at",
                    "a tool group (an assistant turn with calls and their results) is hidden whole",
                )
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


def answered_unfinished(runs: list[Run], items: Items) -> Items:
    """The results that answer the calls a run exported unfinished left open,
    as the engine answers them when a run is cancelled."""
    unfinished = [r for r in runs if r.termination_reason == TerminationReason.IMPORTED_UNFINISHED]
    unanswered = unanswered_tool_call_ids([message for message, _ in items])
    if not unfinished or not unanswered:
        return []
    run = unfinished[-1]
    return [
        (message, {"run_id": run.pk, "metadata": {}, "created_at": run.finished_at})
        for message in unanswered_results(unanswered, TerminationReason.IMPORTED_UNFINISHED)
    ]
