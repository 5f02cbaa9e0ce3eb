"""Attachments: content parts, the model's rules, checking uploads, the store, retention."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from llm_conversations.conversations import append_messages, create_conversation, load_messages
from llm_conversations.conversations.attachments import (
    create_attachment,
    load_attachment_data,
    orphaned_attachments,
    purge_orphaned_attachments,
)
from llm_conversations.conversations.retention import (
    Deleted,
    delete_user_data,
    purge_idle_conversations,
)
from llm_conversations.conversations.transfer.export import (
    finetune_records,
    full_records,
    select_conversations,
)
from llm_conversations.conversations.transfer.importing import Importer
from llm_conversations.conversations.uploads import detect_type
from llm_conversations.core.content_parts import FilePart, ImagePart, TextPart
from llm_conversations.core.messages import ChatMessage, ToolCall
from llm_conversations.exceptions import InvalidAttachment, InvalidImport, InvalidMessage
from llm_conversations.models import Attachment, Conversation, Message, MessageAttachment
from llm_conversations.runs.forks import fork
from llm_conversations.runs.service import ToolLoopService
from tests.support.attachment_files import bomb_bytes, image_bytes, pdf_bytes


@pytest.fixture(autouse=True)
def media_root(settings: Any, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path
    return tmp_path


def stored_files(root: Path) -> list[Path]:
    return [path for path in root.rglob("*") if path.is_file()]


# Content parts: the value object ---------------------------------------------


def test_a_user_message_of_parts_keeps_its_text_and_its_parts() -> None:
    message = ChatMessage.user(
        [{"type": "text", "text": "Compare"}, {"type": "image", "attachment_id": "a1"}]
    )
    assert message.content == "Compare"
    assert message.parts == (TextPart("Compare"), ImagePart("a1"))
    assert message.to_stored() == {
        "role": "user",
        "content": [
            {"type": "text", "text": "Compare"},
            {"type": "image", "attachment_id": "a1"},
        ],
        "tool_calls": None,
        "tool_call_id": None,
        "is_error": False,
    }
    assert ChatMessage.from_dict(message.to_stored()) == message


def test_plain_text_stays_a_string() -> None:
    message = ChatMessage.user("hi")
    assert message.parts is None
    assert message.to_wire() == {"role": "user", "content": "hi"}


def test_the_wire_form_carries_data_urls_and_reads_back() -> None:
    message = ChatMessage.user(
        [
            ImagePart(mime_type="image/png", data=b"png"),
            FilePart(mime_type="application/pdf", filename="a.pdf", data=b"pdf"),
        ]
    )
    wire = message.to_wire()
    assert wire == {
        "role": "user",
        "content": [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,cG5n"}},
            {
                "type": "file",
                "file": {"filename": "a.pdf", "file_data": "data:application/pdf;base64,cGRm"},
            },
        ],
    }
    again = ChatMessage.from_dict(wire)
    assert [part.data for part in again.parts or ()] == [b"png", b"pdf"]
    assert again.content == ""


@pytest.mark.parametrize(
    ("data", "code", "field"),
    [
        (
            {"role": "assistant", "content": [{"type": "text", "text": "x"}]},
            "content_part_not_allowed",
            "content",
        ),
        (
            {"role": "system", "content": [{"type": "text", "text": "x"}]},
            "content_part_not_allowed",
            "content",
        ),
        (
            {
                "role": "tool",
                "tool_call_id": "c",
                "content": [{"type": "file", "attachment_id": "a"}],
            },
            "content_part_not_allowed",
            "content[0]",
        ),
        ({"role": "user", "content": []}, "missing_content", "content"),
        ({"role": "user", "content": [{"type": "video"}]}, "invalid_part", "content[0].type"),
        (
            {"role": "user", "content": [{"type": "text", "text": ""}]},
            "invalid_part",
            "content[0].text",
        ),
        (
            {"role": "user", "content": [{"type": "image", "attachment_id": ""}]},
            "invalid_part",
            "content[0].attachment_id",
        ),
        ({"role": "user", "content": ["x"]}, "invalid_part", "content[0]"),
        (
            {
                "role": "user",
                "content": [{"type": "image_url", "image_url": {"url": "https://x/a.png"}}],
            },
            "unsupported_content",
            "content[0].image_url.url",
        ),
        (
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,!!"}}
                ],
            },
            "invalid_part",
            "content[0].image_url.url",
        ),
    ],
)
def test_part_rules(data: dict[str, Any], code: str, field: str) -> None:
    with pytest.raises(InvalidMessage) as info:
        ChatMessage.from_dict(data)
    assert (info.value.code, info.value.field) == (code, field)


def test_a_tool_result_may_carry_an_image() -> None:
    message = ChatMessage.tool_result("c", [TextPart("shot"), ImagePart("a1")])
    assert message.parts == (TextPart("shot"), ImagePart("a1"))


# The model and the database -------------------------------------------------


@pytest.mark.django_db
def test_clean_reports_a_part_rule_on_content_parts() -> None:
    conversation = Conversation.objects.create()
    row = Message(
        conversation=conversation,
        position=0,
        role="assistant",
        content="x",
        content_parts=[{"type": "text", "text": "x"}],
    )
    with pytest.raises(ValidationError) as info:
        row.clean()
    assert info.value.error_dict["content_parts"][0].code == "content_part_not_allowed"


INVALID_PART_ROWS: list[tuple[dict[str, Any], str]] = [
    (
        {"role": "assistant", "content": "x", "content_parts": [{"type": "text", "text": "x"}]},
        "llmconv_message_content_parts_roles",
    ),
    (
        {"role": "user", "content": "", "content_parts": []},
        "llmconv_message_content_parts_nonempty",
    ),
    (
        {"role": "user", "content": "", "content_parts": {"type": "text"}},
        "llmconv_message_content_parts_nonempty",
    ),
    *(
        (
            {"role": "user", "content": "", "content_parts": parts},
            "llmconv_message_content_parts_items",
        )
        for parts in [
            [{"type": "video"}],
            [{"type": "text", "text": ""}],
            [{"type": "text", "text": 3}],
            [{"type": "image"}],
            [{"type": "file", "attachment_id": ""}],
            [{"type": "text", "text": "x"}, "junk"],
        ]
    ),
    (
        {
            "role": "tool",
            "tool_call_id": "c",
            "content": "",
            "content_parts": [{"type": "file", "attachment_id": "a"}],
        },
        "llmconv_message_content_parts_items",
    ),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("fields", "constraint"), INVALID_PART_ROWS)
def test_database_refuses_invalid_parts(fields: dict[str, Any], constraint: str) -> None:
    conversation = Conversation.objects.create()
    with pytest.raises(IntegrityError) as info, transaction.atomic():
        Message.objects.bulk_create([Message(conversation=conversation, position=0, **fields)])
    assert constraint in str(info.value)


@pytest.mark.django_db
def test_tool_call_triggers_survive_the_table_rebuild() -> None:
    conversation = Conversation.objects.create()
    call = {"id": "a", "type": "function", "function": {"name": "f", "arguments": {}}}
    with pytest.raises(IntegrityError) as info, transaction.atomic():
        Message.objects.create(
            conversation=conversation,
            position=0,
            role="assistant",
            content="",
            tool_calls=[call, call],
        )
    assert "llmconv_message_tool_calls_items" in str(info.value)


# Checking uploads ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "mime_type"),
    [
        (image_bytes("PNG"), "image/png"),
        (image_bytes("JPEG"), "image/jpeg"),
        (image_bytes("GIF"), "image/gif"),
        (image_bytes("WEBP"), "image/webp"),
        (pdf_bytes(), "application/pdf"),
        (b"hello", None),
    ],
)
def test_type_detected_from_the_bytes(data: bytes, mime_type: str | None) -> None:
    assert detect_type(data) == mime_type


@pytest.mark.django_db
def test_an_image_is_stored_with_its_metadata_and_deduplicated(media_root: Path) -> None:
    user = User.objects.create(username="u")
    data = image_bytes("PNG", (40, 30))
    attachment, created = create_attachment(
        user, data, filename="red.png", declared_type="image/png"
    )
    assert created
    assert (attachment.mime_type, attachment.width, attachment.height, attachment.size) == (
        "image/png",
        40,
        30,
        len(data),
    )
    assert attachment.file.read() == data
    again, created = create_attachment(user, data, filename="other.png")
    assert (again.pk, created) == (attachment.pk, False)
    other, created = create_attachment(User.objects.create(username="v"), data)
    assert created
    assert other.pk != attachment.pk
    assert len(stored_files(media_root)) == 2


@pytest.mark.django_db
def test_a_pdf_is_stored_with_its_pages() -> None:
    attachment, _ = create_attachment(None, pdf_bytes(3), filename="a.pdf")
    assert (attachment.mime_type, attachment.pages, attachment.width) == (
        "application/pdf",
        3,
        None,
    )


def _hostile() -> list[tuple[Any, str | None, str, dict[str, Any]]]:
    png = image_bytes("PNG")
    return [
        (b"", None, "empty_file", {}),
        (b"MZ\x90\x00 an executable", None, "unsupported_type", {}),
        (png, "image/jpeg", "type_mismatch", {}),
        (pdf_bytes(), "image/png", "type_mismatch", {}),
        (png[: len(png) // 2], "image/png", "invalid_image", {}),
        (b"\x89PNG\r\n\x1a\n" + b"\x00" * 40, None, "invalid_image", {}),
        (
            image_bytes("PNG", (2000, 2000), "1"),
            None,
            "image_too_large",
            {"ATTACHMENT_MAX_PIXELS": 1_000_000},
        ),
        # Claims 10^10 pixels in 68 bytes: refused from the header, over
        # Pillow's own limit too, and at the default ATTACHMENT_MAX_PIXELS.
        (bomb_bytes(), None, "image_too_large", {}),
        (bomb_bytes(6000, 5000), None, "image_too_large", {}),
        (png, None, "attachment_too_large", {"ATTACHMENT_MAX_BYTES": 100}),
        (png, None, "unsupported_type", {"ATTACHMENT_TYPES": ["application/pdf"]}),
        (pdf_bytes()[:-10], None, "invalid_pdf", {}),
        (pdf_bytes(5), None, "too_many_pages", {"ATTACHMENT_MAX_PDF_PAGES": 4}),
    ]


@pytest.mark.django_db
@pytest.mark.parametrize(("data", "declared", "code", "overrides"), _hostile())
def test_hostile_uploads_are_refused_and_nothing_is_stored(
    settings: Any,
    media_root: Path,
    data: bytes,
    declared: str | None,
    code: str,
    overrides: dict[str, Any],
) -> None:
    settings.LLM_CONVERSATIONS = overrides
    with pytest.raises(InvalidAttachment) as info:
        create_attachment(None, data, declared_type=declared)
    assert info.value.code == code
    assert not Attachment.objects.exists()
    assert stored_files(media_root) == []


# Messages refer to attachments ---------------------------------------------------


@pytest.fixture
def owner(db: None) -> User:
    return User.objects.create(username="owner")


@pytest.fixture
def image(owner: User) -> Attachment:
    return create_attachment(owner, image_bytes("PNG", (64, 64)), filename="red.png")[0]


def test_a_message_shows_an_attachment_by_id(owner: User, image: Attachment) -> None:
    conversation = create_conversation(owner=owner)
    parts = [
        {"type": "text", "text": "What colour?"},
        {"type": "image", "attachment_id": str(image.pk)},
    ]
    [row] = append_messages(conversation, [{"role": "user", "content": parts}])
    row.refresh_from_db()
    assert (row.content, row.content_parts) == ("What colour?", parts)
    assert list(row.attachments.all()) == [image]
    assert MessageAttachment.objects.get().kind == "image"
    [loaded] = load_messages(conversation)
    assert loaded.parts == (TextPart("What colour?"), ImagePart(str(image.pk)))


@pytest.mark.parametrize(
    ("part", "code"),
    [
        ({"type": "file", "attachment_id": "IMAGE"}, "attachment_kind_mismatch"),
        (
            {"type": "image", "attachment_id": "00000000-0000-0000-0000-000000000000"},
            "unknown_attachment",
        ),
        ({"type": "image", "attachment_id": "not-a-uuid"}, "unknown_attachment"),
        (
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,cG5n"}},
            "missing_attachment",
        ),
    ],
)
def test_a_message_cannot_show_what_it_may_not(
    owner: User, image: Attachment, part: dict[str, Any], code: str
) -> None:
    conversation = create_conversation(owner=owner)
    if part.get("attachment_id") == "IMAGE":
        part = {**part, "attachment_id": str(image.pk)}
    with pytest.raises(InvalidMessage) as info:
        append_messages(conversation, [{"role": "user", "content": [part]}])
    assert info.value.code == code
    assert info.value.field == "messages[0].content[0].attachment_id"
    assert not Message.objects.exists()


def test_another_users_attachment_is_unknown(image: Attachment) -> None:
    stranger = User.objects.create(username="stranger")
    conversation = create_conversation(owner=stranger)
    with pytest.raises(InvalidMessage) as info:
        append_messages(
            conversation,
            [{"role": "user", "content": [{"type": "image", "attachment_id": str(image.pk)}]}],
        )
    assert info.value.code == "unknown_attachment"


def test_loading_fills_in_the_bytes_in_one_query(
    owner: User, image: Attachment, django_assert_num_queries: Any
) -> None:
    conversation = create_conversation(owner=owner)
    ref = {"type": "image", "attachment_id": str(image.pk)}
    append_messages(
        conversation,
        [
            {"role": "user", "content": [ref]},
            {"role": "assistant", "content": "red"},
            {"role": "user", "content": [ref]},
        ],
    )
    history = load_messages(conversation)
    with django_assert_num_queries(1):
        loaded = load_attachment_data(history)
    part = loaded[0].parts[0]  # type: ignore[index]
    assert isinstance(part, ImagePart)
    assert (part.data, part.mime_type, part.width) == (
        image.file.open("rb").read(),
        "image/png",
        64,
    )
    assert loaded[1] is history[1]


def test_a_run_sends_the_image_and_the_echo_describes_it(owner: User, image: Attachment) -> None:
    conversation = create_conversation(owner=owner)
    message = {
        "role": "user",
        "content": [
            {"type": "text", "text": "Look"},
            {"type": "image", "attachment_id": str(image.pk)},
        ],
    }
    run = ToolLoopService().send(conversation, message)
    assert run.status == "completed"
    reply = load_messages(conversation)[-1]
    assert reply.content == f"Look [image/png 64x64, {image.size} B]"


def test_a_fork_shows_the_same_attachments(owner: User, image: Attachment) -> None:
    conversation = create_conversation(owner=owner)
    ref = {"type": "image", "attachment_id": str(image.pk)}
    append_messages(
        conversation, [{"role": "user", "content": [ref]}, {"role": "assistant", "content": "red"}]
    )
    copy = fork(conversation, message_id=None)
    assert MessageAttachment.objects.filter(message__conversation=copy).count() == 1
    assert load_messages(copy) == load_messages(conversation)


def test_a_tool_result_image_is_stored(owner: User, image: Attachment) -> None:
    conversation = create_conversation(owner=owner)
    append_messages(
        conversation,
        [
            ChatMessage.user("screenshot please"),
            ChatMessage.assistant_tool_calls([ToolCall("c1", "screenshot")]),
            ChatMessage.tool_result("c1", [TextPart("here"), ImagePart(str(image.pk))]),
        ],
    )
    assert load_messages(conversation)[-1].parts == (TextPart("here"), ImagePart(str(image.pk)))


# Retention -------------------------------------------------------------------------


def test_orphaned_attachments_are_purged_with_their_files(
    owner: User, image: Attachment, media_root: Path, django_capture_on_commit_callbacks: Any
) -> None:
    shown = create_attachment(owner, image_bytes("GIF"), filename="shown.gif")[0]
    conversation = create_conversation(owner=owner)
    append_messages(
        conversation,
        [{"role": "user", "content": [{"type": "image", "attachment_id": str(shown.pk)}]}],
    )
    later = timezone.now() + timedelta(hours=25)
    assert list(orphaned_attachments(later)) == [image]
    assert purge_orphaned_attachments(timezone.now() - timedelta(hours=1)) == 0
    with django_capture_on_commit_callbacks(execute=True):
        assert purge_orphaned_attachments(later) == 1
    assert list(Attachment.objects.all()) == [shown]
    assert [path.name for path in stored_files(media_root)] == [Path(shown.file.name).name]


def test_orphans_are_kept_forever_when_so_set(settings: Any, image: Attachment) -> None:
    settings.LLM_CONVERSATIONS = {"ORPHAN_ATTACHMENT_HOURS": None}
    assert purge_orphaned_attachments() == 0
    assert Attachment.objects.count() == 1


def test_an_attachment_a_message_shows_cannot_be_deleted(owner: User, image: Attachment) -> None:
    conversation = create_conversation(owner=owner)
    append_messages(
        conversation,
        [{"role": "user", "content": [{"type": "image", "attachment_id": str(image.pk)}]}],
    )
    with pytest.raises(Exception, match="protected"), transaction.atomic():
        image.delete()


def test_purging_conversations_purges_the_attachments_they_showed(
    owner: User, image: Attachment, media_root: Path, django_capture_on_commit_callbacks: Any
) -> None:
    conversation = create_conversation(owner=owner)
    append_messages(
        conversation,
        [{"role": "user", "content": [{"type": "image", "attachment_id": str(image.pk)}]}],
    )
    long_ago = timezone.now() - timedelta(days=60)
    Conversation.objects.filter(pk=conversation.pk).update(updated_at=long_ago)
    Attachment.objects.filter(pk=image.pk).update(created_at=long_ago)
    with django_capture_on_commit_callbacks(execute=True):
        deleted = purge_idle_conversations(timezone.now() - timedelta(days=30))
    assert deleted == Deleted(conversations=1, messages=1, attachments=1)
    assert not Attachment.objects.exists()
    assert stored_files(media_root) == []


# Export and import ----------------------------------------------------------------


def test_export_carries_attachments_by_reference_and_imports_back(
    owner: User, image: Attachment
) -> None:
    conversation = create_conversation(owner=owner)
    ref = {"type": "image", "attachment_id": str(image.pk)}
    append_messages(
        conversation,
        [{"role": "user", "content": [ref]}, {"role": "assistant", "content": "red"}],
    )
    [record] = full_records(select_conversations())
    first, answer = record["messages"]
    assert first["content"] == [ref]
    assert first["attachments"] == [
        {
            "id": str(image.pk),
            "filename": "red.png",
            "mime_type": "image/png",
            "size": image.size,
            "sha256": image.sha256,
            "data": None,
        }
    ]
    assert answer["attachments"] == []
    assert list(finetune_records(select_conversations())) == []
    Conversation.objects.all().delete()
    imported = Importer().import_record(record)
    assert imported is not None
    assert list(imported.messages.get(position=0).attachments.all()) == [image]
    Conversation.objects.all().delete()
    record["messages"][0]["attachments"] = []
    with pytest.raises(InvalidImport) as info:
        Importer().import_record(record)
    assert (info.value.code, info.value.field) == ("invalid_import", "messages[0].attachments")


def test_a_part_the_provider_cannot_take_fails_the_run_before_any_request(
    settings: Any, owner: User
) -> None:
    settings.LLM_CONVERSATIONS = {
        "PROVIDERS": {"local": {"BACKEND": "ollama", "MODEL": "llava"}},
        "DEFAULT_PROVIDER": "local",
    }
    spec = create_attachment(owner, pdf_bytes(), filename="spec.pdf")[0]
    conversation = create_conversation(owner=owner)
    message = {"role": "user", "content": [{"type": "file", "attachment_id": str(spec.pk)}]}
    run = ToolLoopService().send(conversation, message)
    assert (run.status, run.termination_reason) == ("failed", "provider_error")
    assert run.error_type == "UnsupportedContent"
    assert run.error_message == "ollama cannot take file parts in user messages (messages[0])."
    assert [m.role for m in load_messages(conversation)] == ["user"]


def test_deleting_a_users_data_deletes_their_attachments_and_files(
    owner: User, image: Attachment, media_root: Path, django_capture_on_commit_callbacks: Any
) -> None:
    conversation = create_conversation(owner=owner)
    append_messages(
        conversation,
        [{"role": "user", "content": [{"type": "image", "attachment_id": str(image.pk)}]}],
    )
    create_attachment(owner, pdf_bytes(), filename="never-sent.pdf")
    kept = create_attachment(User.objects.create(username="other"), pdf_bytes())[0]
    with django_capture_on_commit_callbacks(execute=True):
        deleted = delete_user_data(owner)
    assert (deleted.conversations, deleted.attachments) == (1, 2)
    assert list(Attachment.objects.all()) == [kept]
    assert [path.name for path in stored_files(media_root)] == [Path(kept.file.name).name]


def test_a_row_deleted_any_way_takes_its_file(
    image: Attachment, media_root: Path, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        image.owner.delete()  # type: ignore[union-attr]  # cascades to the attachment
    assert len(callbacks) == 1
    assert not Attachment.objects.exists()
    assert stored_files(media_root) == []
