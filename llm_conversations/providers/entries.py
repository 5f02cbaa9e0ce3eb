"""The rules of the ``PROVIDERS`` setting's entries, as problems with check ids.

:func:`provider_entry_problems` holds the rules of one entry and
:func:`fallback_problems` those of the fallbacks between entries;
``build_provider()`` refuses an entry with the first error and the system
check (``llm_conversations.checks``) reports all of them, so both say the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from llm_conversations.core.fitting import ContextStrategy
from llm_conversations.core.model_info import DEFAULT_MODEL_INFO, model_info_problems
from llm_conversations.core.settings_rules import (
    EntryProblem,
    is_finite_non_negative_number,
    is_finite_positive_number,
    is_non_negative_integer,
    is_positive_integer,
    unknown_key_problems,
)

from .backends import HOSTED_BACKENDS, backend_class
from .circuit_breaker import BreakerSettings

__all__ = [
    "BREAKER_KEYS",
    "ENTRY_KEYS",
    "breaker_settings",
    "fallback_problems",
    "fallbacks_of",
    "provider_entry_problems",
]

ENTRY_KEYS = frozenset(
    {
        "BACKEND",
        "MODEL",
        "API_KEY",
        "BASE_URL",
        "TIMEOUT",
        "CONNECT_TIMEOUT",
        "MAX_RETRIES",
        "MAX_RETRY_AFTER",
        "OPTIONS",
        "MODELS",
        "MODEL_INFO",
        "CONTEXT_STRATEGY",
        "FALLBACKS",
        "CIRCUIT_BREAKER",
        "STREAM",
    }
)
BREAKER_KEYS = frozenset({"FAILURES", "RESET_AFTER"})


def _context_problems(entry: Mapping[str, Any], where: str) -> list[EntryProblem]:
    """E041 an unknown ``CONTEXT_STRATEGY``; W041 fitting on for a model without a
    known context window (its calls are then sent whole)."""
    strategy = entry.get("CONTEXT_STRATEGY")
    if strategy is None:
        return []
    choices = [s.value for s in ContextStrategy]
    if strategy not in choices:
        return [
            EntryProblem(
                "llm_conversations.E041",
                f"{where}['CONTEXT_STRATEGY'] must be one of {', '.join(choices)} (or None); "
                f"got {strategy!r}.",
            )
        ]
    configured = entry.get("MODEL_INFO")
    known = configured if isinstance(configured, Mapping) else {}
    models = [entry.get("MODEL"), *(entry.get("MODELS") or ())]
    blind = [
        m
        for m in models
        if isinstance(m, str)
        and not (known.get(m) or DEFAULT_MODEL_INFO.get(m) or {}).get("context_window")
    ]
    if not blind:
        return []
    return [
        EntryProblem(
            "llm_conversations.W041",
            f"{where} fits calls to the context window, but no context window is known "
            f"for {', '.join(map(repr, blind))}: their calls are sent whole.",
            hint="Set 'context_window' in the entry's MODEL_INFO.",
        )
    ]


def provider_entry_problems(entry: object, name: str | None = None) -> list[EntryProblem]:
    """Every problem of one ``PROVIDERS`` entry, in a stable order.

    ``name`` is the entry's key in ``PROVIDERS``, used in the messages. Ids:
    E011 not a dict, E012 unusable BACKEND, E013 no MODEL, E014 no API_KEY for
    a hosted backend, E016 unknown key, E017 bad TIMEOUT, CONNECT_TIMEOUT,
    MAX_RETRIES or MAX_RETRY_AFTER, E018 OPTIONS not a dict, E048 STREAM not a
    boolean, E019 MODELS not a list of model names, E040 an invalid
    MODEL_INFO, E041 / W041 the context strategy, E043 FALLBACKS not a list
    of entry names, E045 an entry naming itself a fallback, E047 an invalid
    CIRCUIT_BREAKER, W010 the echo backend while DEBUG is off. Fallbacks
    naming other entries are checked by :func:`fallback_problems`.
    """
    where = "A provider entry" if name is None else f"LLM_CONVERSATIONS['PROVIDERS'][{name!r}]"
    if not isinstance(entry, Mapping):
        return [EntryProblem("llm_conversations.E011", f"{where} must be a dict.")]
    return [
        *_backend_problems(entry, where),
        *unknown_key_problems(entry, ENTRY_KEYS, where, "llm_conversations.E016"),
        *_sending_problems(entry, where),
        *_call_problems(entry, where),
        *_model_info_entry_problems(entry, where),
        *_context_problems(entry, where),
        *_fallback_entry_problems(entry, name, where),
        *_echo_problems(entry, where),
    ]


def _backend_problems(entry: Mapping[str, Any], where: str) -> list[EntryProblem]:
    """E012 an unusable BACKEND, E013 no MODEL, E014 no API_KEY for a hosted backend."""
    problems: list[EntryProblem] = []
    backend = entry.get("BACKEND")
    try:
        backend_class(backend)
    except ImproperlyConfigured as exc:
        problems.append(EntryProblem("llm_conversations.E012", f"{where}: {exc}"))
    model = entry.get("MODEL")
    if not isinstance(model, str) or not model:
        problems.append(
            EntryProblem(
                "llm_conversations.E013",
                f"{where} needs a non-empty MODEL.",
                hint="e.g. 'gpt-4o-mini'.",
            )
        )
    # An OpenAI-compatible server at a custom BASE_URL may need no key.
    hosted = isinstance(backend, str) and backend in HOSTED_BACKENDS
    needs_key = hosted and not (backend in ("openai", "openai_responses") and entry.get("BASE_URL"))
    if needs_key and not entry.get("API_KEY"):
        problems.append(
            EntryProblem(
                "llm_conversations.E014",
                f"{where} uses the hosted {backend!r} backend but has no API_KEY.",
                hint="Read it from the environment, e.g. os.environ['OPENAI_API_KEY'].",
            )
        )
    return problems


# How a provider sends its requests: each key, the kind of value it takes, and
# that kind in words (E017).
_SENDING_KEYS = (
    ("TIMEOUT", is_finite_positive_number, "a positive number"),
    ("CONNECT_TIMEOUT", is_finite_positive_number, "a positive number"),
    ("MAX_RETRIES", is_non_negative_integer, "a non-negative integer"),
    ("MAX_RETRY_AFTER", is_finite_non_negative_number, "a non-negative number of seconds"),
)


def _sending_problems(entry: Mapping[str, Any], where: str) -> list[EntryProblem]:
    """E017 a timeout, a retry count or the longest ``Retry-After`` of the wrong kind."""
    # An absent key takes the Provider default, which is valid.
    return [
        EntryProblem(
            "llm_conversations.E017",
            f"{where}[{key!r}] must be {expected}; got {entry[key]!r}.",
        )
        for key, valid, expected in _SENDING_KEYS
        if key in entry and not valid(entry[key])
    ]


def _call_problems(entry: Mapping[str, Any], where: str) -> list[EntryProblem]:
    """E018 OPTIONS not a dict, E048 STREAM not a boolean, E019 MODELS not model names."""
    problems: list[EntryProblem] = []
    if not isinstance(entry.get("OPTIONS", {}), Mapping):
        problems.append(
            EntryProblem("llm_conversations.E018", f"{where}['OPTIONS'] must be a dict.")
        )
    if not isinstance(entry.get("STREAM", True), bool):
        problems.append(
            EntryProblem(
                "llm_conversations.E048",
                f"{where}['STREAM'] must be True or False; got {entry['STREAM']!r}.",
                hint="False calls this entry without streaming (for a server that cannot stream).",
            )
        )
    models = entry.get("MODELS", [])
    if not isinstance(models, list | tuple) or not all(
        isinstance(item, str) and item for item in models
    ):
        problems.append(
            EntryProblem(
                "llm_conversations.E019",
                f"{where}['MODELS'] must be a list of model names (non-empty strings).",
                hint="The models a run may ask for besides MODEL, e.g. ['gpt-4o', 'gpt-4o-mini'].",
            )
        )
    return problems


def _model_info_entry_problems(entry: Mapping[str, Any], where: str) -> list[EntryProblem]:
    """E040, one per problem of the entry's ``MODEL_INFO`` (the rules are core's)."""
    if "MODEL_INFO" not in entry:
        return []
    return [
        EntryProblem(
            "llm_conversations.E040",
            message,
            hint="Prices are US dollars per million tokens, e.g. {'input': '2.50', "
            "'cached_input': '1.25', 'output': '10.00'}.",
        )
        for message in model_info_problems(entry["MODEL_INFO"], where)
    ]


def _echo_problems(entry: Mapping[str, Any], where: str) -> list[EntryProblem]:
    """W010 the echo backend while ``DEBUG`` is off."""
    if entry.get("BACKEND") != "echo" or settings.DEBUG:
        return []
    return [
        EntryProblem(
            "llm_conversations.W010",
            f"{where} uses the echo backend while DEBUG is off.",
            hint="The echo backend repeats input; configure a real provider in production.",
        )
    ]


def _fallback_entry_problems(
    entry: Mapping[str, Any], name: str | None, where: str
) -> list[EntryProblem]:
    """E043 FALLBACKS not a list of names, E045 naming itself, E047 a bad CIRCUIT_BREAKER."""
    problems: list[EntryProblem] = []
    fallbacks = fallbacks_of(entry)
    if not fallbacks and entry.get("FALLBACKS", []) not in ([], ()):
        problems.append(
            EntryProblem(
                "llm_conversations.E043",
                f"{where}['FALLBACKS'] must be a list of names of other PROVIDERS entries.",
                hint="e.g. ['anthropic', 'local'], tried in that order.",
            )
        )
    elif name is not None and name in fallbacks:
        problems.append(
            EntryProblem("llm_conversations.E045", f"{where}['FALLBACKS'] names the entry itself.")
        )
    breaker = entry.get("CIRCUIT_BREAKER")
    if breaker is not None and breaker_settings(breaker) is None:
        problems.append(
            EntryProblem(
                "llm_conversations.E047",
                f"{where}['CIRCUIT_BREAKER'] must be None or a dict with FAILURES (a "
                f"positive integer) and RESET_AFTER (a positive number of seconds); "
                f"got {breaker!r}.",
                hint="e.g. {'FAILURES': 5, 'RESET_AFTER': 30}.",
            )
        )
    return problems


def breaker_settings(value: object) -> BreakerSettings | None:
    """The typed ``CIRCUIT_BREAKER`` setting, or ``None`` when it is not valid."""
    if not isinstance(value, Mapping) or set(value) != BREAKER_KEYS:
        return None
    failures, reset_after = value["FAILURES"], value["RESET_AFTER"]
    if not (is_positive_integer(failures) and is_finite_positive_number(reset_after)):
        return None
    return BreakerSettings(failures=failures, reset_after=float(reset_after))


def fallbacks_of(entry: object) -> list[str]:
    """An entry's ``FALLBACKS`` names; none when it has none or they are malformed (E043)."""
    fallbacks = entry.get("FALLBACKS", []) if isinstance(entry, Mapping) else []
    if not isinstance(fallbacks, list | tuple) or not all(
        isinstance(item, str) and item for item in fallbacks
    ):
        return []
    return list(fallbacks)


