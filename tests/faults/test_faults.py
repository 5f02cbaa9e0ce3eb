"""Fault injection over real sockets: every adapter, every fault, through the API.

A fake provider server on 127.0.0.1 plays one fault per scenario (for each of
the four wire protocols, non-streamed and streamed), then the run is started
with ``POST runs/``. Each scenario checks the HTTP answer (never a 500), the
run's status and termination reason, that the stored conversation is valid
(no half-stored turn, every call answered once), that the next run on the
same conversation succeeds, and that no fragment of the API key escaped into
a response, a stored row or a log line.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from llm_conversations.conversations import create_conversation, load_messages
from llm_conversations.core.messages import Role
from llm_conversations.core.sequence import check_sequence
from llm_conversations.models import Message, Run, RunEventType
from tests.api.conftest import parse_sse

from .conftest import BACKENDS, MAX_REPLY_CHARS, TIMEOUT, Configure
from .server import API_KEY, OK_TEXT, SECRET, Action, Exchange, FakeProvider
from .wire import Rendered

pytestmark = pytest.mark.django_db

MODES = ("plain", "stream")

# Actions ---------------------------------------------------------------------


def status(code: int, retry_after: str | None = None) -> Action:
    """An HTTP error whose message echoes the key where a 500-character cut would split it."""

    def act(ex: Exchange) -> None:
        message = "x" * 480 + f" upstream says key {API_KEY} is rate limited or down"
        body = ex.protocol.error(code, message)
        headers = {"retry-after": retry_after} if retry_after is not None else {}
        ex.head(code, "application/json", length=len(body), headers=headers)
        ex.write(body)

    return act


def reply(
    text: str = "",
    calls: tuple[tuple[str, str, str], ...] = (),
    finish: str = "stop",
    usage: str = "3",
) -> Action:
    def act(ex: Exchange) -> None:
        ex.send(ex.render(text, calls, "tool" if calls else finish, usage=usage))

    return act


def reset(ex: Exchange) -> None:
    ex.reset()


def hang(ex: Exchange) -> None:
    ex.stop.wait(10)


def drip(ex: Exchange) -> None:
    rendered = ex.render(OK_TEXT)
    if ex.stream:
        # The headers trickle in: the first byte of the stream comes after TIMEOUT.
        ex.write(f"HTTP/1.0 200 OK\r\ncontent-type: {rendered.content_type}\r\n".encode())
        ex.drip(b"\r\n")
        if not ex.stop.is_set():
            ex.write(rendered.whole)
        return
    ex.head(200, rendered.content_type, length=len(rendered.whole))
    ex.drip(rendered.whole)


def truncated_body(ex: Exchange) -> None:
    body = ex.render("A whole reply that is cut in the middle of its body.").whole
    ex.head(200, "application/json", length=len(body) + 500)
    ex.write(body[: len(body) // 2])


def truncated_stream(ex: Exchange) -> None:
    rendered = ex.render("A reply whose stream never ends properly.")
    ex.head(200, rendered.content_type)
    ex.write(rendered.body)


def invalid_json(ex: Exchange) -> None:
    ex.send(ex.protocol.invalid_json(ex.stream))


def missing_fields(ex: Exchange) -> None:
    ex.send(ex.protocol.missing_fields(ex.stream))


def held_after_the_end(ex: Exchange) -> None:
    """A whole reply, usage included, then the connection held open (OpenAI: no ``[DONE]``)."""
    rendered = ex.render(OK_TEXT)
    ex.head(200, rendered.content_type)
    ex.write(rendered.whole.removesuffix(b"data: [DONE]\n\n"))
    ex.stop.wait(10)


def corrupt_gzip(ex: Exchange) -> None:
    """A body that says it is gzip and is not: httpx cannot decode it."""
    body = b"\x1f\x8b\x08\x00" + b"these bytes are not deflate data" * 4
    length = None if ex.stream else len(body)
    content_type = ex.render(OK_TEXT).content_type
    ex.head(200, content_type, length=length, headers={"content-encoding": "gzip"})
    ex.write(body)


# Past Python's recursion limit for json.loads, and within the body size cap.
DEEP_JSON = b"[" * 20_000 + b"]" * 20_000


def deep_json(ex: Exchange) -> None:
    """JSON nested 20,000 levels deep, as the body or as a stream's event."""
    content_type = ex.render(OK_TEXT).content_type
    if not ex.stream:
        ex.send(Rendered(content_type, DEEP_JSON))
    elif ex.protocol.name == "ollama":
        ex.send(Rendered(content_type, DEEP_JSON + b"\n"))
    else:
        event = b"event: message_start\n" if ex.protocol.name == "anthropic" else b""
        ex.send(Rendered(content_type, event + b"data: " + DEEP_JSON + b"\n\n"))


