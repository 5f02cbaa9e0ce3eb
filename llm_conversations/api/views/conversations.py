"""Conversations and their messages, searched by text; feedback on assistant messages."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import HttpResponseBase
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import filters, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response

from llm_conversations.api.errors import ApiError
from llm_conversations.api.idempotency import IDEMPOTENCY_KEY, idempotent
from llm_conversations.api.representations import MESSAGE_COLUMNS, message_data, message_row
from llm_conversations.api.serializers import (
    ORDERING_FIELDS,
    ConversationListQuerySerializer,
    ConversationSerializer,
    FeedbackSerializer,
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
    signed_in,
    valid_query,
)
from llm_conversations.conversations import append_messages, delete_conversation
from llm_conversations.conversations.feedback import (
    FEEDBACK_COLUMNS,
    delete_feedback,
    rate_message,
    with_feedback,
)
from llm_conversations.conversations.search import (
    matching_messages,
    order_by_relevance,
    search_conversations,
    search_terms,
)
from llm_conversations.models import Conversation, Message, TitleSource

MESSAGE_ID = OpenApiParameter(
    "id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="A message id."
)

__all__ = [
    "ConversationPagination",
    "ConversationSearchFilter",
    "ConversationViewSet",
    "MessageViewSet",
]


class ConversationPagination(PageNumberPagination):
    """``?page=`` and ``?page_size=`` (default 20, at most 100)."""

    page_size = 20
    page_size_query_param = "page_size"
    max_page_size = 100


class ConversationSearchFilter(filters.BaseFilterBackend):
    """``?search=``: the caller's conversations by title or message text
    (:mod:`llm_conversations.conversations.search`); on PostgreSQL the best matches
    come first unless ``ordering`` is given, so it runs after ``OrderingFilter``."""

    def filter_queryset(
        self, request: Request, queryset: QuerySet[Any], view: Any
    ) -> QuerySet[Any]:
        text = request.query_params.get("search", "")
        if not search_terms(text):
            return queryset
        found = search_conversations(queryset, text)
        return found if "ordering" in request.query_params else order_by_relevance(found, text)


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
    """The caller's conversations: search by title and message text, ordering,
    page-number pagination."""

    serializer_class = ConversationSerializer
    pagination_class = ConversationPagination
    filter_backends = [filters.OrderingFilter, ConversationSearchFilter]
    ordering_fields = list(ORDERING_FIELDS)
    ordering = ["-updated_at"]
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def get_queryset(self) -> QuerySet[Conversation]:
        return owned_conversations(self.request)

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """A page of the caller's conversations; a bad query value is a 400."""
        valid_query(ConversationListQuerySerializer, request)
        return super().list(request, *args, **kwargs)

    def perform_create(self, serializer: serializers.BaseSerializer[Conversation]) -> None:
        # A new conversation has no active_run annotation; the field shows null.
        user = self.request.user
        serializer.save(owner=user if user.is_authenticated else None, **_title_source(serializer))

    def perform_update(self, serializer: serializers.BaseSerializer[Conversation]) -> None:
        serializer.save(**_title_source(serializer))

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
    """A conversation's history: cursor-paged reads (filtered by text if asked),
    appends in the OpenAI message shape, the caller's feedback on answers."""

    queryset = Message.objects.all()
    serializer_class = MessageSerializer
    # The list pages with its own cursor (MessageListQuerySerializer).
    pagination_class = None

    def get_queryset(self) -> QuerySet[Message]:
        """The messages of the caller's conversation the URL names (404 for another's)."""
        return super().get_queryset().filter(conversation=self.get_conversation())

    # The answer is one page object, not an array (MessagePageSerializer says so).
    @extend_schema(
        summary="List messages",
        # The id it had before the view became the router's "list".
        operation_id="conversations_messages_retrieve",
        parameters=[MessageListQuerySerializer],
        responses={200: MessagePageSerializer, **error_responses(400)},
    )
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """A page of messages after the ``after`` cursor, in ``order``, with the
        caller's feedback; only those ``search`` finds, if given."""
        rows = self.get_queryset()
        query = valid_query(MessageListQuerySerializer, request)
        after, limit = query.validated_data.get("after"), query.validated_data["limit"]
        ascending = query.validated_data["order"] == "asc"
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
        rows = with_feedback(
            matching_messages(rows, query.validated_data.get("search", "")), request.user
        )
        # One row more than the page tells whether another page follows.
        page = list(
            rows.order_by("position" if ascending else "-position").values(
                *MESSAGE_COLUMNS, *FEEDBACK_COLUMNS
            )[: limit + 1]
        )
        return Response(_page([message_data(row) for row in page[:limit]], len(page) > limit))

    def create(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponseBase:
        """Append one message or a list, atomically; refused while a run is active."""
        return idempotent(request, lambda: self._append(request))

    def _append(self, request: Request) -> Response:
        conversation = self.get_conversation()
        body = self.validated_body(MessagesInputSerializer)
        rows = append_messages(conversation, body.validated_data)
        data = [message_data(message_row(row)) for row in rows]
        return Response(_page(data, False), status=status.HTTP_201_CREATED)

    @extend_schema(
        methods=["PUT"],
        summary="Rate an assistant message",
        parameters=[MESSAGE_ID],
        request=FeedbackSerializer,
        responses={200: FeedbackSerializer, **error_responses(400, 415)},
    )
    @extend_schema(
        methods=["DELETE"],
        summary="Remove the rating of a message",
        parameters=[MESSAGE_ID],
        request=None,
        responses={204: None, **error_responses()},
    )
    @action(detail=True, methods=["put", "delete"])
    def feedback(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """PUT: the caller's rating of an assistant message, stored or changed (400
        ``not_an_assistant_message`` for another role). DELETE: removed, if any."""
        message = self.get_object()
        if request.method == "DELETE":
            delete_feedback(message, signed_in(request))
            return Response(status=status.HTTP_204_NO_CONTENT)
        serializer = self.validated_body(FeedbackSerializer)
        feedback = rate_message(
            message,
            signed_in(request),
            serializer.validated_data["rating"],
            serializer.validated_data["comment"],
        )
        return Response(FeedbackSerializer(feedback).data)


def _title_source(serializer: serializers.BaseSerializer[Conversation]) -> dict[str, Any]:
    """A title the client sends is the user's: automatic titles never replace it."""
    sent = "title" in getattr(serializer, "validated_data", {})
    return {"title_source": TitleSource.USER} if sent else {}


def _page(data: list[dict[str, Any]], has_more: bool) -> dict[str, Any]:
    return {
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": has_more,
    }
