"""The attachment representation and the upload form."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from llm_conversations.models import Attachment

__all__ = ["AttachmentSerializer", "AttachmentUploadSerializer", "attachment_data"]


class AttachmentSerializer(serializers.Serializer[Attachment]):
    """An attachment's metadata; its bytes are at ``content/``."""

    id = serializers.UUIDField()
    filename = serializers.CharField(help_text="The uploaded file's name (may be empty).")
    mime_type = serializers.CharField(help_text="The type detected from the bytes.")
    kind = serializers.ChoiceField(
        choices=["image", "file"], help_text="The content part type that shows it."
    )
    size = serializers.IntegerField(help_text="Bytes.")
    sha256 = serializers.CharField()
    width = serializers.IntegerField(allow_null=True, help_text="Images: pixels.")
    height = serializers.IntegerField(allow_null=True, help_text="Images: pixels.")
    pages = serializers.IntegerField(
        allow_null=True, help_text="PDFs: pages, when the file lists them uncompressed."
    )
    created_at = serializers.DateTimeField()

    def to_representation(self, instance: Attachment) -> dict[str, Any]:
        return attachment_data(instance)


def attachment_data(attachment: Attachment) -> dict[str, Any]:
    """The representation of one attachment (the ``AttachmentSerializer`` fields)."""
    return {
        "id": str(attachment.pk),
        "filename": attachment.filename,
        "mime_type": attachment.mime_type,
        "kind": attachment.kind,
        "size": attachment.size,
        "sha256": attachment.sha256,
        "width": attachment.width,
        "height": attachment.height,
        "pages": attachment.pages,
        "created_at": serializers.DateTimeField().to_representation(attachment.created_at),
    }


class AttachmentUploadSerializer(serializers.Serializer[Any]):
    """A multipart upload: the ``file`` field (schema only; the service checks the bytes)."""

    file = serializers.FileField()