# Scenarios --------------------------------------------------------------------


@dataclass
class Result:
    backend: str
    mode: str
    status_code: int
    body: bytes
    run: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    requests: int
    sleeps: list[float]
    seconds: float

    def rows(self, role: str) -> list[Message]:
        return list(Message.objects.filter(run_id=self.run["id"], role=role).order_by("position"))


Outcome = tuple[str, str]


@dataclass(frozen=True)
class Scenario:
    actions: tuple[Action, ...] = ()
    every_time: Action | None = None
    outcome: Outcome | Callable[[str], Outcome] = ("failed", "provider_error")
    modes: tuple[str, ...] = MODES
    entry: dict[str, Any] = field(default_factory=dict)
    check: Callable[[Result], None] | None = None
    # (backend, mode) -> why the current code fails it.


def attempts(n: int, sleeps: list[float] | None = None) -> Callable[[Result], None]:
    def check(result: Result) -> None:
        assert result.requests == n
        if sleeps is not None:
            assert result.sleeps == sleeps
        else:
            assert len(result.sleeps) == n - 1

    return check


def error_is(kind: str, *words: str) -> Callable[[Result], None]:
    def check(result: Result) -> None:
        assert result.run["error"]["type"] == kind
        for word in words:
            assert word in result.run["error"]["message"]
        assert not result.rows("assistant"), "a failed call stored no assistant turn"

    return check


def no_reply(result: Result) -> None:
    assert not result.rows("assistant"), "a failed call stored no assistant turn"


def timed(kind: str) -> Callable[[Result], None]:
    def check(result: Result) -> None:
        error_is(kind)(result)
        assert result.requests == 1
        # Within about TIMEOUT (at worst 2 x TIMEOUT, see docs/providers.md), not the hang.
        assert result.seconds < 2 * TIMEOUT + 1.0

    return check


def stored_text(expected: str) -> Callable[[Result], None]:
    def check(result: Result) -> None:
        (answer,) = result.rows("assistant")
        assert answer.content == expected

    return check


def malformed_call(result: Result) -> None:
    first, last = result.rows("assistant")
    (call,) = first.tool_calls
    assert call["function"]["name"] == "lookup"
    (answer,) = result.rows("tool")
    assert answer.is_error, "a call with arguments no database stores is answered with an error"
    assert last.content == OK_TEXT
    assert result.requests == 2


def tool_answer(is_error: bool, text: str) -> Callable[[Result], None]:
    def check(result: Result) -> None:
        (answer,) = result.rows("tool")
        assert answer.is_error is is_error
        assert text in answer.content
        assert "\x00" not in answer.content
        assert result.rows("assistant")[-1].content == OK_TEXT

    return check


def refusal_outcome(backend: str) -> Outcome:
    # Ollama has no content filter; its case is a reply cut at num_predict.
    return ("completed", "length") if backend == "ollama" else ("completed", "content_filter")


def args(text: str) -> tuple[Action, ...]:
    return (reply(calls=(("call_1", "lookup", text),)),)


def tool_call(name: str) -> tuple[Action, ...]:
    return (reply(calls=(("call_1", name, "{}"),)),)


COMPLETED = ("completed", "completed")


def everywhere(reason: str, backends: tuple[str, ...] = BACKENDS) -> dict[tuple[str, str], str]:
    return {(backend, mode): reason for backend in backends for mode in MODES}


