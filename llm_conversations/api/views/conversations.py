"""Conversations and their messages, searched by text; feedback on assistant messages."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

from django.db.models import QuerySet, Subquery
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
from llm_conversations.api.representations import (
    MESSAGE_COLUMNS,
    message_data,
    message_row,
    message_rows,
    represented_rows,
)
from llm_conversations.api.serializers import (
    ORDERING_FIELDS,
    ConversationDeleteQuerySerializer,
    ConversationListQuerySerializer,
    ConversationSerializer,
    ConversationStateQuerySerializer,
    FeedbackSerializer,
    HideMessageSerializer,
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
from llm_conversations.conversations.lifecycle import (
    archive_conversation,
    check_not_trashed,
    hide_message,
    in_state,
    restore_conversation,
    trash_conversation,
    unarchive_conversation,
    unhide_message,
)
from llm_conversations.conversations.search import (
    matching_messages,
    order_by_relevance,
    search_conversations,
    search_terms,
)
from llm_conversations.models import (
    Conversation,
    Message,
    TitleSource,
    message_page,
    message_position,
)

MESSAGE_ID = OpenApiParameter(
    "id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="A message id."
)

__all__ = [
    "ConversationPagination",
    "ConversationSearchFilter",
    "ConversationStateFilter",
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


class ConversationStateFilter(filters.BaseFilterBackend):
    """``?archived=`` and ``?trashed=`` of the list
    (:func:`~llm_conversations.conversations.lifecycle.in_state`); a conversation's
    own URL finds it whatever its state."""

    def filter_queryset(
        self, request: Request, queryset: QuerySet[Any], view: Any
    ) -> QuerySet[Any]:
        if getattr(view, "action", None) != "list":
            return queryset
        query = valid_query(ConversationStateQuerySerializer, request).validated_data
        trashed = query["trashed"]
        archived = query.get("archived", "all" if trashed else "false")
        return in_state(
            queryset, archived=None if archived == "all" else archived == "true", trashed=trashed
        )


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
        summary="Move a conversation to the trash, or delete it for good",
        description=(
            "Moves the conversation to the trash (restorable with `restore/` until "
            "`TRASH_RETENTION_DAYS` have passed); `?permanent=true` deletes it for good. "
            "Refused (409 `conversation_busy`) while a run is active."
        ),
        parameters=[ConversationDeleteQuerySerializer],
        responses={204: None, **error_responses(400, 409)},
    ),
)
class ConversationViewSet(ApiView, viewsets.ModelViewSet[Conversation]):
    """The caller's conversations: search by title and message text, ordering,
    page-number pagination."""

    serializer_class = ConversationSerializer
    pagination_class = ConversationPagination
    filter_backends = [ConversationStateFilter, filters.OrderingFilter, ConversationSearchFilter]
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
        check_not_trashed(serializer.instance)  # type: ignore[arg-type]
        serializer.save(**_title_source(serializer))

    def perform_destroy(self, instance: Conversation) -> None:
        # Both refuse (409 conversation_busy) while a run is active.
        if valid_query(ConversationDeleteQuerySerializer, self.request).validated_data["permanent"]:
            delete_conversation(instance)
        else:
            trash_conversation(instance)

    def _changed(self, change: Callable[[Conversation], object]) -> Response:
        """Apply ``change`` to the caller's conversation and answer it as it is now."""
        change(self.get_object())
        return Response(self.get_serializer(self.get_object()).data)

    @extend_schema(
        summary="Archive a conversation",
        request=None,
        responses={200: ConversationSerializer, **error_responses(409)},
    )
    @action(detail=True, methods=["post"])
    def archive(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Archived, it leaves the default list and works as before (409
        ``conversation_trashed`` in the trash)."""
        return self._changed(archive_conversation)

    @extend_schema(
        summary="Unarchive a conversation",
        request=None,
        responses={200: ConversationSerializer, **error_responses(409)},
    )
    @action(detail=True, methods=["post"])
    def unarchive(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Back in the default list (409 ``conversation_trashed`` in the trash)."""
        return self._changed(unarchive_conversation)

    @extend_schema(
        summary="Restore a conversation from the trash",
        request=None,
        responses={200: ConversationSerializer, **error_responses()},
    )
    @action(detail=True, methods=["post"])
    def restore(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Out of the trash and writable again; archived, it stays archived."""
        return self._changed(restore_conversation)


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
        query = valid_query(MessageListQuerySerializer, request)
        after, limit = query.validated_data.get("after"), query.validated_data["limit"]
        ascending = query.validated_data["order"] == "asc"
        search = query.validated_data.get("search", "")
        conversation = self.get_conversation()
        # One row more than the page tells whether another page follows.
        if search:
            page = message_rows(
                self._searched(search, after, ascending)[: limit + 1], *FEEDBACK_COLUMNS
            )
        else:
            reader = request.user.pk if request.user.is_authenticated else None
            fetched = message_page(
                conversation.pk,
                MESSAGE_COLUMNS,
                reader_id=reader,
                after=after,
                ascending=ascending,
                limit=limit + 1,
            )
            page = represented_rows(
                (*MESSAGE_COLUMNS, *FEEDBACK_COLUMNS), fetched, Message.objects.db
            )
        # An empty page is the end, or a cursor of another conversation (asked only then).
        if not page and after is not None and message_position(conversation.pk, after) is None:
            raise ApiError(
                400, "invalid", "after is not a message of this conversation.", field="after"
            )
        return Response(_page([message_data(row) for row in page[:limit]], len(page) > limit))

    def _searched(self, search: str, after: uuid.UUID | None, ascending: bool) -> QuerySet[Message]:
        """The messages ``search`` finds after the message ``after`` in order, with the
        caller's feedback: the list's ORM path (every other page is one prepared
        statement, ``message_page``)."""
        rows = self.get_queryset()
        if after is not None:
            position = rows.filter(pk=after).values("position")
            rows = (
                rows.filter(position__gt=Subquery(position))
                if ascending
                else rows.filter(position__lt=Subquery(position))
            )
        return with_feedback(matching_messages(rows, search), self.request.user).order_by(
            "position" if ascending else "-position"
        )

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

    @extend_schema(
        summary="Hide a message from the model",
        parameters=[MESSAGE_ID],
        request=HideMessageSerializer,
        responses={200: MessagePageSerializer, **error_responses(400, 409, 415)},
    )
    @action(detail=True, methods=["post"])
    def hide(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Hide the message, with its tool group, from what the model is sent; the
        rows stay (``hidden_at``, ``hidden_reason``) and are answered."""
        message = self.get_object()
        reason = self.validated_body(HideMessageSerializer).validated_data["reason"]
        return self._group(hide_message(self.get_conversation(), message, reason))

    @extend_schema(
        summary="Show a hidden message to the model again",
        parameters=[MESSAGE_ID],
        request=None,
        responses={200: MessagePageSerializer, **error_responses(409)},
    )
    @action(detail=True, methods=["post"])
    def unhide(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Show the message, with its tool group, to the model again."""
        message = self.get_object()
        return self._group(unhide_message(self.get_conversation(), message))

    def _group(self, rows: Sequence[Message]) -> Response:
        return Response(_page([message_data(message_row(row)) for row in rows], False))


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
