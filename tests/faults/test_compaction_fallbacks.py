"""A compacting run's call answered by a fallback of another protocol, over real sockets.

The run's entry ``primary`` (Anthropic, ``compact``) fails with 503; its
fallback ``backup`` (OpenAI Chat Completions) cannot read Anthropic's compacted
state, so it is sent the history fitted anew: whole when it fits, else summarized
(or truncated), never the turns after the compacted one alone.
"""

from __future__ import annotations

from typing import Any

import pytest

from llm_conversations.conversations import create_conversation
from llm_conversations.conversations.store import append_messages
from llm_conversations.core.messages import ChatMessage, Reasoning, ReasoningKind
from llm_conversations.models import Conversation, Run
from llm_conversations.runs import ToolLoopService

from .server import OK_TEXT, FakeProvider
from .test_faults import status

pytestmark = pytest.mark.django_db

SYSTEM = "You are terse."
STATE = Reasoning("anthropic", ReasoningKind.COMPACTION, text="The user asked about q0 and q1.")
WORDS = " about the weather" * 120  # ~540 tokens a turn


def compacted_conversation() -> Conversation:
    """System, then two rounds, the second answered with Anthropic's compacted state,
    then one more round: a compacting call starts at ``q1`` (position 3)."""
    conversation = create_conversation()
    append_messages(
        conversation,
        [
            ChatMessage.system(SYSTEM),
            ChatMessage.user("q0" + WORDS),
            ChatMessage.assistant("a0" + WORDS),
            ChatMessage.user("q1" + WORDS),
            ChatMessage.assistant("a1", reasoning=[STATE]),
            ChatMessage.user("q2" + WORDS),
            ChatMessage.assistant("a2" + WORDS),
        ],
    )
    return conversation


def configure(
    entries: Any, fake: FakeProvider, backup: FakeProvider, window: int, **more: Any
) -> None:
    entries(
        backup_entry={"BACKEND": "openai", "BASE_URL": backup.base_urls()["openai"]},
        BACKEND="anthropic",
        BASE_URL=fake.base_urls()["anthropic"],
        CONTEXT_STRATEGY="compact",
        MODEL_INFO={"fault-model": {"context_window": window, "max_output_tokens": 100}},
        **more,
    )


def contents(body: dict[str, Any]) -> list[str]:
    return [m["content"][:2] for m in body["messages"] if m["role"] != "system"]


def test_a_fallback_of_another_protocol_is_sent_the_whole_history_when_it_fits(
    entries: Any, fake: FakeProvider, backup: FakeProvider
) -> None:
    configure(entries, fake, backup, window=100_000)
    conversation = compacted_conversation()
    fake.play([], every_time=status(503))

    run = ToolLoopService().send(conversation, "q3")

    assert (run.termination_reason, run.answered_by) == ("completed", "backup")
    primary = fake.requests[-1].body
    # The run's own entry started at the compacted turn's user turn, with the state.
    assert [m["content"][0]["text"][:2] for m in primary["messages"][:1]] == ["q1"]
    assert {"type": "compaction", "content": STATE.text} in primary["messages"][1]["content"]
    # The fallback reads no compacted state: it gets every turn, the earlier ones too.
    (sent,) = [seen.body for seen in backup.requests]
    assert contents(sent) == ["q0", "a0", "q1", "a1", "q2", "a2", "q3"]
    assert STATE.text not in str(sent)
    assert sent["messages"][0] == {"role": "system", "content": SYSTEM}
    # The run records what the call that answered sent.
    assert Run.objects.get(pk=run.pk).context_first_position == 0

    # Once its entry answers again, the compacted state is what it reads.
    fake.heal()
    again = ToolLoopService().send(conversation, "q4")
    assert (again.answered_by, Run.objects.get(pk=again.pk).context_first_position) == (
        "primary",
        3,
    )
    assert fake.requests[0].body["messages"][-1]["content"][0]["text"] == "q4"


def test_a_fallback_is_sent_a_summary_of_what_does_not_fit(
    entries: Any, fake: FakeProvider, backup: FakeProvider, settings: Any
) -> None:
    # Room for the latest rounds only: the earlier ones go into a summary, made by backup.
    configure(entries, fake, backup, window=2_500)
    settings.LLM_CONVERSATIONS = {**settings.LLM_CONVERSATIONS, "SUMMARY_PROVIDER": "backup"}
    conversation = compacted_conversation()
    fake.play([], every_time=status(503))

    run = ToolLoopService().send(conversation, "q3")

    assert (run.termination_reason, run.answered_by) == ("completed", "backup")
    summarize, sent = (seen.body for seen in backup.requests)
    assert "q0" in summarize["messages"][-1]["content"]
    first = Run.objects.get(pk=run.pk).context_first_position
    assert first is not None
    assert first > 1
    assert sent["messages"][0] == {"role": "system", "content": SYSTEM}
    assert sent["messages"][1] == {
        "role": "system",
        "content": f"Summary of the first {first} messages of this conversation:\n{OK_TEXT}",
    }
    assert "q0" not in contents(sent)
    assert contents(sent)[-1] == "q3"
    assert STATE.text not in str(sent)
