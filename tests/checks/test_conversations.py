"""``checks/conversations.py``: E070-E074 (attachments), E090 (share links), E091 (the trash)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from llm_conversations.checks import check_attachments, check_share_links


@pytest.mark.parametrize("types", ["image/png", {"image/png": 1}, None])
def test_attachment_types_must_be_a_list(types: Any) -> None:
    with override_settings(LLM_CONVERSATIONS={"ATTACHMENT_TYPES": types}):
        assert [error.id for error in check_attachments()] == ["llm_conversations.E071"]


def test_the_attachment_defaults_pass() -> None:
    with override_settings(LLM_CONVERSATIONS={"ORPHAN_ATTACHMENT_HOURS": None}):
        assert check_attachments() == []


@pytest.mark.parametrize("rate", ["60", "0/min", "60/week", 60])
def test_e090_share_rate_must_be_a_drf_rate(rate: Any) -> None:
    with override_settings(LLM_CONVERSATIONS={"SHARE_RATE": rate}):
        assert [error.id for error in check_share_links()] == ["llm_conversations.E090"]


@pytest.mark.parametrize("rate", [None, "60/min", "5/s"])
def test_e090_accepts_rates_and_none(rate: Any) -> None:
    with override_settings(LLM_CONVERSATIONS={"SHARE_RATE": rate}):
        assert check_share_links() == []
