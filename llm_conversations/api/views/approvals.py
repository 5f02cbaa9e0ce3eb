"""The calls waiting for a person, across the caller's conversations (all, for staff)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, viewsets
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response

from llm_conversations.api.errors import ApiError
from llm_conversations.api.serializers.conversations import ToolCallSerializer
from llm_conversations.api.views.base import ApiView, error_responses, valid_query
from llm_conversations.models import Run, RunStatus, WaitReason

__all__ = [
    "ApprovalQuerySerializer",
    "ApprovalSerializer",
    "ApprovalViewSet",
]


class ApprovalSerializer(serializers.Serializer[Any]):
    """One call waiting for approval, with where it waits and what to decide it with."""

    conversation = serializers.UUIDField()
    conversation_title = serializers.CharField(allow_blank=True)
    run = serializers.UUIDField()
    tool_call = ToolCallSerializer()
    approval_digest = serializers.CharField(
        help_text="Send it with `approve/` or `deny/`: refused if the waiting calls changed."
    )
    waiting_since = serializers.DateTimeField()


class ApprovalPagination(PageNumberPagination):
    """``?page=`` over the waiting runs, 50 a page; each run lists all its waiting calls."""

    page_size = 50


class ApprovalQuerySerializer(serializers.Serializer[Any]):
    """``?page=`` and ``?all=``, each valid when present."""

    page = serializers.IntegerField(required=False, min_value=1, help_text="1-based page.")
    all = serializers.BooleanField(
        required=False, default=False, help_text="Staff: every user's calls."
    )


class ApprovalViewSet(ApiView, viewsets.ViewSet):
    """``GET approvals/``: every call waiting for approval in the caller's conversations,
    oldest wait first; staff add ``?all=true`` for every user's."""

    # Read by the schema, which then describes the page around the results.
    pagination_class = ApprovalPagination

    def waiting_runs(self, request: Request, everyone: bool) -> QuerySet[Run]:
        """Runs paused with a call waiting for approval, the caller's (or all, for staff)."""
        runs = Run.objects.filter(status=RunStatus.REQUIRES_ACTION).select_related("conversation")
        if everyone:
            if not request.user.is_staff:
                raise ApiError(403, "permission_denied", "only staff may list every user's calls.")
            return runs.order_by("updated_at", "pk")
        return runs.filter(conversation__owner_id=request.user.pk).order_by("updated_at", "pk")

    @extend_schema(
        summary="List calls waiting for approval",
        parameters=[ApprovalQuerySerializer],
        responses={200: ApprovalSerializer(many=True), **error_responses(400, 403)},
    )
    def list(self, request: Request) -> Response:
        """The calls waiting for a person; three queries whatever their number."""
        query = valid_query(ApprovalQuerySerializer, request)
        paginator = ApprovalPagination()
        runs = self.waiting_runs(request, query.validated_data["all"])
        page = paginator.paginate_queryset(runs, request, view=self)
        items = [
            {
                "conversation": run.conversation_id,
                "conversation_title": run.conversation.title,
                "run": run.pk,
                "tool_call": pending.call.to_wire(),
                "approval_digest": run.approval_digest,
                "waiting_since": run.updated_at,
            }
            for run in page or ()
            for pending in run.waiting_calls
            if pending.reason == WaitReason.REQUIRES_APPROVAL
        ]
        return paginator.get_paginated_response(ApprovalSerializer(items, many=True).data)
