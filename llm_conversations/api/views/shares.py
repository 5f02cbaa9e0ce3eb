"""Share links: the owner's side under a conversation, and the reader's side by token.

``conversations/{id}/shares/`` lists, makes, reads and revokes the caller's
links to that conversation (another user's conversation or link is a 404).
``shared/{token}/`` shows the snapshot to anyone holding the token (only to
signed-in users with ``SHARE_LINKS_REQUIRE_LOGIN``), ``shared/{token}/attachments/
{id}/content/`` the bytes of an attachment the snapshot shows, and ``POST
shared/{token}/fork/`` continues it as a conversation of the signed-in caller.
An unknown, revoked or expired token, or a link of a trashed conversation, is
404 ``share_not_found``; every answer by token is marked for no cache to keep
(``Cache-Control: private, no-store``...), so a link revoked, a conversation
trashed or a turn hidden is never served from one. The rules live in
:mod:`llm_conversations.conversations.shares`.

Neither side takes ``Idempotency-Key``: a kept answer would store the token
(in the new link's answer, or in the path) that the database must never hold.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import FileResponse
from django.urls import NoReverseMatch, reverse
from django.utils.cache import add_never_cache_headers
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import AllowAny, BasePermission, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import BaseThrottle

from llm_conversations.api.representations import message_rows, shared_message_data
from llm_conversations.api.serializers import ConversationSerializer
from llm_conversations.api.serializers.shares import (
    NewShareLinkSerializer,
    ShareCreateSerializer,
    SharedConversationSerializer,
    ShareLinkSerializer,
)
from llm_conversations.api.throttling import ShareReadThrottle
from llm_conversations.api.views.base import (
    BODY_ERRORS,
    CONVERSATION_ID,
    ApiView,
    error_responses,
    parse_uuid,
    signed_in,
)
from llm_conversations.conf import conf
from llm_conversations.conversations.attachments import file_response
from llm_conversations.conversations.shares import (
    continue_as_fork,
    create_share,
    resolve_share,
    revoke_share,
    snapshot_attachment,
    snapshot_messages,
)
from llm_conversations.models import ShareLink

__all__ = ["ShareLinkViewSet", "SharedViewSet"]

TOKEN = OpenApiParameter(
    "token", OpenApiTypes.STR, OpenApiParameter.PATH, description="A share link's token."
)
SHARE_NOT_FOUND = "`share_not_found`: no usable link has this token (unknown, revoked, expired)."


def _page_of(token: str) -> str | None:
    """The path of a link's page, ``None`` when the project mounts no page
    (``llm_conversations.pages.urls``)."""
    try:
        return reverse("llm_conversations_pages:shared", args=[token])
    except NoReverseMatch:
        return None


class ShareLinkViewSet(
    ApiView,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[ShareLink],
):
    """The caller's links to one of their conversations (docs/sharing.md)."""

    queryset = ShareLink.objects.all()
    serializer_class = ShareLinkSerializer
    pagination_class = None  # a conversation has a handful

    def get_queryset(self) -> QuerySet[ShareLink]:
        """The links of the caller's conversation the URL names, newest first, with how
        many messages each shows now (404 for another user's conversation)."""
        return (
            ShareLink.objects.with_shown_count()
            .select_related("conversation")
            .filter(conversation=self.get_conversation())
        )

    def get_object(self) -> ShareLink:
        self.kwargs["pk"] = parse_uuid(self.kwargs["pk"])
        return super().get_object()

    @extend_schema(
        summary="List a conversation's share links",
        parameters=[CONVERSATION_ID],
        responses={200: ShareLinkSerializer(many=True), **error_responses()},
    )
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Every link made to this conversation, revoked and expired ones included."""
        return super().list(request, *args, **kwargs)

    @extend_schema(
        summary="Read a share link",
        parameters=[CONVERSATION_ID],
        responses={200: ShareLinkSerializer, **error_responses()},
    )
    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """One link (its token is never shown again)."""
        return super().retrieve(request, *args, **kwargs)

    @extend_schema(
        summary="Share a conversation",
        parameters=[CONVERSATION_ID],
        request=ShareCreateSerializer,
        responses={201: NewShareLinkSerializer, **error_responses(*BODY_ERRORS, 409)},
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """A link to the history through ``message_id`` (all of it when omitted), with its
        token, shown this once, and where it is read: ``url``, its page (null when the
        project mounts no page), and ``api_url``. 400 ``inside_tool_group`` between tool
        calls and their results, 409 ``conversation_trashed`` in the trash."""
        conversation = self.get_conversation()
        body = self.validated_body(ShareCreateSerializer).validated_data
        made = create_share(
            conversation, message_id=body.get("message_id"), expires_at=body.get("expires_at")
        )
        data = ShareLinkSerializer(made.link).data
        api_path = reverse("llm_conversations:shared-detail", kwargs={"token": made.token})
        page_path = _page_of(made.token)
        data.update(
            token=made.token,
            url=None if page_path is None else request.build_absolute_uri(page_path),
            api_url=request.build_absolute_uri(api_path),
        )
        return Response(data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Revoke a share link",
        parameters=[CONVERSATION_ID],
        request=None,
        responses={200: ShareLinkSerializer, **error_responses()},
    )
    @action(detail=True, methods=["post"])
    def revoke(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Stop the link at once; revoking a revoked link changes nothing."""
        return Response(ShareLinkSerializer(revoke_share(self.get_object())).data)


