"""Attachments in the admin: a read-only list, thumbnails, and the bytes for staff.

Files are served by :meth:`AttachmentAdmin.content_view` to staff who may
view attachments, never as public media URLs; the transcript shows images as
thumbnails and other files as links through it.
"""

from __future__ import annotations

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import FileResponse, Http404, HttpRequest
from django.urls import URLPattern, path
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _

from llm_conversations.admin.read_only import ReadOnlyAdmin
from llm_conversations.admin.transcript import attachment_content_url
from llm_conversations.conversations.attachments import file_response
from llm_conversations.models import Attachment

__all__ = ["AttachmentAdmin"]


class AttachmentAdmin(ReadOnlyAdmin):
    """Uploaded attachments, read-only, with a preview."""

    list_display = ["__str__", "mime_type", "size", "owner", "created_at"]
    list_filter = ["mime_type", "created_at"]
    search_fields = ["filename", "sha256", "id"]
    list_select_related = ["owner"]
    readonly_fields = [
        "preview",
        "id",
        "owner",
        "filename",
        "mime_type",
        "size",
        "sha256",
        "width",
        "height",
        "pages",
        "created_at",
    ]
    exclude = ["file"]

    @admin.display(description=_("preview"))
    def preview(self, obj: Attachment) -> SafeString:
        """A thumbnail of an image, a link to any other file."""
        url = attachment_content_url(obj, self.admin_site.name)
        if obj.is_image:
            return format_html(
                '<a href="{}"><img class="llmconv-thumb" src="{}" alt="{}" '
                'style="max-width:240px;max-height:240px"></a>',
                url,
                url,
                obj.filename,
            )
        return format_html('<a href="{}">{}</a>', url, obj.filename or obj.pk)

    def get_urls(self) -> list[URLPattern]:
        opts = self.model._meta
        return [
            path(
                "<path:object_id>/content/",
                self.admin_site.admin_view(self.content_view),
                name=f"{opts.app_label}_{opts.model_name}_content",
            ),
            *super().get_urls(),
        ]

    def content_view(self, request: HttpRequest, object_id: str) -> FileResponse:
        """The bytes of one attachment, for staff who may view attachments."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        attachment = self.get_object(request, object_id)
        if attachment is None:
            raise Http404
        return file_response(attachment)
