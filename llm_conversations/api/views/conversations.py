"""Conversations and their messages."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponseBase
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import filters, serializers, status, viewsets
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response

from llm_conversations.api.errors import ApiError
from llm_conversations.api.idempotency import IDEMPOTENCY_KEY, idempotent
from llm_conversations.api.inputs import message_items, rebase_field
from llm_conversations.api.representations import MESSAGE_COLUMNS, message_data, message_row
from llm_conversations.api.serializers import (
    ORDERING_FIELDS,
    ConversationListQuerySerializer,
    ConversationSerializer,
    MessageListQuerySerializer,
    MessagePageSerializer,
    MessageSerializer,
    MessagesInputSerializer,
)
from llm_conversations.api.views.base import (
    BODY_ERRORS,
    CONVERSATION_ID,
    ApiView,
    error_responses,
    owned_conversations,
    valid_query,
)
from llm_conversations.messages import InvalidMessage
from llm_conversations.models import Conversation, Message
from llm_conversations.services import append_messages, delete_conversation

__all__ = ["ConversationPagination", "ConversationViewSet", "MessageViewSet"]


class ConversationPagination(PageNumberPagination):
    """``?page=`` and ``?page_size=`` (default 20, at most 100)."""

    page_size = 20
    page_size_query_param = "page_size"
    max_page_size = 100


@extend_schema_view(
    list=extend_schema(
        summary="List conversations",
        parameters=[ConversationListQuerySerializer],
        responses={200: ConversationSerializer(many=True), **error_responses(400)},
    ),
    create=extend_schema(
        summary="Create a conversation",
        responses={201: ConversationSerializer, **error_responses(*BODY_ERRORS)},
    ),
    retrieve=extend_schema(
        summary="Get a conversation", responses={200: ConversationSerializer, **error_responses()}
    ),
    partial_update=extend_schema(
        summary="Update title or metadata",
        responses={200: ConversationSerializer, **error_responses(*BODY_ERRORS)},
    ),
    destroy=extend_schema(
        summary="Delete a conversation", responses={204: None, **error_responses(409)}
    ),
)
class ConversationViewSet(ApiView, viewsets.ModelViewSet[Conversation]):
    """The caller's conversations: search on title, ordering, page-number pagination."""

    serializer_class = ConversationSerializer
    pagination_class = ConversationPagination
    filter_backends = [filters.SearchFilter, filters.OrderingFilter]
    search_fields = ["title"]
    ordering_fields = list(ORDERING_FIELDS)
    ordering = ["-updated_at"]
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def get_queryset(self) -> Any:
        return owned_conversations(self.request)

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """A page of the caller's conversations; a bad query value is a 400."""
        valid_query(ConversationListQuerySerializer, request)
        return super().list(request, *args, **kwargs)

    def perform_create(self, serializer: serializers.BaseSerializer[Conversation]) -> None:
        # A new conversation has no active_run annotation; the field shows null.
        user = self.request.user
        serializer.save(owner=user if user.is_authenticated else None)

    def perform_destroy(self, instance: Conversation) -> None:
        # The store refuses (409 conversation_busy) while a run is active.
        delete_conversation(instance)


@extend_schema(parameters=[CONVERSATION_ID])
@extend_schema_view(
    create=extend_schema(
        summary="Append messages",
        parameters=[IDEMPOTENCY_KEY],
        request={"application/json": MessagesInputSerializer},
        responses={201: MessagePageSerializer, **error_responses(*BODY_ERRORS, 409, 422)},
    ),
)
class MessageViewSet(ApiView, viewsets.GenericViewSet[Message]):
    """A conversation's history: cursor-paged reads, appends in the OpenAI message shape."""

    serializer_class = MessageSerializer
    # The list pages with its own cursor (MessageListQuerySerializer).
    pagination_class = None

    def get_queryset(self) -> Any:
        return Message.objects.none()  # schema generation only; the views query by hand

    # The answer is one page object, not an array (MessagePageSerializer says so).
    @extend_schema(
        summary="List messages",
        # The id it had before the view became the router's "list".
        operation_id="conversations_messages_retrieve",
        parameters=[MessageListQuerySerializer],
        responses={200: MessagePageSerializer, **error_responses(400)},
    )
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """A page of messages after the ``after`` cursor, in ``order``."""
        conversation = self.get_conversation()
        query = valid_query(MessageListQuerySerializer, request)
        after, limit = query.validated_data.get("after"), query.validated_data["limit"]
        ascending = query.validated_data["order"] == "asc"
        rows = Message.objects.filter(conversation_id=conversation.pk)
        if after is not None:
            position = rows.filter(pk=after).values_list("position", flat=True).first()
            if position is None:
                raise ApiError(
                    400, "invalid", "after is not a message of this conversation.", field="after"
                )
            rows = (
                rows.filter(position__gt=position)
                if ascending
                else rows.filter(position__lt=position)
            )
        # One row more than the page tells whether another page follows.
        page = list(
            rows.order_by("position" if ascending else "-position").values(*MESSAGE_COLUMNS)[
                : limit + 1
            ]
        )
        return Response(_page([message_data(row) for row in page[:limit]], len(page) > limit))

    def create(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponseBase:
        """Append one message or a list, atomically; refused while a run is active."""
        return idempotent(request, lambda: self._append(request))

    def _append(self, request: Request) -> Response:
        conversation = self.get_conversation()
        items = message_items(request.data)
        try:
            rows = append_messages(conversation, items)
        except InvalidMessage as exc:
            if isinstance(request.data, dict):
                # One message posted on its own: its fields are named without "messages[0]".
                field = rebase_field(exc.field, "")
                raise InvalidMessage(exc.code, exc.message, field=field) from None
            raise
        data = [message_data(message_row(row)) for row in rows]
        return Response(_page(data, False), status=status.HTTP_201_CREATED)


def _page(data: list[dict[str, Any]], has_more: bool) -> dict[str, Any]:
    return {
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": has_more,
    }
