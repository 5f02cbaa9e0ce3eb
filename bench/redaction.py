"""What redacting API keys costs on a 1 MB provider body.

``Provider.redact()`` (an error body, as text) and ``Provider.redact_data()``
(a decoded reply or a stream's chunks) look for every fragment of five or
more characters of the key, in any case (``providers/redaction.py``). This
times both on 1 MB of text without the key (the common case), the same text
with the key echoed 100 times altered (upper case, split, masked), and a
stream's worth of decoded chunks (1 MB of JSON, without the key and with one
chunk echoing it), against the exact
``str.replace`` the adapters used before (on the text, and in each string), for an OpenAI project key (164
characters) and an Anthropic key (108). No network, no database.
"""

from __future__ import annotations

import random
import string
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from llm_conversations.providers.redaction import KeyRedactor

MB = 1_000_000
ALPHABET = string.ascii_letters + string.digits
WORDS = "the model could not answer because the request was malformed; try again later. "


def random_key(prefix: str, length: int, rng: random.Random) -> str:
    return prefix + "".join(rng.choice(ALPHABET + "-_") for _ in range(length - len(prefix)))


def altered(key: str) -> str:
    """The key upper-cased, split by markup, and masked as OpenAI masks it."""
    return f" {key.upper()} {key[:30]}<b>{key[30:]}</b> {key[:8]}{'*' * 20}{key[-4:]} "


def exact_walk(data: Any, key: str) -> Any:
    """The redaction the adapters made before: the exact key, in every string."""
    if isinstance(data, str):
        return data.replace(key, "[redacted]") if key in data else data
    if isinstance(data, dict):
        return {exact_walk(str(k), key): exact_walk(v, key) for k, v in data.items()}
    if isinstance(data, list):
        return [exact_walk(item, key) for item in data]
    return data


def best_of(runs: int, work: Callable[[], Any]) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return min(times)


def measure(label: str, key: str, clean: str) -> None:
    redactor = KeyRedactor([key])
    echoed = clean[: MB - 100 * len(altered(key))] + altered(key) * 100
    # A stream of ~8,000 chunks of ~120 bytes of JSON each, each chunk's text its
    # own; then the same with one chunk echoing the key.
    chunks: list[Any] = [
        {"choices": [{"index": 0, "delta": {"content": f"{i} {WORDS[i % 40 :][:80]}"}}]}
        for i in range(MB // 120)
    ]
    echoing = [*chunks]
    echoing[len(chunks) // 2] = {"error": {"message": altered(key)}}
    assert key.upper() not in redactor.redact(echoed)
    print(f"{label}: {len(redactor.anchors)} anchors")
    for name, work in (
        ("1 MB text, no key", lambda: redactor.redact(clean)),
        ("1 MB text, key echoed 100 times", lambda: redactor.redact(echoed)),
        (f"{len(chunks)} chunks (1 MB JSON), no key", lambda: redactor.redact_data(chunks)),
        (f"{len(chunks)} chunks, one echo", lambda: redactor.redact_data(echoing)),
        ("before: exact str.replace, 1 MB text", lambda: clean.replace(key, "[redacted]")),
        ("before: exact key in each chunk's strings", lambda: exact_walk(chunks, key)),
    ):
        print(f"  {name:<42} {best_of(5, work) * 1000:8.1f} ms")


def main() -> None:
    rng = random.Random(7)
    clean = (WORDS * (MB // len(WORDS) + 1))[:MB]
    measure("OpenAI project key (164)", random_key("sk-proj-", 164, rng), clean)
    measure("Anthropic key (108)", random_key("sk-ant-api03-", 108, rng), clean)


if __name__ == "__main__":
    main()
