"""Attachments: images and files a user uploads and messages refer to.

The bytes live in Django's default storage, never in the database; a message
refers to an attachment by id in its content parts, and the
:class:`MessageAttachment` rows index those references so an attachment that
a message shows cannot be deleted (``PROTECT``) and orphans are found by a
join. Checking uploads and loading bytes for providers belongs to
:mod:`llm_conversations.conversations.attachments`.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from llm_conversations.core.content_parts import IMAGE_TYPES

__all__ = ["Attachment", "MessageAttachment", "PartKind"]


def attachment_path(instance: Attachment, filename: str) -> str:
    """Where the bytes go: by id, so names never collide nor reveal the original."""
    return f"llm_conversations/attachments/{instance.pk}"


class PartKind(models.TextChoices):
    """How a message shows an attachment: the type of its content part."""

    IMAGE = "image", _("image")
    FILE = "file", _("file")


class Attachment(models.Model):
    """One uploaded file: its owner, checked type, size and content hash.

    ``mime_type`` is what the bytes are (detected from them, never taken from
    the upload), ``sha256`` their hash: one owner uploading the same bytes
    twice gets the same attachment back. ``width`` and ``height`` are set for
    images, ``pages`` for PDFs.
    """

    id = models.UUIDField(_("ID"), primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="llm_attachments",
        verbose_name=_("owner"),
    )
    file = models.FileField(_("file"), upload_to=attachment_path, max_length=200)
    filename = models.CharField(_("file name"), max_length=255, blank=True)
    mime_type = models.CharField(_("MIME type"), max_length=100)
    size = models.PositiveBigIntegerField(_("size"))
    sha256 = models.CharField(_("SHA-256"), max_length=64)
    width = models.PositiveIntegerField(_("width"), null=True, blank=True)
    height = models.PositiveIntegerField(_("height"), null=True, blank=True)
    pages = models.PositiveIntegerField(_("pages"), null=True, blank=True)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)

    class Meta:
        verbose_name = _("attachment")
        verbose_name_plural = _("attachments")
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "sha256"],
                name="llmconv_attachment_owner_sha256",
                violation_error_code="duplicate_attachment",
            ),
        ]
        indexes = [models.Index(fields=["created_at"], name="llmconv_attachment_created")]

    def __str__(self) -> str:
        return self.filename or str(self.pk)

    @property
    def is_image(self) -> bool:
        """Whether the attachment is an image (shown as an image part)."""
        return self.mime_type in IMAGE_TYPES

    @property
    def kind(self) -> str:
        """The content part type that shows it: ``"image"`` or ``"file"``."""
        return PartKind.IMAGE if self.is_image else PartKind.FILE


class MessageAttachment(models.Model):
    """A message showing an attachment in one of its parts (the index of the references)."""

    message = models.ForeignKey(
        "llm_conversations.Message",
        on_delete=models.CASCADE,
        related_name="attachment_links",
        verbose_name=_("message"),
    )
    attachment = models.ForeignKey(
        Attachment,
        on_delete=models.PROTECT,
        related_name="message_links",
        verbose_name=_("attachment"),
    )
    kind = models.CharField(_("kind"), max_length=8, choices=PartKind)

    class Meta:
        verbose_name = _("message attachment")
        verbose_name_plural = _("message attachments")
        constraints = [
            models.UniqueConstraint(
                fields=["message", "attachment"], name="llmconv_message_attachment_unique"
            ),
            models.CheckConstraint(
                condition=Q(kind__in=[kind.value for kind in PartKind]),
                name="llmconv_message_attachment_kind",
                violation_error_code="invalid_part",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.message_id} → {self.attachment_id}"
