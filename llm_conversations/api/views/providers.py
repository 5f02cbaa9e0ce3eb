"""The providers a run of the caller may use."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from llm_conversations.api.serializers.providers import ProviderSerializer, provider_parameters
from llm_conversations.api.views.base import ApiView, error_responses
from llm_conversations.runs.policy import permitted_providers

__all__ = ["ProviderViewSet"]


class ProviderViewSet(ApiView, viewsets.ViewSet):
    """``PROVIDERS`` as the run policy lets the caller use them."""

    @extend_schema(
        summary="List providers",
        responses={200: ProviderSerializer(many=True), **error_responses()},
    )
    def list(self, request: Request) -> Response:
        """The providers, in settings order, with the models the caller may ask for and the
        run parameters each honours."""
        return Response(
            [
                {
                    "name": item.name,
                    "backend": item.backend,
                    "default": item.default,
                    "model": item.model,
                    "models": list(item.models),
                    "parameters": provider_parameters(item.support),
                }
                for item in permitted_providers(request.user)
            ]
        )
