"""Provider adapters over httpx, and ``get_provider()`` to build them from settings.

See ``docs/providers.md`` for the settings of each backend.
"""

from .anthropic import AnthropicProvider, to_anthropic_request
from .backends import BACKENDS
from .base import CompletionRequest, Provider
from .echo import EchoProvider
from .errors import (
    AuthenticationError,
    InvalidRequestError,
    InvalidResponseError,
    ProviderError,
    ProviderNotConfigured,
    ProviderTimeout,
    ProviderUnavailableError,
    RateLimitError,
)
from .gemini import GeminiProvider, to_gemini_request
from .ollama import OllamaProvider, to_ollama_request
from .openai import OpenAIProvider
from .openai_responses import OpenAIResponsesProvider
from .registry import build_provider, clear_provider_cache, get_provider
from .stream_events import (
    ReasoningDelta,
    ResponseCompleted,
    StreamEvent,
    TextDelta,
    ToolCallCompleted,
)

__all__ = [
    "BACKENDS",
    "AnthropicProvider",
    "AuthenticationError",
    "CompletionRequest",
    "EchoProvider",
    "GeminiProvider",
    "InvalidRequestError",
    "InvalidResponseError",
    "OllamaProvider",
    "OpenAIProvider",
    "OpenAIResponsesProvider",
    "Provider",
    "ProviderError",
    "ProviderNotConfigured",
    "ProviderTimeout",
    "ProviderUnavailableError",
    "RateLimitError",
    "ReasoningDelta",
    "ResponseCompleted",
    "StreamEvent",
    "TextDelta",
    "ToolCallCompleted",
    "build_provider",
    "clear_provider_cache",
    "get_provider",
    "to_anthropic_request",
    "to_gemini_request",
    "to_ollama_request",
]
