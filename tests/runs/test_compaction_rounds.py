"""A 200-round conversation under the ``compact`` strategy, on each provider that
compacts, against a provider on 127.0.0.1 that compacts as it does: every stored
turn stays, every request fits the window, and each compacted state goes back to
the provider exactly as it came, with the system prompt and the instructions."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import override_settings

from llm_conversations.conversations.history import load_messages
from llm_conversations.conversations.lifecycle import create_conversation
from llm_conversations.conversations.store import append_messages
from llm_conversations.core.messages import ChatMessage, Reasoning, ReasoningKind, Role
from llm_conversations.models import Message, Run
from llm_conversations.runs import ToolLoopService
from tests.support.compacting_server import compacting_server, read_tokens

ROUNDS = 200
WINDOW = 6_000  # tokens
TRIGGER = 3_000  # the provider compacts past this many
SYSTEM = "You are a careful assistant."
INSTRUCTIONS = "Answer in one line."
TEXT = "words of the question " * 12


@dataclass(frozen=True)
class Wire:
    """Where one protocol keeps what a request sends, and how it asks to compact."""

    backend: str
    base_path: str
    turns: str  # the key of the turns or items
    options: dict[str, Any]

    def system(self, body: dict[str, Any]) -> str:
        return str(body["system" if self.backend == "anthropic" else "instructions"])

    def state(self, body: dict[str, Any], start: int) -> dict[str, Any]:
        """The compacted state a request sends at ``start``, as the wire has it."""
        entry: dict[str, Any] = body[self.turns][start]
        return entry["content"][0] if self.backend == "anthropic" else entry

    def sent(self, part: Reasoning) -> dict[str, Any]:
        """What a stored compaction part must go back as."""
        if self.backend == "anthropic":
            return {"type": "compaction", "content": part.text}
        return {"type": "compaction", **json.loads(part.data or "")}


ANTHROPIC = Wire(
    "anthropic",
    "",
    "messages",
    {
        "cache": False,
        "context_management": {
            "edits": [
                {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": TRIGGER}}
            ]
        },
    },
)
RESPONSES = Wire(
    "openai_responses",
    "/v1",
    "input",
    {"cache": False, "context_management": [{"type": "compaction", "compact_threshold": TRIGGER}]},
)


def entry(wire: Wire, base_url: str) -> dict[str, Any]:
    return {
        "PROVIDERS": {
            "default": {
                "BACKEND": wire.backend,
                "MODEL": "model-test",
                "API_KEY": "k",
                "BASE_URL": base_url + wire.base_path,
                "STREAM": False,
                "MAX_RETRIES": 0,
                "MODEL_INFO": {"model-test": {"context_window": WINDOW}},
                "CONTEXT_STRATEGY": "compact",
                "OPTIONS": wire.options,
            }
        }
    }


@pytest.mark.django_db
@pytest.mark.parametrize("wire", [ANTHROPIC, RESPONSES], ids=lambda w: w.backend)
def test_two_hundred_rounds_compacted_by_the_provider(wire: Wire) -> None:
    conversation = create_conversation()
    append_messages(conversation, [ChatMessage.system(SYSTEM)])
    with (
        compacting_server() as server,
        override_settings(LLM_CONVERSATIONS=entry(wire, server.base_url)),
    ):
        for round_ in range(ROUNDS):
            run = ToolLoopService().send(
                conversation, f"question {round_}: {TEXT}", instructions=INSTRUCTIONS
            )
            assert run.termination_reason == "completed", run.error_message
    assert len(server.requests) == ROUNDS
    assert len(server.compactions) >= 5
    stored = load_messages(conversation.pk)
    # Every stored turn is still there, in order, none replaced.
    assert len(stored) == 1 + 2 * ROUNDS
    assert sum(len(m.content) for m in stored) // 4 > 2 * WINDOW  # whole, it would not fit
    assert stored[0] == ChatMessage.system(SYSTEM)
    assert [m.content for m in stored[1::2]] == [f"question {r}: {TEXT}" for r in range(ROUNDS)]
    assert [m.content for m in stored[2::2]] == [f"answer {r + 1}" for r in range(ROUNDS)]
    states = [
        part
        for message in stored
        for part in message.reasoning or ()
        if part.kind is ReasoningKind.COMPACTION
    ]
    assert len(states) == len(server.compactions)
    assert {part.provider for part in states} == {wire.backend}
    latest: Reasoning | None = None
    for index, body in enumerate(server.requests):
        # The system prompt and the run's instructions survive every compaction.
        assert wire.system(body) == f"{INSTRUCTIONS}\n\n{SYSTEM}"
        start, tokens = read_tokens(body[wire.turns])
        assert len(json.dumps(body)) // 4 <= WINDOW  # within the window, as sent
        assert tokens <= TRIGGER + 200  # what the provider reads stays near its trigger
        if latest is None:
            assert start == 0
        else:
            # The latest state goes back verbatim, right after the user turn (and,
            # for OpenAI, the message) it came with: nothing before that is sent.
            assert start == (1 if wire.backend == "anthropic" else 2)
            assert wire.state(body, start) == wire.sent(latest)
        reply = stored[2 + 2 * index]
        made = [p for p in reply.reasoning or () if p.kind is ReasoningKind.COMPACTION]
        latest = made[-1] if made else latest
    # The run records where the compaction applied: the user turn the state answered.
    last = Run.objects.filter(conversation=conversation).order_by("-created_at").first()
    assert last is not None
    assert last.context_first_position
    first_sent = Message.objects.get(
        conversation=conversation, position=last.context_first_position
    )
    assert first_sent.role == Role.USER
