"""``GET waiting-calls/``: the calls waiting for a person's decision, across the caller's
conversations (all, for staff)."""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import viewsets
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response

from llm_conversations.api.errors import ApiError
from llm_conversations.api.serializers import WaitingCallQuerySerializer, WaitingCallSerializer
from llm_conversations.api.views.base import ApiView, error_responses, valid_query
from llm_conversations.models import Run, RunStatus, WaitReason

__all__ = ["WaitingCallPagination", "WaitingCallViewSet"]


class WaitingCallPagination(PageNumberPagination):
    """``?page=`` over the waiting runs, 50 a page; each run lists all its waiting calls."""

    page_size = 50


class WaitingCallViewSet(ApiView, viewsets.ViewSet):
    """``GET waiting-calls/``: every call waiting for approval in the caller's conversations,
    oldest wait first; staff add ``?all=true`` for every user's."""

    # Read by the schema, which then describes the page around the results.
    pagination_class = WaitingCallPagination

    def waiting_runs(self, request: Request, everyone: bool) -> QuerySet[Run]:
        """Runs paused with a call waiting for approval, the caller's (or all, for staff)."""
        runs = Run.objects.filter(status=RunStatus.REQUIRES_ACTION).select_related("conversation")
        if everyone:
            if not request.user.is_staff:
                raise ApiError(403, "permission_denied", "only staff may list every user's calls.")
            return runs.order_by("updated_at", "pk")
        return runs.filter(conversation__owner_id=request.user.pk).order_by("updated_at", "pk")

    @extend_schema(
        summary="List calls waiting for a decision",
        parameters=[WaitingCallQuerySerializer],
        responses={200: WaitingCallSerializer(many=True), **error_responses(400, 403)},
    )
    def list(self, request: Request) -> Response:
        """The calls waiting for a person; three queries whatever their number."""
        query = valid_query(WaitingCallQuerySerializer, request)
        paginator = WaitingCallPagination()
        runs = self.waiting_runs(request, query.validated_data["all"])
        page = paginator.paginate_queryset(runs, request, view=self)
        items = [
            {
                "conversation": run.conversation_id,
                "conversation_title": run.conversation.title,
                "run": run.pk,
                "tool_call": waiting.call.to_wire(),
                "approval_digest": run.approval_digest,
                "waiting_since": run.updated_at,
            }
            for run in page or ()
            for waiting in run.waiting_calls
            if waiting.reason == WaitReason.REQUIRES_APPROVAL
        ]
        return paginator.get_paginated_response(WaitingCallSerializer(items, many=True).data)
