"""The caller's webhook endpoints: list, create, read, change, delete, and their deliveries."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer

from llm_conversations.api.serializers.webhooks import (
    WebhookDeliverySerializer,
    WebhookEndpointSerializer,
)
from llm_conversations.api.views.base import (
    BODY_ERRORS,
    ApiView,
    error_responses,
    parse_uuid,
    signed_in,
)
from llm_conversations.models import WebhookEndpoint

__all__ = ["DELIVERIES_SHOWN", "WebhookEndpointViewSet"]

# The newest deliveries an endpoint's deliveries/ shows.
DELIVERIES_SHOWN = 50


@extend_schema_view(
    list=extend_schema(
        summary="List your webhook endpoints",
        responses={200: WebhookEndpointSerializer(many=True), **error_responses()},
    ),
    create=extend_schema(
        summary="Add a webhook endpoint",
        responses={201: WebhookEndpointSerializer, **error_responses(*BODY_ERRORS)},
    ),
    retrieve=extend_schema(
        summary="Read a webhook endpoint",
        responses={200: WebhookEndpointSerializer, **error_responses()},
    ),
    update=extend_schema(
        summary="Replace a webhook endpoint",
        responses={200: WebhookEndpointSerializer, **error_responses(*BODY_ERRORS)},
    ),
    partial_update=extend_schema(
        summary="Change a webhook endpoint",
        responses={200: WebhookEndpointSerializer, **error_responses(*BODY_ERRORS)},
    ),
    destroy=extend_schema(
        summary="Delete a webhook endpoint", responses={204: None, **error_responses()}
    ),
)
class WebhookEndpointViewSet(ApiView, viewsets.ModelViewSet[WebhookEndpoint]):
    """Endpoints that receive the events of the caller's runs (docs/webhooks.md).

    Another user's endpoint does not exist (404); the signing secret is
    accepted and never answered.
    """

    queryset = WebhookEndpoint.objects.all()
    serializer_class = WebhookEndpointSerializer
    pagination_class = None  # an owner has a handful

    def get_queryset(self) -> QuerySet[WebhookEndpoint]:
        """The caller's endpoints, newest first."""
        return super().get_queryset().filter(owner_id=self.request.user.pk)

    def get_object(self) -> WebhookEndpoint:
        self.kwargs["pk"] = parse_uuid(self.kwargs["pk"])
        return super().get_object()

    def get_success_headers(self, data: Any) -> dict[str, str]:
        # DRF would answer the endpoint's own url field as Location; it is not this resource.
        return {}

    def perform_create(self, serializer: BaseSerializer[WebhookEndpoint]) -> None:
        serializer.save(owner=signed_in(self.request))

    @extend_schema(
        summary="An endpoint's newest deliveries",
        responses={200: WebhookDeliverySerializer(many=True), **error_responses()},
    )
    @action(detail=True, methods=["get"])
    def deliveries(self, request: Request, pk: str) -> Response:
        """The newest deliveries to this endpoint (at most ``DELIVERIES_SHOWN``), with outcomes."""
        rows = self.get_object().deliveries.order_by("-created_at")[:DELIVERIES_SHOWN]
        return Response(WebhookDeliverySerializer(rows, many=True).data)