class SharedViewSet(ApiView, viewsets.ViewSet):
    """A shared snapshot, read by its token: nothing of the conversation beyond it."""

    lookup_field = "token"
    # Tokens are URL-safe base64; any segment is looked up (and not found).
    lookup_value_regex = "[^/]+"

    def get_permissions(self) -> list[BasePermission]:
        """Anyone may read unless ``SHARE_LINKS_REQUIRE_LOGIN``; only a signed-in
        caller may fork."""
        if self.action == "fork" or conf.SHARE_LINKS_REQUIRE_LOGIN:
            return [IsAuthenticated()]
        return [AllowAny()]

    def get_throttles(self) -> list[BaseThrottle]:
        """The project's throttles, and ``SHARE_RATE``."""
        return [*super().get_throttles(), ShareReadThrottle()]

    def finalize_response(
        self, request: Request, response: Response, *args: Any, **kwargs: Any
    ) -> Response:
        """Every answer, errors included, for no cache to keep: what a link shows
        changes the moment it is revoked, its conversation trashed or a turn hidden."""
        final = super().finalize_response(request, response, *args, **kwargs)
        add_never_cache_headers(final)
        return final

    @extend_schema(
        summary="Read a shared conversation",
        parameters=[TOKEN],
        responses={200: SharedConversationSerializer, **error_responses(429)},
        description=SHARE_NOT_FOUND,
    )
    def retrieve(self, request: Request, token: str) -> Response:
        """The title and the snapshot's messages, oldest first, numbered from 0 (two
        queries at any length)."""
        share = resolve_share(token)
        rows = message_rows(snapshot_messages(share))
        return Response(
            {
                "title": share.conversation.title,
                "shared_at": share.created_at,
                "expires_at": share.expires_at,
                "messages": [
                    shared_message_data(row, position) for position, row in enumerate(rows)
                ],
            }
        )

    @extend_schema(
        summary="Download an attachment of a shared conversation",
        parameters=[
            TOKEN,
            OpenApiParameter(
                "attachment_id",
                OpenApiTypes.UUID,
                OpenApiParameter.PATH,
                description="An attachment a message of the snapshot shows.",
            ),
        ],
        responses={
            (200, "application/octet-stream"): OpenApiTypes.BINARY,
            **error_responses(429),
        },
    )
    @action(
        detail=True,
        methods=["get"],
        url_path="attachments/(?P<attachment_id>[^/]+)/content",
        url_name="attachment-content",
    )
    def attachment_content(self, request: Request, token: str, attachment_id: str) -> FileResponse:
        """The bytes of an attachment the snapshot shows; any other is 404 ``not_found``."""
        return file_response(snapshot_attachment(resolve_share(token), attachment_id))

    @extend_schema(
        summary="Continue a shared conversation as a fork",
        parameters=[TOKEN],
        request=None,
        responses={201: ConversationSerializer, **error_responses(400, 409, 429)},
    )
    @action(detail=True, methods=["post"])
    def fork(self, request: Request, token: str) -> Response:
        """A fork of the snapshot for the caller: a new conversation of theirs holding
        copies of its turns, to go on with; the shared conversation never changes."""
        viewer = signed_in(request)
        fork = continue_as_fork(resolve_share(token), viewer)
        fork.active_run = None  # type: ignore[attr-defined]  # a new fork has no run
        return Response(ConversationSerializer(fork).data, status=status.HTTP_201_CREATED)
