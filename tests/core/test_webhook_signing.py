"""Webhook signatures: Standard Webhooks' scheme, checked against the spec's own example."""

from __future__ import annotations

import base64

import pytest

from llm_conversations.core.webhook_signing import (
    new_secret,
    secret_problem,
    sign,
    signature_headers,
    verify,
)

# The example of the Standard Webhooks specification (and its reference libraries' tests).
SPEC_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SPEC_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
SPEC_TIMESTAMP = 1614265330
SPEC_BODY = b'{"test": 2432232314}'
SPEC_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_signs_the_specifications_example() -> None:
    assert sign(SPEC_SECRET, SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY) == SPEC_SIGNATURE


def headers(**changes: str) -> dict[str, str]:
    return {**signature_headers(SPEC_SECRET, SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY), **changes}


def test_verify_accepts_a_signed_message_within_the_tolerance() -> None:
    assert headers()["webhook-signature"] == SPEC_SIGNATURE
    assert verify(SPEC_SECRET, headers(), SPEC_BODY, now=SPEC_TIMESTAMP + 299)
    assert verify(SPEC_SECRET, headers(), SPEC_BODY, now=SPEC_TIMESTAMP - 299)


@pytest.mark.parametrize(
    ("changes", "body", "now"),
    [
        ({}, b'{"test": 2432232315}', SPEC_TIMESTAMP),  # the body changed
        ({}, SPEC_BODY, SPEC_TIMESTAMP + 301),  # too old: a replay
        ({"webhook-timestamp": str(SPEC_TIMESTAMP + 1)}, SPEC_BODY, SPEC_TIMESTAMP),
        ({"webhook-id": "msg_other"}, SPEC_BODY, SPEC_TIMESTAMP),
        ({"webhook-signature": "v1,AAAA"}, SPEC_BODY, SPEC_TIMESTAMP),
        ({"webhook-timestamp": "soon"}, SPEC_BODY, SPEC_TIMESTAMP),
    ],
)
def test_verify_refuses_anything_changed(changes: dict[str, str], body: bytes, now: int) -> None:
    assert not verify(SPEC_SECRET, headers(**changes), body, now=now)


def test_verify_refuses_another_secret_and_accepts_one_of_several_signatures() -> None:
    other = new_secret()
    assert not verify(other, headers(), SPEC_BODY, now=SPEC_TIMESTAMP)
    rotated = f"v1,{sign(other, SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY)[3:]} {SPEC_SIGNATURE}"
    assert verify(
        SPEC_SECRET, headers(**{"webhook-signature": rotated}), SPEC_BODY, now=SPEC_TIMESTAMP
    )


def test_new_secrets_are_valid_and_distinct() -> None:
    first, second = new_secret(), new_secret()
    assert first != second
    assert secret_problem(first) is None
    assert len(base64.b64decode(first.removeprefix("whsec_"))) == 32


@pytest.mark.parametrize(
    "secret", [None, "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_***", "whsec_QUJD"]
)
def test_secret_problem_names_what_is_wrong_without_the_secret(secret: object) -> None:
    problem = secret_problem(secret)
    assert problem is not None
    assert str(secret) not in problem
