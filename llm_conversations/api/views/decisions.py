"""``GET conversations/{id}/runs/{run_id}/decisions/``: a run's decision trail.

Every decision on a call that waited for approval, oldest first, as
``ToolDecision`` keeps it (``runs/decisions.py`` writes it): owner-scoped
like the run itself, three queries whatever the page holds.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import viewsets
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response

from llm_conversations.api.serializers import (
    DecisionListQuerySerializer,
    DecisionRecordSerializer,
)
from llm_conversations.api.views.base import (
    CONVERSATION_ID,
    ApiView,
    error_responses,
    parse_uuid,
    valid_query,
)
from llm_conversations.api.views.run_starts import RUN_ID
from llm_conversations.models import ToolDecision

__all__ = ["DecisionPagination", "DecisionViewSet"]


class DecisionPagination(CursorPagination):
    """Oldest decision first, by cursor; ``?limit=`` decisions a page."""

    # Ids grow as decisions are made; a cursor needs a unique, unchanging order.
    ordering = "id"
    page_size = 50
    page_size_query_param = "limit"
    max_page_size = 100


class DecisionViewSet(ApiView, viewsets.GenericViewSet[ToolDecision]):
    """The decisions on one run's calls, of one of the caller's conversations."""

    queryset = ToolDecision.objects.all()
    serializer_class = DecisionRecordSerializer
    pagination_class = DecisionPagination

    def get_queryset(self) -> QuerySet[ToolDecision]:
        """The decisions of the URL's run, which must be of the caller's conversation
        the URL names (404 otherwise, as for the run itself)."""
        conversation = self.get_conversation()
        run_id = parse_uuid(self.kwargs["run_pk"])
        if not conversation.runs.filter(pk=run_id).exists():
            raise Http404
        return super().get_queryset().filter(run_id=run_id)

    @extend_schema(
        summary="List a run's decisions",
        parameters=[CONVERSATION_ID, RUN_ID, DecisionListQuerySerializer],
        responses={200: DecisionRecordSerializer(many=True), **error_responses(400)},
    )
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Who approved or denied which call of the run, when, why, on what calls."""
        valid_query(DecisionListQuerySerializer, request)
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(self.get_serializer(page, many=True).data)
