"""Forks of a conversation, and the edits and regenerations made with them.

``POST fork/`` answers the new conversation; ``POST edit/`` and ``POST
regenerate/`` start a run in a new fork and answer like ``POST runs/`` (the
run names its conversation, the fork). ``GET forks/`` lists the forks. The
rules live in :mod:`llm_conversations.runs.forks`.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import HttpResponseBase
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from llm_conversations.api.idempotency import IDEMPOTENCY_KEY, idempotent
from llm_conversations.api.serializers import (
    ConversationSerializer,
    EditSerializer,
    ForkCreateSerializer,
    RegenerateSerializer,
    RunSerializer,
)
from llm_conversations.api.serializers.conversations import PageQuerySerializer
from llm_conversations.api.views.base import (
    BODY_ERRORS,
    CONVERSATION_ID,
    error_responses,
    owned_conversations,
    valid_query,
)
from llm_conversations.api.views.conversations import ConversationPagination
from llm_conversations.api.views.run_starts import RunViews, run_responses
from llm_conversations.models import Conversation
from llm_conversations.runs import ToolLoopService
from llm_conversations.runs.forks import edit_message, fork, regenerate

__all__ = ["ForkViewSet"]


class ForkViewSet(RunViews[Conversation]):
    """Forks of one of the caller's conversations; the conversation itself never changes."""

    start_actions = frozenset({"edit", "regenerate"})
    queryset = Conversation.objects.all()
    # What OPTIONS describes for the POST actions, which answer like POST runs/.
    serializer_class = RunSerializer  # type: ignore[assignment]
    # forks/ pages like the conversation list (the schema reads it here).
    pagination_class = ConversationPagination

    def get_queryset(self) -> QuerySet[Conversation]:
        """The caller's conversations, as the conversation list shows them."""
        return owned_conversations(self.request)

    @extend_schema(
        summary="Fork a conversation",
        parameters=[CONVERSATION_ID, IDEMPOTENCY_KEY],
        request=ForkCreateSerializer,
        responses={201: ConversationSerializer, **error_responses(*BODY_ERRORS, 409, 422)},
    )
    @action(detail=False, methods=["post"], url_path="fork")
    def create_fork(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponseBase:
        """A new conversation with copies of the history through ``message_id`` (all of it
        when omitted); 400 ``inside_tool_group`` between tool calls and their results."""
        return idempotent(request, lambda: self._fork(request))

    def _fork(self, request: Request) -> Response:
        conversation = self.get_conversation()
        body = self.validated_body(ForkCreateSerializer).validated_data
        copy = fork(conversation, body.get("message_id"), title=body.get("title"))
        copy.active_run = None  # type: ignore[attr-defined]  # a new fork has no run
        return Response(ConversationSerializer(copy).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="List a conversation's forks",
        parameters=[CONVERSATION_ID, PageQuerySerializer],
        responses={200: ConversationSerializer(many=True), **error_responses(400)},
    )
    @action(detail=False, methods=["get"])
    def forks(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """The forks made from this conversation, newest first, a page at a time."""
        valid_query(PageQuerySerializer, request)
        forks = self.get_queryset().filter(forked_from=self.get_conversation())
        page = self.paginate_queryset(forks.order_by("-created_at"))
        return self.get_paginated_response(ConversationSerializer(page, many=True).data)

    @extend_schema(
        summary="Edit a user turn in a fork",
        parameters=[CONVERSATION_ID, IDEMPOTENCY_KEY],
        request=EditSerializer,
        responses=run_responses(201, 409, 422, 500, 502, queued=True),
    )
    @action(detail=False, methods=["post"])
    def edit(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponseBase:
        """Fork before the user turn ``message_id`` and answer ``message`` there instead."""
        return idempotent(request, lambda: self._run(request, EditSerializer))

    @extend_schema(
        summary="Regenerate an answer in a fork",
        parameters=[CONVERSATION_ID, IDEMPOTENCY_KEY],
        request=RegenerateSerializer,
        responses=run_responses(201, 409, 422, 500, 502, queued=True),
    )
    @action(detail=False, methods=["post"])
    def regenerate(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponseBase:
        """Fork before the user turn the answer ``message_id`` replies to and answer it anew,
        with the same or another ``provider``."""
        return idempotent(request, lambda: self._run(request, RegenerateSerializer))

    def _run(
        self, request: Request, serializer_class: type[EditSerializer | RegenerateSerializer]
    ) -> HttpResponseBase:
        conversation = self.get_conversation()
        body = self.validated_body(serializer_class)
        sent = body.validated_data
        service = ToolLoopService()
        options = {**body.start_options(), "user": request.user}
        if serializer_class is EditSerializer:
            message = sent["message"]
            run = edit_message(service, conversation, sent["message_id"], message, **options)
        else:
            run = regenerate(service, conversation, sent["message_id"], **options)
        return self._started(request, service, run, sent["stream"], sent["background"])
