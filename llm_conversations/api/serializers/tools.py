"""The tools a run may offer, as ``GET tools/`` lists them."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

__all__ = ["ToolSerializer"]


class ToolSerializer(serializers.Serializer[Any]):
    """A tool a run may offer."""

    name = serializers.CharField()
    description = serializers.CharField(allow_blank=True)
    parameters = serializers.DictField(help_text="JSON Schema of the arguments.")
    requires_approval = serializers.BooleanField()
    client_side = serializers.BooleanField(help_text="Run by the frontend: submit its output.")
    offered_by_default = serializers.BooleanField(
        help_text="Offered by a run that names no tools (DEFAULT_TOOLS, OFFER_BY_DEFAULT)."
    )
