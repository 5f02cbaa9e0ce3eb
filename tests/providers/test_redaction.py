"""Key fragments: every piece of five or more characters of a key, in any case,
is redacted from what a provider sends back (providers/redaction.py)."""

from __future__ import annotations

import random
import string
from typing import Any

import httpx
import pytest

from llm_conversations.core.messages import ChatMessage
from llm_conversations.providers import AuthenticationError, OpenAIProvider, ProviderError
from llm_conversations.providers.redaction import (
    FRAGMENT_CHARS,
    REDACTED,
    KeyRedactor,
    key_redactor,
)

from .conftest import Recorder

ALPHABET = string.ascii_letters + string.digits + "-_"


def random_key(rng: random.Random, length: int = 164) -> str:
    return "sk-proj-" + "".join(rng.choice(ALPHABET) for _ in range(length - 8))


KEY = random_key(random.Random(1))


def leaked(key: str, text: str) -> list[str]:
    """The five-character pieces of ``key`` in ``text``, whatever their case: any
    fragment of five or more characters holds one."""
    folded, text = key.lower(), text.lower()
    pieces = {folded[i : i + FRAGMENT_CHARS] for i in range(len(folded) - FRAGMENT_CHARS + 1)}
    return sorted(piece for piece in pieces if piece in text)


def recased(rng: random.Random, text: str) -> str:
    return "".join(c.swapcase() if rng.random() < 0.5 else c for c in text)


def test_the_altered_forms_a_provider_echoes_are_redacted() -> None:
    redactor = KeyRedactor([KEY])
    echoes = {
        "exact": KEY,
        "18 characters in another case": KEY[20:38].swapcase(),
        "upper case": KEY.upper(),
        "split by markup": f"{KEY[:40]}<b>{KEY[40:90]}</b>{KEY[90:]}",
        "masked": f"{KEY[:7]}…",
        "masked with its end": f"{KEY[:12]}{'*' * 30}{KEY[-4:]}",
        "five characters": KEY[77:82],
    }
    for what, echo in echoes.items():
        text = f"Incorrect API key provided: {echo}. See your dashboard."
        redacted = redactor.redact(text)
        assert leaked(KEY, redacted) == [], what
        assert redacted.startswith("Incorrect API key provided: "), what
        assert redacted.endswith(". See your dashboard."), what
        assert REDACTED in redacted, what


def test_every_fragment_of_five_or_more_characters_goes_and_nothing_else() -> None:
    rng = random.Random(5)
    for _ in range(300):
        key = random_key(rng, rng.randrange(20, 200))
        redactor = KeyRedactor([key])
        start = rng.randrange(len(key) - FRAGMENT_CHARS)
        fragment = key[start : rng.randrange(start + FRAGMENT_CHARS, len(key) + 1)]
        # Text made of characters no key holds, around the fragment in a random case.
        around = "".join(rng.choice(" .,;:!?()[]{}<>=+*/") for _ in range(40))
        text = around[:20] + recased(rng, fragment) + around[20:]
        assert redactor.redact(text) == around[:20] + REDACTED + around[20:]
    # Four characters are left: below the bound, as stated.
    assert KeyRedactor([KEY]).redact(f"({KEY[30:34]})") == f"({KEY[30:34]})"


def test_text_without_fragments_is_kept_as_it_is() -> None:
    redactor = KeyRedactor([KEY])
    prose = "The model could not answer: the request was malformed (İstanbul, naïve) 🙂."
    assert redactor.redact(prose) == prose
    # Offsets hold in text whose lower case is longer ("İ" lowers to two characters).
    assert redactor.redact(f"İİ {KEY.upper()} ü") == f"İİ {REDACTED} ü"


def test_fragments_of_every_configured_key_and_a_short_key_whole() -> None:
    other = random_key(random.Random(2), 108)
    redactor = key_redactor(frozenset({KEY, other, "k3y"}))
    assert key_redactor(frozenset({other, "k3y", KEY})) is redactor  # one per set of keys
    text = f"a {KEY[50:70]} b {other[9:30].upper()} c K3Y d"
    assert redactor.redact(text) == f"a {REDACTED} b {REDACTED} c {REDACTED} d"


def test_decoded_bodies_are_redacted_string_by_string_keys_included() -> None:
    rng = random.Random(3)
    redactor = KeyRedactor([KEY])
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "created": 1712345678,
        f"x{KEY[3:20]}": [KEY.upper(), None, 1.5, {"nested": f"see {KEY[100:140]}"}],
        "choices": [{"delta": {"content": recased(rng, KEY[60:66])}} for _ in range(50)],
    }
    redacted = redactor.redact_data(body)
    assert leaked(KEY, repr(redacted)) == []
    assert redacted["id"] == "chatcmpl-1"
    assert redacted["created"] == 1712345678
    assert redacted[f"x{REDACTED}"] == [REDACTED, None, 1.5, {"nested": f"see {REDACTED}"}]
    assert all(c["delta"]["content"] == REDACTED for c in redacted["choices"])
    # Each string as redact() would have it.
    for text in ("plain", KEY[2:9], f"{KEY[5:25]}-{KEY[40:60]}"):
        assert redactor.redact_data({"a": [text]}) == {"a": [redactor.redact(text)]}


@pytest.mark.parametrize("status", [401, 400])
def test_an_error_body_echoing_the_key_altered_reaches_no_error_text(status: int) -> None:
    echoed = f"Incorrect API key provided: {KEY[:7]}… or {KEY.upper()[10:28]} or {KEY[30:45]}<i>x"
    recorder = Recorder(httpx.Response(status, json={"error": {"message": echoed}}))
    provider = OpenAIProvider(
        model="m",
        api_key=KEY,
        max_retries=0,
        http_client=httpx.Client(transport=httpx.MockTransport(recorder)),
    )
    with pytest.raises(ProviderError) as info:
        provider.complete([ChatMessage.user("hi")])
    error = info.value
    assert isinstance(error, AuthenticationError) == (status == 401)
    for text in (str(error), repr(error), getattr(error, "provider_message", "")):
        assert leaked(KEY, text) == [], text
