"""Uploading attachments, reading their metadata and downloading them: the owner's only."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import FileResponse, HttpRequest
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from llm_conversations.api.parsers import BodyRequest
from llm_conversations.api.serializers.attachments import (
    AttachmentSerializer,
    AttachmentUploadSerializer,
    attachment_data,
)
from llm_conversations.api.views.base import BODY_ERRORS, ApiView, error_responses, signed_in
from llm_conversations.conf import conf
from llm_conversations.conversations.attachments import create_attachment, file_response
from llm_conversations.exceptions import InvalidAttachment
from llm_conversations.models import Attachment

__all__ = ["AttachmentViewSet"]

# Room for the multipart framing around the file.
UPLOAD_OVERHEAD = 64 * 1024


class UploadRequest(BodyRequest):
    """A request whose body may hold one attachment: ``ATTACHMENT_MAX_BYTES`` and framing."""

    def max_bytes(self) -> int:
        return conf.ATTACHMENT_MAX_BYTES + UPLOAD_OVERHEAD


def _too_large(size: int) -> InvalidAttachment:
    return InvalidAttachment(
        "attachment_too_large",
        f"attachments may have at most {conf.ATTACHMENT_MAX_BYTES} bytes; got {size}.",
        field="file",
    )


class AttachmentViewSet(ApiView, viewsets.GenericViewSet[Attachment]):
    """Images and PDFs the caller uploads, for messages to show by id."""

    parser_classes = [MultiPartParser]
    queryset = Attachment.objects.all()
    # What OPTIONS describes for POST: the upload form.
    serializer_class = AttachmentUploadSerializer

    def initialize_request(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Request:
        drf_request = super().initialize_request(request, *args, **kwargs)
        return UploadRequest(
            request,
            parsers=drf_request.parsers,
            authenticators=self.get_authenticators(),
            negotiator=drf_request.negotiator,
            parser_context=drf_request.parser_context,
        )

    def get_queryset(self) -> QuerySet[Attachment]:
        """The caller's attachments (another user's do not exist: 404)."""
        return super().get_queryset().filter(owner_id=self.request.user.pk)

    @extend_schema(
        summary="Upload an attachment",
        request={"multipart/form-data": AttachmentUploadSerializer},
        responses={
            201: AttachmentSerializer,
            200: OpenApiResponse(
                AttachmentSerializer, description="The same bytes, uploaded before."
            ),
            # A body that is not multipart (or has no Content-Type) is 415.
            **error_responses(*BODY_ERRORS),
        },
    )
    def create(self, request: Request) -> Response:
        """Store an image (PNG, JPEG, GIF, WEBP) or a PDF sent as the ``file`` field.

        The type is detected from the bytes; the same bytes uploaded again
        answer the first attachment (200).
        """
        upload = request.FILES.get("file")
        if upload is None:
            raise InvalidAttachment(
                "missing_file", "send the file as the multipart file field 'file'.", field="file"
            )
        if upload.size is not None and upload.size > conf.ATTACHMENT_MAX_BYTES:
            raise _too_large(upload.size)
        attachment, created = create_attachment(
            signed_in(request),
            upload.read(),
            filename=upload.name or "",
            declared_type=upload.content_type,
        )
        return Response(
            attachment_data(attachment),
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )

    @extend_schema(
        summary="Read an attachment's metadata",
        responses={200: AttachmentSerializer, **error_responses()},
    )
    def retrieve(self, request: Request, pk: str) -> Response:
        """The caller's attachment (another user's is 404)."""
        return Response(attachment_data(self.get_object()))

    @extend_schema(
        summary="Download an attachment",
        responses={(200, "application/octet-stream"): OpenApiTypes.BINARY, **error_responses()},
    )
    @action(detail=True, methods=["get"])
    def content(self, request: Request, pk: str) -> FileResponse:
        """The bytes, with the detected type (another user's attachment is 404)."""
        return file_response(self.get_object())
