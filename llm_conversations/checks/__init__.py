"""System checks for ``settings.LLM_CONVERSATIONS``, registered in ``AppConfig.ready()``
with the tag :data:`TAG` (``manage.py check --tag llm_conversations``).

One function per concern, each id stable, in a module of this package named
for what it checks (the kinds of value they share are in ``values``):

- :func:`check_settings` (``settings_values``): E001 not a dict, E002 unknown key,
  E003 not a positive integer (every name in ``conf.POSITIVE_INTEGERS``), E004 ``MAX_ITERATIONS`` above ``MAX_ITERATIONS_LIMIT``,
  E005 not a duration, E006 not a non-negative integer (``conf.NON_NEGATIVE_INTEGERS``),
  E007 neither ``None`` nor a positive integer (every name in
  ``conf.OPTIONAL_POSITIVE_INTEGERS``: ``CONVERSATION_RETENTION_DAYS``,
  ``RUN_START_CONCURRENCY``, ``RUN_START_QUEUE``), E008
  ``TELEMETRY_CAPTURE_CONTENT`` or ``STRICT_REQUEST_FIELDS`` not ``True`` or ``False``.
- :func:`check_providers` (``providers``): E010 ``PROVIDERS`` not a non-empty dict, E015
  ``DEFAULT_PROVIDER`` not a key of it, E009 ``TITLE_PROVIDER`` neither
  ``None`` nor a key of it, and the rules of each entry
  (E011-E014, E016-E019, E040 ``MODEL_INFO``, E041 ``CONTEXT_STRATEGY``, E043
  ``FALLBACKS`` not a list of names, E045 an entry its own fallback, E047
  ``CIRCUIT_BREAKER``, W010, W041 a context strategy without a context window) from
  :func:`~llm_conversations.providers.entries.provider_entry_problems`, which
  ``build_provider()`` applies too; E044 a fallback not a key of ``PROVIDERS``
  and E046 fallbacks in a circle, from
  :func:`~llm_conversations.providers.entries.fallback_problems`.
- :func:`check_tools` (``tools``): E020 a ``TOOLS`` entry is not a usable tool, E021 two
  tools share a name, E022 ``DEFAULT_TOOLS`` neither ``None`` nor a list of
  names, E023 a name of ``DEFAULT_TOOLS`` neither a ``TOOLS`` tool nor
  ``<server>__<tool>`` of an ``MCP_SERVERS`` entry.
- :func:`check_mcp_servers` (``tools``): E030 ``MCP_SERVERS`` not a dict, and the rules of
  each entry (E030-E034) from
  :func:`~llm_conversations.tools.mcp_config.mcp_server_problems`, which the
  registry applies too; E035 servers are set but the ``mcp`` package is missing.
- :func:`check_run_limits` (``run_limits``): E050 ``RUN_POLICY`` is not a dotted path to a
  policy class, E051 ``RUN_RATE`` neither ``None`` nor a DRF rate
  (``"20/min"``), E052 ``MAX_ACTIVE_RUNS_PER_USER`` neither ``None`` nor a
  positive integer, E053 ``BUSY_STRATEGY`` not one of ``reject``, ``enqueue``,
  ``interrupt``, ``rollback``, E054 ``MAX_WAITING_RUNS`` neither ``None`` nor a
  positive integer, E060 a budget (``USER_DAILY_BUDGET``, ``USER_MONTHLY_BUDGET``,
  ``CONVERSATION_BUDGET``) not a limit, E061 ``BUDGET_HOOK`` not a callable.
- :func:`check_attachments` (``conversations``): E070 ``ATTACHMENT_MAX_BYTES``, E071
  ``ATTACHMENT_TYPES`` (a list of supported types), E072
  ``ATTACHMENT_MAX_PIXELS``, E073 ``ATTACHMENT_MAX_PDF_PAGES`` (each a positive
  integer), E074 ``ORPHAN_ATTACHMENT_HOURS`` neither ``None`` nor a positive
  integer.
- :func:`check_webhooks` (``webhooks``): E080 ``WEBHOOKS`` not a dict of endpoints, or an
  endpoint breaking the rules of
  :func:`llm_conversations.runs.webhooks.endpoints.endpoint_problems` (the secret is never
  quoted), E081 ``WEBHOOK_ALLOWED_HOSTS`` neither ``None`` nor a list of host names.
- :func:`check_share_links` (``conversations``): E090 ``SHARE_RATE`` neither ``None`` nor a DRF rate.
- :func:`check_trash` (``conversations``): E091 ``TRASH_RETENTION_DAYS`` neither ``None`` nor a
  positive integer.
- :func:`check_installation` (``installation``): E092 a ``TASKS`` backend is
  ``CeleryBackend`` but no Celery app was given to ``tasks.celery.configure()``
  (the project's Celery module is not loaded by its package's ``__init__.py``).
"""

from llm_conversations.checks.conversations import check_attachments, check_share_links, check_trash
from llm_conversations.checks.installation import check_installation
from llm_conversations.checks.providers import check_providers
from llm_conversations.checks.run_limits import check_run_limits
from llm_conversations.checks.settings_values import check_settings
from llm_conversations.checks.tools import check_mcp_servers, check_tools
from llm_conversations.checks.webhooks import check_webhooks

TAG = "llm_conversations"
"""The tag of every check of the app."""

__all__ = [
    "TAG",
    "check_attachments",
    "check_installation",
    "check_mcp_servers",
    "check_providers",
    "check_run_limits",
    "check_settings",
    "check_share_links",
    "check_tools",
    "check_trash",
    "check_webhooks",
]