SCENARIOS: dict[str, Scenario] = {
    "429 Retry-After 0, then success": Scenario(
        actions=(status(429, "0"),), outcome=COMPLETED, check=attempts(2, [0.0])
    ),
    "429 Retry-After 3600": Scenario(
        every_time=status(429, "3600"),
        check=lambda r: (attempts(1, [])(r), error_is("RateLimitError", "MAX_RETRY_AFTER")(r)),
    ),
    "500, then success": Scenario(actions=(status(500),), outcome=COMPLETED, check=attempts(2)),
    "503, then success": Scenario(actions=(status(503),), outcome=COMPLETED, check=attempts(2)),
    "503 every time": Scenario(
        every_time=status(503),
        check=lambda r: (attempts(2)(r), error_is("ProviderUnavailableError", "HTTP 503")(r)),
    ),
    "connection reset": Scenario(
        every_time=reset,
        check=lambda r: (attempts(2)(r), error_is("ProviderUnavailableError")(r)),
    ),
    "hang": Scenario(every_time=hang, entry={"MAX_RETRIES": 0}, check=timed("ProviderTimeout")),
    "drip": Scenario(every_time=drip, entry={"MAX_RETRIES": 0}, check=timed("ProviderTimeout")),
    "truncated body": Scenario(
        every_time=truncated_body, check=error_is("ProviderUnavailableError")
    ),
    "truncated stream": Scenario(
        every_time=truncated_stream,
        modes=("stream",),
        check=error_is("ProviderUnavailableError", "ended early"),
    ),
    "invalid JSON": Scenario(
        every_time=invalid_json,
        check=lambda r: (attempts(1)(r), error_is("InvalidResponseError")(r)),
    ),
    "connection held open after the whole reply": Scenario(
        every_time=held_after_the_end,
        modes=("stream",),
        entry={"MAX_RETRIES": 0},
        outcome=COMPLETED,
        check=lambda r: (stored_text(OK_TEXT)(r), attempts(1)(r)),
    ),
    "corrupt gzip body": Scenario(
        every_time=corrupt_gzip,
        # Retried like a broken connection; a stream fails once it has begun.
        check=lambda r: (
            attempts(2 if r.mode == "plain" else 1)(r),
            error_is("ProviderUnavailableError", "decode" if r.mode == "plain" else "broke")(r),
        ),
    ),
    "JSON nested 20,000 deep": Scenario(
        every_time=deep_json,
        check=lambda r: (
            attempts(1)(r),
            error_is(
                "InvalidResponseError",
                "not a JSON object" if r.mode == "plain" else "RecursionError",
            )(r),
        ),
    ),
    "JSON missing the protocol's fields": Scenario(
        every_time=missing_fields,
        check=no_reply,
    ),
    "empty reply": Scenario(actions=(reply(""),), outcome=COMPLETED, check=stored_text("")),
    "refusal": Scenario(actions=(reply("", finish="filter"),), outcome=refusal_outcome),
    "NUL in the text": Scenario(
        actions=(reply("before\x00after"),),
        outcome=COMPLETED,
        check=stored_text("before\ufffdafter"),
    ),
    "lone surrogate in the text": Scenario(
        actions=(reply("before\ud800after"),),
        outcome=COMPLETED,
        check=stored_text("before\ufffdafter"),
    ),
    "1e400 in the text and the token count": Scenario(
        actions=(reply("It is 1e400.", usage="1e400"),),
        outcome=COMPLETED,
        check=stored_text("It is 1e400."),
    ),
    "NUL in tool-call arguments": Scenario(
        actions=args('{"city": "Pa\\u0000ris"}'),
        outcome=COMPLETED,
        check=malformed_call,
    ),
    "lone surrogate in tool-call arguments": Scenario(
        actions=args('{"city": "Pa\\ud800ris"}'),
        outcome=COMPLETED,
        check=malformed_call,
    ),
    "1e400 in tool-call arguments": Scenario(
        actions=args('{"city": 1e400}'),
        outcome=COMPLETED,
        check=malformed_call,
    ),
    "reply over MAX_REPLY_CHARS": Scenario(
        every_time=reply("x" * (MAX_REPLY_CHARS + 500)),
        check=error_is("InvalidResponseError", "MAX_REPLY_CHARS"),
    ),
    "tool raises": Scenario(
        actions=tool_call("fault_raises"),
        outcome=COMPLETED,
        check=tool_answer(True, "the tool broke"),
    ),
    "tool hangs past its timeout": Scenario(
        actions=tool_call("fault_hangs"),
        outcome=COMPLETED,
        check=tool_answer(True, "did not answer within 0.2 seconds"),
    ),
    "tool returns NUL": Scenario(
        actions=tool_call("fault_nul"),
        outcome=COMPLETED,
        check=tool_answer(False, "before\ufffdafter"),
    ),
    "tool returns a lone surrogate": Scenario(
        actions=tool_call("fault_surrogate"),
        outcome=COMPLETED,
        check=tool_answer(False, "before\ufffdafter"),
    ),
}


def cases() -> list[Any]:
    params = []
    for name, scenario in SCENARIOS.items():
        for backend in BACKENDS:
            for mode in scenario.modes:
                params.append(pytest.param(name, backend, mode, id=f"{backend}-{mode}-{name}"))
    return params


# The run, through the API --------------------------------------------------------