def fallback_problems(providers: Mapping[Any, Any]) -> list[EntryProblem]:
    """E044 a fallback that is not a ``PROVIDERS`` entry, E046 fallbacks that lead back
    to an entry (A falls back to B, B to A): each entry's chain must end."""
    problems: list[EntryProblem] = []
    for name, entry in providers.items():
        where = f"LLM_CONVERSATIONS['PROVIDERS'][{name!r}]"
        for fallback in fallbacks_of(entry):
            if fallback not in providers:
                problems.append(
                    EntryProblem(
                        "llm_conversations.E044",
                        f"{where}['FALLBACKS'] names {fallback!r}, not a key of PROVIDERS.",
                        hint=f"Configured: {', '.join(sorted(map(str, providers)))}.",
                    )
                )
    for name in providers:
        cycle = _cycle_from(providers, name, [name])
        if cycle is not None and min(map(str, cycle)) == str(name):  # each cycle once
            problems.append(
                EntryProblem(
                    "llm_conversations.E046",
                    "LLM_CONVERSATIONS['PROVIDERS'] fallbacks go round in a circle: "
                    f"{' -> '.join(map(str, [*cycle, cycle[0]]))}.",
                    hint="A fallback's own FALLBACKS are tried after it; leave one out.",
                )
            )
    return problems


def _cycle_from(providers: Mapping[Any, Any], start: Any, path: list[Any]) -> list[Any] | None:
    """The entries of a cycle through ``start`` reached along ``path``, if any."""
    for fallback in fallbacks_of(providers.get(path[-1])):
        if fallback == start and fallback != path[-1]:
            return path
        if fallback in providers and fallback not in path:
            found = _cycle_from(providers, start, [*path, fallback])
            if found is not None:
                return found
    return None
