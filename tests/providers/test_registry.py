import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from llm_conversations.checks import check_providers
from llm_conversations.providers import (
    AnthropicProvider,
    EchoProvider,
    OpenAIProvider,
    ProviderNotConfigured,
    build_provider,
    clear_provider_cache,
    get_provider,
)
from llm_conversations.providers.base import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_MAX_RETRIES,
    DEFAULT_MAX_RETRY_AFTER,
    DEFAULT_TIMEOUT,
)

SETTINGS = {
    "DEFAULT_PROVIDER": "main",
    "PROVIDERS": {
        "main": {
            "BACKEND": "openai",
            "MODEL": "gpt-4o-mini",
            "API_KEY": "sk-x",
            "BASE_URL": "http://localhost:8000/v1",
            "TIMEOUT": 12,
            "MAX_RETRIES": 5,
            "OPTIONS": {"temperature": 0.1},
        },
        "claude": {"BACKEND": "anthropic", "MODEL": "claude-sonnet-4-5", "API_KEY": "k"},
        "dev": {"BACKEND": "echo", "MODEL": "echo"},
        "custom": {"BACKEND": "llm_conversations.providers.EchoProvider", "MODEL": "x"},
        "bogus": {"BACKEND": "nope", "MODEL": "x"},
    },
}


@pytest.fixture(autouse=True)
def _fresh_cache():
    clear_provider_cache()
    yield
    clear_provider_cache()


@override_settings(LLM_CONVERSATIONS=SETTINGS)
def test_builds_from_settings_and_caches():
    provider = get_provider()
    assert isinstance(provider, OpenAIProvider)
    assert (provider.model, provider.base_url) == ("gpt-4o-mini", "http://localhost:8000/v1")
    assert (provider.timeout, provider.max_retries) == (12.0, 5)
    assert provider.options == {"temperature": 0.1}
    assert get_provider("main") is provider
    assert isinstance(get_provider("claude"), AnthropicProvider)
    assert isinstance(get_provider("dev"), EchoProvider)
    assert get_provider("custom").model == "x"


@override_settings(LLM_CONVERSATIONS=SETTINGS)
def test_unknown_name_is_a_clear_error():
    with pytest.raises(ProviderNotConfigured, match=r"'missing'.*claude, custom") as info:
        get_provider("missing")
    assert isinstance(info.value, LookupError)
    assert isinstance(info.value, ImproperlyConfigured)


@override_settings(LLM_CONVERSATIONS=SETTINGS)
def test_unknown_backend_is_improperly_configured():
    with pytest.raises(ImproperlyConfigured, match="nope"):
        get_provider("bogus")


def test_cache_is_cleared_when_settings_change():
    with override_settings(LLM_CONVERSATIONS=SETTINGS):
        first = get_provider("dev")
    with override_settings(
        LLM_CONVERSATIONS={"PROVIDERS": {"dev": {"BACKEND": "echo", "MODEL": "other"}}}
    ):
        second = get_provider("dev")
    assert second is not first
    assert second.model == "other"


def test_clearing_the_cache_closes_pooled_clients():
    with override_settings(LLM_CONVERSATIONS=SETTINGS):
        provider = get_provider()
        client = provider._client
        assert client is not None
        assert not client.is_closed
    # Leaving override_settings cleared the cache.
    assert client.is_closed


@pytest.mark.parametrize(
    ("config", "check_id"),
    [
        ("openai", "llm_conversations.E011"),
        ({"BACKEND": "nope", "MODEL": "x"}, "llm_conversations.E012"),
        ({"BACKEND": "ollama"}, "llm_conversations.E013"),
        ({"BACKEND": "anthropic", "MODEL": "claude"}, "llm_conversations.E014"),
        ({"BACKEND": "ollama", "MODEL": "m", "MODLE": "x"}, "llm_conversations.E016"),
        ({"BACKEND": "ollama", "MODEL": "m", "TIMEOUT": 0}, "llm_conversations.E017"),
        ({"BACKEND": "ollama", "MODEL": "m", "CONNECT_TIMEOUT": 0}, "llm_conversations.E017"),
        ({"BACKEND": "ollama", "MODEL": "m", "CONNECT_TIMEOUT": "5"}, "llm_conversations.E017"),
        ({"BACKEND": "ollama", "MODEL": "m", "MAX_RETRY_AFTER": -1}, "llm_conversations.E017"),
        ({"BACKEND": "ollama", "MODEL": "m", "MAX_RETRY_AFTER": True}, "llm_conversations.E017"),
        (
            {"BACKEND": "ollama", "MODEL": "m", "MAX_RETRY_AFTER": float("inf")},
            "llm_conversations.E017",
        ),
        ({"BACKEND": "ollama", "MODEL": "m", "OPTIONS": None}, "llm_conversations.E018"),
    ],
)
def test_build_provider_refuses_what_the_check_reports(config, check_id):
    settings = {"PROVIDERS": {"p": config}, "DEFAULT_PROVIDER": "p"}
    with override_settings(LLM_CONVERSATIONS=settings, DEBUG=True):
        [message] = check_providers()
        assert message.id == check_id
        with pytest.raises(ImproperlyConfigured) as info:
            get_provider("p")
    assert str(info.value) == message.msg


def test_build_provider_ignores_warnings_and_applies_provider_defaults():
    with override_settings(DEBUG=False):
        provider = build_provider({"BACKEND": "echo", "MODEL": "echo"})
    assert (provider.timeout, provider.max_retries) == (DEFAULT_TIMEOUT, DEFAULT_MAX_RETRIES)
    assert (provider.connect_timeout, provider.max_retry_after) == (
        DEFAULT_CONNECT_TIMEOUT,
        DEFAULT_MAX_RETRY_AFTER,
    )
    assert (DEFAULT_CONNECT_TIMEOUT, DEFAULT_MAX_RETRY_AFTER) == (10.0, 60.0)


def test_connect_timeout_and_max_retry_after_reach_the_provider():
    provider = build_provider(
        {
            "BACKEND": "ollama",
            "MODEL": "m",
            "TIMEOUT": 30,
            "CONNECT_TIMEOUT": 3,
            "MAX_RETRY_AFTER": 0,
        }
    )
    assert (provider.timeout, provider.connect_timeout, provider.max_retry_after) == (30, 3, 0)
    # Connecting is part of an attempt: never longer than TIMEOUT.
    short = build_provider({"BACKEND": "ollama", "MODEL": "m", "TIMEOUT": 2})
    assert short.connect_timeout == 2
