"""``checks/webhooks.py``: E080 (WEBHOOKS), E081 (WEBHOOK_ALLOWED_HOSTS)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from llm_conversations.checks import check_webhooks

GOOD_SECRET = "whsec_" + "QUJD" * 8  # 24 bytes


def webhook_errors(value: dict[str, Any]) -> list[str]:
    with override_settings(LLM_CONVERSATIONS=value):
        return [str(message.msg) for message in check_webhooks()]


def test_webhook_endpoints_pass_when_well_formed() -> None:
    hooks = {
        "ops": {"URL": "https://hooks.example.com/in", "SECRET": GOOD_SECRET},
        "failures": {
            "URL": "http://10.0.0.5/hook",
            "SECRET": GOOD_SECRET,
            "EVENTS": ["run.failed", "run.requires_action"],
        },
    }
    assert webhook_errors({"WEBHOOKS": hooks, "WEBHOOK_ALLOWED_HOSTS": ["10.0.0.5"]}) == []
    assert webhook_errors({}) == []


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"URL": "file:///etc/passwd", "SECRET": GOOD_SECRET}, "URL: only http and https"),
        ({"URL": "https://", "SECRET": GOOD_SECRET}, "URL: the URL has no host"),
        ({"URL": "https://x.example", "SECRET": "hunter2-top-secret"}, "SECRET: a signing secret"),
        ({"URL": "https://x.example", "SECRET": "whsec_!!!"}, "SECRET: a signing secret is"),
        ({"URL": "https://x.example", "SECRET": "whsec_QUJD"}, "the base64 of 24 to 62 bytes"),
        (
            {"URL": "https://x.example", "SECRET": GOOD_SECRET, "EVENTS": ["run.done"]},
            "EVENTS: a list of event names",
        ),
        ({"URL": "https://x.example", "SECRET": GOOD_SECRET, "TOKEN": "x"}, "a dict with URL"),
    ],
)
def test_e080_names_the_broken_endpoint_and_never_its_secret(
    entry: dict[str, Any], expected: str
) -> None:
    (error,) = webhook_errors({"WEBHOOKS": {"ops": entry}})
    assert error.startswith("LLM_CONVERSATIONS['WEBHOOKS']['ops']: ")
    assert expected in error
    assert "hunter2" not in error


def test_e080_does_not_quote_a_webhooks_value_that_is_not_a_dict() -> None:
    (error,) = webhook_errors({"WEBHOOKS": [GOOD_SECRET]})
    assert GOOD_SECRET not in error
    assert "must be a dict of endpoints; got list" in error


@pytest.mark.parametrize("hosts", ["127.0.0.1", [""], [1]])
def test_e081_allowed_hosts(hosts: Any) -> None:
    with override_settings(LLM_CONVERSATIONS={"WEBHOOK_ALLOWED_HOSTS": hosts}):
        assert [error.id for error in check_webhooks()] == ["llm_conversations.E081"]
