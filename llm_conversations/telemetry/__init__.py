"""OpenTelemetry spans and metrics for runs, model calls and tool calls.

Names follow the OpenTelemetry GenAI semantic conventions: a run is an
``invoke_agent`` span, each model call a ``chat {model}`` client span under
it, each tool execution an ``execute_tool {tool}`` span under the run; model
calls record the ``gen_ai.client.token.usage`` and
``gen_ai.client.operation.duration`` histograms, replies a run prices the
``llm_conversations.cost`` counter. Message text, tool arguments and results
are recorded only when ``TELEMETRY_CAPTURE_CONTENT`` is true.

``opentelemetry-api`` is optional (the ``otel`` extra): imported on first use,
and without it every function here does nothing. Spans and metrics go to the
global tracer and meter providers, which the host project sets up (the SDK,
an exporter, or ``opentelemetry-instrument``). See ``docs/telemetry.md``.

The spans and metrics of model calls are
:mod:`~llm_conversations.telemetry.model_calls`'s, those of runs and tool calls
:mod:`~llm_conversations.telemetry.runs`'s, and what they share
:mod:`~llm_conversations.telemetry.otel`'s.
"""

from llm_conversations.telemetry.model_calls import (
    ModelCall,
    model_call,
    record_cost,
    traced_stream,
)
from llm_conversations.telemetry.otel import (
    COST_METRIC,
    INSTRUMENTATION,
    PROVIDER_NAMES,
    current_context,
    enabled,
    provider_name,
)
from llm_conversations.telemetry.runs import ToolExecution, tool_execution, traced_run

__all__ = [
    "COST_METRIC",
    "INSTRUMENTATION",
    "PROVIDER_NAMES",
    "ModelCall",
    "ToolExecution",
    "current_context",
    "enabled",
    "model_call",
    "provider_name",
    "record_cost",
    "tool_execution",
    "traced_run",
    "traced_stream",
]
