"""System checks for ``settings.LLM_CONVERSATIONS``, registered in ``AppConfig.ready()``.

One function per concern, each id stable:

- :func:`check_settings`: E001 not a dict, E002 unknown key, E003 not a
  positive integer (every name in ``conf.POSITIVE_INTEGERS``), E004 ``MAX_ITERATIONS`` above ``MAX_ITERATIONS_LIMIT``,
  E005 not a duration, E006 not a non-negative integer (``conf.NON_NEGATIVE_INTEGERS``),
  E007 neither ``None`` nor a positive integer (every name in
  ``conf.OPTIONAL_POSITIVE_INTEGERS``: ``CONVERSATION_RETENTION_DAYS``,
  ``RUN_START_CONCURRENCY``), E008
  ``TELEMETRY_CAPTURE_CONTENT`` or ``STRICT_REQUEST_FIELDS`` not ``True`` or ``False``.
- :func:`check_providers`: E010 ``PROVIDERS`` not a non-empty dict, E015
  ``DEFAULT_PROVIDER`` not a key of it, E009 ``TITLE_PROVIDER`` neither
  ``None`` nor a key of it, and the rules of each entry
  (E011-E014, E016-E019, E040 ``MODEL_INFO``, E041 ``CONTEXT_STRATEGY``, E043
  ``FALLBACKS`` not a list of names, E045 an entry its own fallback, E047
  ``CIRCUIT_BREAKER``, W010, W041 a context strategy without a context window) from
  :func:`~llm_conversations.providers.registry.provider_entry_problems`, which
  ``build_provider()`` applies too; E044 a fallback not a key of ``PROVIDERS``
  and E046 fallbacks in a circle, from
  :func:`~llm_conversations.providers.registry.fallback_problems`.
- :func:`check_tools`: E020 a ``TOOLS`` entry is not a usable tool, E021 two
  tools share a name, E022 ``DEFAULT_TOOLS`` neither ``None`` nor a list of
  names, E023 a name of ``DEFAULT_TOOLS`` neither a ``TOOLS`` tool nor
  ``<server>__<tool>`` of an ``MCP_SERVERS`` entry.
- :func:`check_mcp_servers`: E030 ``MCP_SERVERS`` not a dict, and the rules of
  each entry (E030-E034) from
  :func:`~llm_conversations.tools.mcp_config.mcp_server_problems`, which the
  registry applies too; E035 servers are set but the ``mcp`` package is missing.
- :func:`check_run_limits`: E050 ``RUN_POLICY`` is not a dotted path to a
  policy class, E051 ``RUN_RATE`` neither ``None`` nor a DRF rate
  (``"20/min"``), E052 ``MAX_ACTIVE_RUNS_PER_USER`` neither ``None`` nor a
  positive integer, E053 ``BUSY_STRATEGY`` not one of ``reject``, ``enqueue``,
  ``interrupt``, ``rollback``, E054 ``MAX_WAITING_RUNS`` neither ``None`` nor a
  positive integer, E060 a budget (``USER_DAILY_BUDGET``, ``USER_MONTHLY_BUDGET``,
  ``CONVERSATION_BUDGET``) not a limit, E061 ``BUDGET_HOOK`` not a callable.
- :func:`check_attachments`: E070 ``ATTACHMENT_MAX_BYTES``, E071
  ``ATTACHMENT_TYPES`` (a list of supported types), E072
  ``ATTACHMENT_MAX_PIXELS``, E073 ``ATTACHMENT_MAX_PDF_PAGES`` (each a positive
  integer), E074 ``ORPHAN_ATTACHMENT_HOURS`` neither ``None`` nor a positive
  integer.
- :func:`check_webhooks`: E080 ``WEBHOOKS`` not a dict of endpoints, or an
  endpoint breaking the rules of
  :func:`llm_conversations.runs.webhooks.endpoint_problems` (the secret is never
  quoted), E081 ``WEBHOOK_ALLOWED_HOSTS`` neither ``None`` nor a list of host names.
- :func:`check_share_links`: E090 ``SHARE_RATE`` neither ``None`` nor a DRF rate.
- :func:`check_trash`: E091 ``TRASH_RETENTION_DAYS`` neither ``None`` nor a
  positive integer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning
from django.utils.module_loading import import_string

from llm_conversations.conf import (
    BOOLEANS,
    BUSY_STRATEGIES,
    DEFAULTS,
    DURATIONS,
    NON_NEGATIVE_INTEGERS,
    OPTIONAL_DURATIONS,
    OPTIONAL_POSITIVE_INTEGERS,
    POSITIVE_INTEGERS,
    raw_setting,
)
from llm_conversations.core.content_parts import SUPPORTED_TYPES
from llm_conversations.core.limits import limit_problems
from llm_conversations.providers.registry import (
    EntryProblem,
    fallback_problems,
    is_non_negative_integer,
    provider_entry_problems,
)
from llm_conversations.runs.webhooks import endpoint_problems
from llm_conversations.tools import ToolError, load_tool
from llm_conversations.tools.mcp_config import (
    MISSING_SDK,
    SEPARATOR,
    mcp_installed,
    mcp_server_problems,
)

__all__ = [
    "check_attachments",
    "check_mcp_servers",
    "check_providers",
    "check_run_limits",
    "check_settings",
    "check_tools",
]

# What a RUN_POLICY class must have (llm_conversations.runs.policy.RunPolicy).
POLICY_METHODS = ("allowed_providers", "allowed_models", "allowed_tools", "max_iterations")
# DRF's rate periods: the first letter counts.
RATE_PERIODS = ("s", "m", "h", "d")


def _wrong_type(setting: str, expected: str, value: object, check_id: str) -> list[CheckMessage]:
    return [
        Error(
            f"{setting} must be {expected}.",
            hint=f"Got {type(value).__name__}.",
            id=check_id,
        )
    ]


def _is_optional_duration(value: object) -> bool:
    return value is None or _is_positive_number(value)


def _is_optional_positive_integer(value: object) -> bool:
    return value is None or _is_positive_integer(value)


def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """E001 not a dict, E002 unknown key, E003 not a positive integer, E004 limits,
    E005 not a duration, E006 not a non-negative integer, E007 neither None nor a
    positive integer, E008 a boolean setting (``BOOLEANS``) not a bool."""
    value = getattr(settings, "LLM_CONVERSATIONS", {})
    if not isinstance(value, Mapping):
        return _wrong_type("LLM_CONVERSATIONS", "a dict", value, "llm_conversations.E001")
    errors: list[CheckMessage] = []
    for key in sorted(set(value) - set(DEFAULTS), key=str):
        errors.append(
            Error(
                f"LLM_CONVERSATIONS has an unknown key {key!r}.",
                hint=f"Known keys: {', '.join(sorted(DEFAULTS))}.",
                id="llm_conversations.E002",
            )
        )
    kinds = (
        (POSITIVE_INTEGERS, _is_positive_integer, "a positive integer", "llm_conversations.E003"),
        (
            OPTIONAL_DURATIONS,
            _is_optional_duration,
            "a positive number of seconds or None",
            "llm_conversations.E005",
        ),
        (DURATIONS, _is_positive_number, "a positive number of seconds", "llm_conversations.E005"),
        (
            NON_NEGATIVE_INTEGERS,
            is_non_negative_integer,
            "a non-negative integer",
            "llm_conversations.E006",
        ),
        (
            OPTIONAL_POSITIVE_INTEGERS,
            _is_optional_positive_integer,
            "a positive integer or None",
            "llm_conversations.E007",
        ),
    )
    for keys, valid, expected, check_id in kinds:
        for key in keys:
            item = raw_setting(key)
            if not valid(item):
                errors.append(
                    Error(
                        f"LLM_CONVERSATIONS[{key!r}] must be {expected}; got {item!r}.",
                        id=check_id,
                    )
                )
    limit = raw_setting("MAX_ITERATIONS_LIMIT")
    default = raw_setting("MAX_ITERATIONS")
    if isinstance(limit, int) and isinstance(default, int) and default > limit:
        errors.append(
            Error(
                "LLM_CONVERSATIONS['MAX_ITERATIONS'] exceeds 'MAX_ITERATIONS_LIMIT'.",
                hint=f"{default} > {limit}.",
                id="llm_conversations.E004",
            )
        )
    for name in BOOLEANS:
        value = raw_setting(name)
        if not isinstance(value, bool):
            errors.append(
                Error(
                    f"LLM_CONVERSATIONS[{name!r}] must be True or False; got {value!r}.",
                    hint="A string such as 'false' would count as true.",
                    id="llm_conversations.E008",
                )
            )
    return errors


def check_providers(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """E010 PROVIDERS not a non-empty dict, E015 DEFAULT_PROVIDER unknown, E009
    TITLE_PROVIDER unknown, E042 SUMMARY_PROVIDER unknown or missing, plus each entry."""
    providers = raw_setting("PROVIDERS")
    if not isinstance(providers, Mapping) or not providers:
        return [
            Error(
                "LLM_CONVERSATIONS['PROVIDERS'] must be a non-empty dict of name -> settings.",
                hint=f"Got {providers!r}." if not isinstance(providers, Mapping) else None,
                id="llm_conversations.E010",
            )
        ]
    errors: list[CheckMessage] = []
    default = raw_setting("DEFAULT_PROVIDER")
    if default not in providers:
        errors.append(
            Error(
                f"LLM_CONVERSATIONS['DEFAULT_PROVIDER'] is {default!r}, not a key of PROVIDERS.",
                hint=f"Configured: {', '.join(sorted(map(str, providers)))}.",
                id="llm_conversations.E015",
            )
        )
    title = raw_setting("TITLE_PROVIDER")
    if title is not None and (not isinstance(title, str) or title not in providers):
        errors.append(
            Error(
                f"LLM_CONVERSATIONS['TITLE_PROVIDER'] is {title!r}, "
                "neither None nor a key of PROVIDERS.",
                hint=f"Configured: {', '.join(sorted(map(str, providers)))}.",
                id="llm_conversations.E009",
            )
        )
    errors.extend(_summary_provider_errors(providers))
    for name, entry in providers.items():
        errors.extend(_as_check_message(p) for p in provider_entry_problems(entry, str(name)))
    errors.extend(_as_check_message(p) for p in fallback_problems(providers))
    return errors


def _summary_provider_errors(providers: Mapping[Any, Any]) -> list[CheckMessage]:
    """E042: SUMMARY_PROVIDER unknown, or missing while an entry summarizes."""
    summary = raw_setting("SUMMARY_PROVIDER")
    configured = ", ".join(sorted(map(str, providers)))
    if summary is not None and (not isinstance(summary, str) or summary not in providers):
        return [
            Error(
                f"LLM_CONVERSATIONS['SUMMARY_PROVIDER'] is {summary!r}, "
                "neither None nor a key of PROVIDERS.",
                hint=f"Configured: {configured}.",
                id="llm_conversations.E042",
            )
        ]
    summarizing = [
        str(name)
        for name, entry in providers.items()
        if isinstance(entry, Mapping) and entry.get("CONTEXT_STRATEGY") == "summarize"
    ]
    if summary is None and summarizing:
        return [
            Error(
                f"PROVIDERS entries {', '.join(map(repr, summarizing))} use the 'summarize' "
                "CONTEXT_STRATEGY, but LLM_CONVERSATIONS['SUMMARY_PROVIDER'] is not set.",
                hint=f"Name the entry that writes summaries; configured: {configured}.",
                id="llm_conversations.E042",
            )
        ]
    return []


def check_tools(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """E020 an entry that cannot be imported or is not a tool; E021 duplicate tool names;
    E022 and E023 ``DEFAULT_TOOLS``."""
    paths = raw_setting("TOOLS")
    if isinstance(paths, str) or not isinstance(paths, list | tuple):
        return _wrong_type(
            "LLM_CONVERSATIONS['TOOLS']", "a list of dotted paths", paths, "llm_conversations.E020"
        )
    errors: list[CheckMessage] = []
    seen: dict[str, str] = {}
    for path in paths:
        if not isinstance(path, str):
            errors.append(
                Error(
                    f"LLM_CONVERSATIONS['TOOLS'] entry {path!r} is not a dotted path.",
                    id="llm_conversations.E020",
                )
            )
            continue
        try:
            loaded = load_tool(path)
        except ToolError as exc:
            errors.append(
                Error(
                    f"LLM_CONVERSATIONS['TOOLS'] entry {path!r} is not a usable tool.",
                    hint=exc.message,
                    id="llm_conversations.E020",
                )
            )
            continue
        except Exception as exc:  # the module itself fails to import
            errors.append(
                Error(
                    f"LLM_CONVERSATIONS['TOOLS'] entry {path!r} cannot be imported.",
                    hint=f"{type(exc).__name__}: {exc}",
                    id="llm_conversations.E020",
                )
            )
            continue
        if loaded.name in seen:
            errors.append(
                Error(
                    f"LLM_CONVERSATIONS['TOOLS'] has two tools named {loaded.name!r}.",
                    hint=f"{seen[loaded.name]!r} and {path!r}; pass name= to @tool to rename one.",
                    id="llm_conversations.E021",
                )
            )
        else:
            seen[loaded.name] = path
    return errors + _default_tools_errors(set(seen))


def _default_tools_errors(local: set[str]) -> list[CheckMessage]:
    """E022 DEFAULT_TOOLS not None or a list of names; E023 a name no tool can have.

    An MCP server's tools are not listed here (no server is started), so a
    name of one is accepted by its ``<server>__`` prefix.
    """
    names = raw_setting("DEFAULT_TOOLS")
    if names is None:
        return []
    if not isinstance(names, list | tuple) or not all(isinstance(n, str) for n in names):
        return _wrong_type(
            "LLM_CONVERSATIONS['DEFAULT_TOOLS']",
            "None or a list of tool names",
            names,
            "llm_conversations.E022",
        )
    servers = raw_setting("MCP_SERVERS")
    prefixes = tuple(f"{s}{SEPARATOR}" for s in servers) if isinstance(servers, Mapping) else ()
    return [
        Error(
            f"LLM_CONVERSATIONS['DEFAULT_TOOLS'] names {name!r}, which is no tool.",
            hint="Name a tool of TOOLS, or <server>__<tool> of an MCP_SERVERS entry.",
            id="llm_conversations.E023",
        )
        for name in names
        if name not in local and not name.startswith(prefixes)
    ]


def check_mcp_servers(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """E030 MCP_SERVERS not a dict, E030-E034 each entry, E035 the SDK is missing.

    Nothing is started or connected: a server that is down is a run-time
    condition (its calls are answered with error results), not a setting error.
    """
    servers = raw_setting("MCP_SERVERS")
    if not isinstance(servers, Mapping):
        return _wrong_type(
            "LLM_CONVERSATIONS['MCP_SERVERS']",
            "a dict of name -> server",
            servers,
            "llm_conversations.E030",
        )
    errors: list[CheckMessage] = []
    if servers and not mcp_installed():
        errors.append(Error(MISSING_SDK, id="llm_conversations.E035"))
    for name, entry in servers.items():
        problems = mcp_server_problems(entry, name, environment=True)
        errors.extend(_as_check_message(p) for p in problems)
    return errors


def check_run_limits(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """E050 RUN_POLICY unusable, E051 RUN_RATE not a rate, E052 MAX_ACTIVE_RUNS_PER_USER,
    E053 BUSY_STRATEGY, E054 MAX_WAITING_RUNS, E060 a budget, E061 BUDGET_HOOK."""
    errors: list[CheckMessage] = []
    path = raw_setting("RUN_POLICY")
    problem = _policy_problem(path)
    if problem:
        errors.append(
            Error(
                f"LLM_CONVERSATIONS['RUN_POLICY'] {problem}",
                hint="A dotted path to a class like llm_conversations.runs.policy.RunPolicy.",
                id="llm_conversations.E050",
            )
        )
    errors += _rate_errors("RUN_RATE", "llm_conversations.E051")
    limit = raw_setting("MAX_ACTIVE_RUNS_PER_USER")
    if limit is not None and not _is_positive_integer(limit):
        errors.append(
            Error(
                "LLM_CONVERSATIONS['MAX_ACTIVE_RUNS_PER_USER'] must be None or a positive "
                f"integer; got {limit!r}.",
                id="llm_conversations.E052",
            )
        )
    strategy = raw_setting("BUSY_STRATEGY")
    if strategy not in BUSY_STRATEGIES:
        errors.append(
            Error(
                f"LLM_CONVERSATIONS['BUSY_STRATEGY'] must be one of "
                f"{', '.join(BUSY_STRATEGIES)}; got {strategy!r}.",
                id="llm_conversations.E053",
            )
        )
    waiting = raw_setting("MAX_WAITING_RUNS")
    if not _is_optional_positive_integer(waiting):
        errors.append(
            Error(
                "LLM_CONVERSATIONS['MAX_WAITING_RUNS'] must be None or a positive integer; "
                f"got {waiting!r}.",
                id="llm_conversations.E054",
            )
        )
    return errors + _budget_errors()


def _budget_errors() -> list[CheckMessage]:
    """E060 a budget setting is not a limit; E061 BUDGET_HOOK is not a callable."""
    errors: list[CheckMessage] = []
    for name in ("USER_DAILY_BUDGET", "USER_MONTHLY_BUDGET", "CONVERSATION_BUDGET"):
        errors.extend(
            Error(
                message,
                hint="None, or {'tokens': 100000} and/or {'cost': '5.00'} (US dollars).",
                id="llm_conversations.E060",
            )
            for message in limit_problems(raw_setting(name), f"LLM_CONVERSATIONS[{name!r}]")
        )
    hook = raw_setting("BUDGET_HOOK")
    if hook is not None:
        problem = None
        try:
            if not isinstance(hook, str) or "." not in hook:
                problem = f"must be None or a dotted path; got {hook!r}."
            elif not callable(import_string(hook)):
                problem = f"{hook!r} is not callable."
        except ImportError as exc:
            problem = f"{hook!r} cannot be imported: {exc}"
        if problem:
            errors.append(
                Error(
                    f"LLM_CONVERSATIONS['BUDGET_HOOK'] {problem}",
                    hint="A dotted path to a function taking a user and returning "
                    "{'daily': ..., 'monthly': ..., 'conversation': ...}.",
                    id="llm_conversations.E061",
                )
            )
    return errors


def check_attachments(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """E070-E073 the attachment limits and types, E074 ``ORPHAN_ATTACHMENT_HOURS``."""
    errors: list[CheckMessage] = []
    for name, check_id in (
        ("ATTACHMENT_MAX_BYTES", "llm_conversations.E070"),
        ("ATTACHMENT_MAX_PIXELS", "llm_conversations.E072"),
        ("ATTACHMENT_MAX_PDF_PAGES", "llm_conversations.E073"),
    ):
        value = raw_setting(name)
        if not _is_positive_integer(value):
            errors.append(
                Error(
                    f"LLM_CONVERSATIONS['{name}'] must be a positive integer; got {value!r}.",
                    id=check_id,
                )
            )
    types = raw_setting("ATTACHMENT_TYPES")
    if not isinstance(types, list | tuple | set | frozenset) or not set(types) <= SUPPORTED_TYPES:
        errors.append(
            Error(
                "LLM_CONVERSATIONS['ATTACHMENT_TYPES'] must be a list of MIME types among "
                f"{', '.join(sorted(SUPPORTED_TYPES))}; got {types!r}.",
                hint="An empty list refuses every upload.",
                id="llm_conversations.E071",
            )
        )
    hours = raw_setting("ORPHAN_ATTACHMENT_HOURS")
    if not _is_optional_positive_integer(hours):
        errors.append(
            Error(
                "LLM_CONVERSATIONS['ORPHAN_ATTACHMENT_HOURS'] must be None or a positive "
                f"integer; got {hours!r}.",
                id="llm_conversations.E074",
            )
        )
    return errors


def check_webhooks(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """E080 ``WEBHOOKS`` and each endpoint of it, E081 ``WEBHOOK_ALLOWED_HOSTS``."""
    errors: list[CheckMessage] = []
    hooks = raw_setting("WEBHOOKS")
    if not isinstance(hooks, Mapping):
        # Not quoted: the value may hold a secret.
        message = f"LLM_CONVERSATIONS['WEBHOOKS'] must be a dict of endpoints; got {type(hooks).__name__}."
        return [Error(message, id="llm_conversations.E080")]
    for name, entry in hooks.items():
        if not isinstance(entry, Mapping) or not set(entry) <= {"URL", "SECRET", "EVENTS"}:
            problems = ["a dict with URL, SECRET and optionally EVENTS"]
        else:
            problems = endpoint_problems(
                entry.get("URL"), entry.get("SECRET"), entry.get("EVENTS", [])
            )
        errors += [
            Error(
                f"LLM_CONVERSATIONS['WEBHOOKS'][{name!r}]: {problem}.", id="llm_conversations.E080"
            )
            for problem in problems
        ]
    hosts = raw_setting("WEBHOOK_ALLOWED_HOSTS")
    if hosts is not None and (
        not isinstance(hosts, list | tuple) or not all(isinstance(h, str) and h for h in hosts)
    ):
        errors.append(
            Error(
                "LLM_CONVERSATIONS['WEBHOOK_ALLOWED_HOSTS'] must be None or a list of host "
                f"names; got {hosts!r}.",
                hint="None lets webhooks reach public addresses only.",
                id="llm_conversations.E081",
            )
        )
    return errors


def check_share_links(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """E090 ``SHARE_RATE`` not a rate (``SHARE_LINKS_REQUIRE_LOGIN`` is E008's)."""
    return _rate_errors("SHARE_RATE", "llm_conversations.E090")


def _rate_errors(name: str, check_id: str) -> list[CheckMessage]:
    """``name`` neither ``None`` nor a DRF rate such as ``"20/min"``."""
    rate = raw_setting(name)
    if rate is None or _is_rate(rate):
        return []
    message = f"LLM_CONVERSATIONS[{name!r}] must be None or a rate such as '20/min'; got {rate!r}."
    return [Error(message, id=check_id)]


def check_trash(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """E091 ``TRASH_RETENTION_DAYS`` neither ``None`` nor a positive integer."""
    days = raw_setting("TRASH_RETENTION_DAYS")
    if _is_optional_positive_integer(days):
        return []
    return [
        Error(
            "LLM_CONVERSATIONS['TRASH_RETENTION_DAYS'] must be None or a positive integer; "
            f"got {days!r}.",
            hint="None keeps trashed conversations until they are deleted for good.",
            id="llm_conversations.E091",
        )
    ]


def _policy_problem(path: object) -> str | None:
    if not isinstance(path, str) or "." not in path:
        return f"must be a dotted path; got {path!r}."
    try:
        cls = import_string(path)
    except ImportError as exc:
        return f"{path!r} cannot be imported: {exc}"
    missing = [name for name in POLICY_METHODS if not callable(getattr(cls, name, None))]
    if not isinstance(cls, type) or missing:
        return f"{path!r} is not a policy class (it needs {', '.join(POLICY_METHODS)})."
    return None


def _is_rate(value: object) -> bool:
    if not isinstance(value, str) or value.count("/") != 1:
        return False
    number, period = value.split("/")
    return number.isdigit() and int(number) > 0 and period[:1] in RATE_PERIODS


def _is_positive_integer(value: object) -> bool:
    # bool is an int subclass, but True is a mistake here, not 1.
    return not isinstance(value, bool) and isinstance(value, int) and value > 0


def _is_positive_number(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and value > 0


def _as_check_message(problem: EntryProblem) -> CheckMessage:
    level = Error if problem.is_error else Warning
    return level(problem.message, hint=problem.hint, id=problem.id)
