"""The tools a run may offer."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from llm_conversations.api.serializers import ToolSerializer
from llm_conversations.api.views.base import ApiView, error_responses
from llm_conversations.runs.policy import permitted_tools
from llm_conversations.tools import default_registry, offered_by_default

__all__ = ["ToolViewSet"]


class ToolViewSet(ApiView, viewsets.ViewSet):
    """``TOOLS`` and the MCP servers' tools a run of the caller may offer (``RUN_POLICY``),
    with argument schemas."""

    @extend_schema(
        summary="List tools",
        responses={200: ToolSerializer(many=True), **error_responses()},
    )
    def list(self, request: Request) -> Response:
        """The tools the caller may offer, in settings order: ``TOOLS``, then each MCP server's."""
        registry = default_registry()
        allowed = set(permitted_tools(request.user, registry.names()))
        defaults = set(offered_by_default(registry))
        return Response(
            [
                {
                    "name": item.name,
                    "description": item.description,
                    "parameters": item.parameters,
                    "requires_approval": item.requires_approval,
                    "client_side": item.is_client_side,
                    "offered_by_default": item.name in defaults,
                }
                for item in registry
                if item.name in allowed
            ]
        )
