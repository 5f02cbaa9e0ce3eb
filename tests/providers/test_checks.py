from django.test import override_settings

from llm_conversations.providers.checks import check_providers


def ids(settings: dict, debug: bool = True) -> list[str]:
    with override_settings(LLM_CONVERSATIONS=settings, DEBUG=debug):
        return [m.id for m in check_providers()]


def entry(**values) -> dict:
    return {"PROVIDERS": {"p": values}, "DEFAULT_PROVIDER": "p"}


def test_valid_settings_pass():
    assert ids(entry(BACKEND="anthropic", MODEL="claude", API_KEY="k", OPTIONS={})) == []


def test_e010_providers_not_a_dict():
    assert ids({"PROVIDERS": ["openai"]}) == ["llm_conversations.E010"]


def test_e011_entry_not_a_dict():
    assert ids({"PROVIDERS": {"p": "openai"}, "DEFAULT_PROVIDER": "p"}) == [
        "llm_conversations.E011"
    ]


def test_e012_unknown_backend():
    assert ids(entry(BACKEND="mistral", MODEL="m")) == ["llm_conversations.E012"]
    assert ids(entry(BACKEND="no.such.Module", MODEL="m")) == ["llm_conversations.E012"]


def test_e013_missing_model():
    assert ids(entry(BACKEND="ollama")) == ["llm_conversations.E013"]


def test_e014_missing_key_for_hosted_backend():
    assert ids(entry(BACKEND="gemini", MODEL="gemini-2.5-flash")) == ["llm_conversations.E014"]
    # An OpenAI-compatible server at its own URL may need no key.
    assert ids(entry(BACKEND="openai", MODEL="m", BASE_URL="http://localhost:1234/v1")) == []


def test_e015_default_provider_not_configured():
    settings = {"PROVIDERS": {"p": {"BACKEND": "ollama", "MODEL": "m"}}, "DEFAULT_PROVIDER": "q"}
    assert ids(settings) == ["llm_conversations.E015"]


def test_e016_unknown_entry_key():
    assert ids(entry(BACKEND="ollama", MODEL="m", MODLE="x")) == ["llm_conversations.E016"]


def test_e017_bad_timeout_or_retries():
    assert ids(entry(BACKEND="ollama", MODEL="m", TIMEOUT=0)) == ["llm_conversations.E017"]
    assert ids(entry(BACKEND="ollama", MODEL="m", MAX_RETRIES=-1)) == ["llm_conversations.E017"]


def test_e018_options_not_a_dict():
    assert ids(entry(BACKEND="ollama", MODEL="m", OPTIONS=[1])) == ["llm_conversations.E018"]


def test_w010_echo_without_debug():
    assert ids(entry(BACKEND="echo", MODEL="echo"), debug=False) == ["llm_conversations.W010"]
    assert ids(entry(BACKEND="echo", MODEL="echo"), debug=True) == []
