"""The providers a caller may run with, as ``GET providers/`` lists them."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from llm_conversations.core.parameters import REASONING_EFFORTS, SAMPLING, ParameterSupport

__all__ = ["ProviderSerializer", "provider_parameters"]


class ProviderParametersSerializer(serializers.Serializer[Any]):
    """The run parameters the provider's adapter honours; any other value is refused."""

    sampling = serializers.ListField(
        child=serializers.ChoiceField(choices=SAMPLING),
        help_text="Which of temperature, top_p, max_output_tokens, stop and seed it takes.",
    )
    max_temperature = serializers.FloatField()
    max_stop_sequences = serializers.IntegerField(
        allow_null=True, help_text="`null`: no limit of its own."
    )
    reasoning_efforts = serializers.ListField(
        child=serializers.CharField(),
        help_text="The values of `reasoning_effort` it takes, among those of `POST runs/`.",
    )
    tool_choices = serializers.ListField(
        child=serializers.ChoiceField(["auto", "none", "required", "tool"]),
        help_text='`tool`: one named tool (`{"name": ...}`).',
    )
    parallel_tool_calls = serializers.ListField(child=serializers.BooleanField())
    response_format = serializers.BooleanField()


class ProviderSerializer(serializers.Serializer[Any]):
    """A ``PROVIDERS`` entry the caller may run with; never its key, URL or headers."""

    name = serializers.CharField(help_text="What `provider` of `POST runs/` takes.")
    backend = serializers.CharField(help_text="The wire protocol: openai, anthropic, ...")
    default = serializers.BooleanField(help_text="Used when a run names no provider.")
    model = serializers.CharField(help_text="Used when a run names no model.")
    models = serializers.ListField(
        child=serializers.CharField(), help_text="The models the caller may ask for."
    )
    parameters = ProviderParametersSerializer()


def provider_parameters(support: ParameterSupport) -> dict[str, Any]:
    """What :class:`ParameterSupport` declares, in a stable order (JSON)."""
    return {
        "sampling": [name for name in SAMPLING if name in support.sampling],
        "max_temperature": support.max_temperature,
        "max_stop_sequences": support.max_stop_sequences,
        "reasoning_efforts": [e for e in REASONING_EFFORTS if e in support.reasoning_efforts],
        "tool_choices": [
            c for c in ("auto", "none", "required", "tool") if c in support.tool_choices
        ],
        "parallel_tool_calls": sorted(support.parallel_tool_calls),
        "response_format": support.response_format,
    }