def start_run(
    client: APIClient, conversation_id: Any, backend: str, mode: str, text: str
) -> Result:
    began = time.monotonic()
    response = client.post(
        f"/api/conversations/{conversation_id}/runs/",
        {"message": text, "provider": backend, "stream": mode == "stream"},
        format="json",
    )
    events: list[tuple[str, dict[str, Any]]] = []
    if mode == "stream":
        body = b"".join(response.streaming_content)
        seconds = time.monotonic() - began
        assert response.status_code == 200, body
        events = parse_sse(body)
        ends = [(name, data) for name, data in events if RunEventType(name).ends_stream]
        assert len(ends) == 1, "exactly one run.* event ends the stream"
        assert ends[0] == events[-1]
        run = ends[0][1]["run"]
        assert ends[0][0] == {"completed": "run.completed", "failed": "run.failed"}[run["status"]]
    else:
        body = response.content
        seconds = time.monotonic() - began
        assert response.status_code in (201, 502), body
        data = response.json()
        if response.status_code == 502:
            assert set(data) == {"error"}
            assert set(data["error"]) == {"code", "message", "field", "details"}
            assert data["error"]["code"] == "provider_error"
            run = data["error"]["details"]["run"]
            assert run["status"] == "failed"
        else:
            run = data
    return Result(backend, mode, response.status_code, body, run, events, 0, [], seconds)


def assert_stored_conversation_valid(conversation_id: Any) -> None:
    history = load_messages(conversation_id)
    assert check_sequence(history) == ()
    for row in Message.objects.filter(conversation_id=conversation_id):
        row.full_clean()
    calls = [c.id for m in history for c in m.tool_calls or ()]
    results = [m.tool_call_id for m in history if m.role is Role.TOOL]
    assert len(set(calls)) == len(calls)
    assert sorted(calls) == sorted(results), "every call has exactly one result"


def assert_no_key_fragment(texts: list[str]) -> None:
    fragments = {SECRET[i : i + 4] for i in range(len(SECRET) - 3)}
    for text in texts:
        leaked = sorted(f for f in fragments if f in text)
        assert not leaked, f"key fragments {leaked} in {text[:300]!r}"


@pytest.mark.parametrize(("name", "backend", "mode"), cases())
def test_fault(
    name: str,
    backend: str,
    mode: str,
    fake: FakeProvider,
    configure: Configure,
    client: APIClient,
    user: User,
    caplog: pytest.LogCaptureFixture,
) -> None:
    scenario = SCENARIOS[name]
    caplog.set_level(logging.DEBUG, logger="llm_conversations")
    caplog.set_level(logging.INFO, logger="httpx")
    # "plain": an entry that does not stream, asked without a stream; "stream":
    # the default, streamed to the provider and to the client.
    entry = {"STREAM": False} if mode == "plain" else {}
    sleeps = configure(backend, **entry, **scenario.entry)
    conversation = create_conversation(owner=user, title="Faults")
    fake.play(scenario.actions, every_time=scenario.every_time)

    result = start_run(client, conversation.pk, backend, mode, "Weather in Paris?")
    result.requests, result.sleeps = len(fake.requests), list(sleeps)
    assert all(seen.protocol == backend for seen in fake.requests)
    assert all(seen.stream is (mode == "stream") for seen in fake.requests)
    # The key was sent, so a leak below would be real.
    assert any(API_KEY in value for value in fake.requests[0].headers.values())

    # 1-2: the answer and the run.
    outcome = scenario.outcome(backend) if callable(scenario.outcome) else scenario.outcome
    assert (result.run["status"], result.run["termination_reason"]) == outcome
    expected_status = 200 if mode == "stream" else (201 if outcome[0] == "completed" else 502)
    assert result.status_code == expected_status
    run = Run.objects.get(pk=result.run["id"])
    assert (run.status, run.termination_reason) == outcome
    if scenario.check is not None:
        scenario.check(result)

    # 3: the stored conversation is valid.
    assert_stored_conversation_valid(conversation.pk)

    # 4: the next run on the same conversation succeeds.
    fake.heal()
    after = start_run(client, conversation.pk, backend, mode, "And now?")
    assert (after.run["status"], after.run["termination_reason"]) == COMPLETED
    assert Message.objects.filter(run_id=after.run["id"], role="assistant").get().content == OK_TEXT
    assert_stored_conversation_valid(conversation.pk)

    # 5: no fragment of the key anywhere.
    texts = [result.body.decode(errors="replace"), after.body.decode(errors="replace")]
    for row in Message.objects.filter(conversation=conversation):
        texts += [row.content, json.dumps(row.tool_calls), json.dumps(row.metadata)]
    for stored in Run.objects.filter(conversation=conversation):
        texts += [stored.error_type, stored.error_message]
    texts.append(caplog.text)
    texts += [record.getMessage() for record in caplog.records]
    assert_no_key_fragment(texts)
