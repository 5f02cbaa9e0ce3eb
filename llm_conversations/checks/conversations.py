"""E070-E074, E090, E091: the settings of what users do with stored
conversations: attachments, share links, the trash."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error

from llm_conversations.checks.values import rate_errors, setting_errors
from llm_conversations.conf import raw_setting
from llm_conversations.core.content_parts import SUPPORTED_TYPES
from llm_conversations.core.settings_rules import (
    is_optional_positive_integer,
    is_positive_integer,
)

__all__ = ["check_attachments", "check_share_links", "check_trash"]


def check_attachments(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """E070-E073 the attachment limits and types, E074 ``ORPHAN_ATTACHMENT_HOURS``."""
    errors: list[CheckMessage] = []
    for name, check_id in (
        ("ATTACHMENT_MAX_BYTES", "llm_conversations.E070"),
        ("ATTACHMENT_MAX_PIXELS", "llm_conversations.E072"),
        ("ATTACHMENT_MAX_PDF_PAGES", "llm_conversations.E073"),
    ):
        errors += setting_errors(name, is_positive_integer, "a positive integer", check_id)
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
    return errors + setting_errors(
        "ORPHAN_ATTACHMENT_HOURS",
        is_optional_positive_integer,
        "None or a positive integer",
        "llm_conversations.E074",
    )


def check_share_links(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """E090 ``SHARE_RATE`` not a rate (``SHARE_LINKS_REQUIRE_LOGIN`` is E008's)."""
    return rate_errors("SHARE_RATE", "llm_conversations.E090")


def check_trash(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """E091 ``TRASH_RETENTION_DAYS`` neither ``None`` nor a positive integer."""
    return setting_errors(
        "TRASH_RETENTION_DAYS",
        is_optional_positive_integer,
        "None or a positive integer",
        "llm_conversations.E091",
        hint="None keeps trashed conversations until they are deleted for good.",
    )
