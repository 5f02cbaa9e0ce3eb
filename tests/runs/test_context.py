"""Fitting a conversation to the context window: the pure fitter and the loop's use of it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
from django.contrib.auth import get_user_model
from django.test import Client, override_settings

from llm_conversations.conversations.history import load_messages
from llm_conversations.conversations.lifecycle import create_conversation
from llm_conversations.conversations.store import append_messages
from llm_conversations.core.completions import CompletionResponse, FinishReason, Usage
from llm_conversations.core.fitting import ContextFitter, ContextStrategy
from llm_conversations.core.messages import ChatMessage, Role
from llm_conversations.core.tool_calls import ToolCall
from llm_conversations.exceptions import ContextOverflow, RunStateError
from llm_conversations.models import ConversationSummary, Message, Run, TerminationReason
from llm_conversations.providers import get_provider
from llm_conversations.providers.base import CompletionRequest
from llm_conversations.providers.echo import EchoProvider
from llm_conversations.runs import ToolLoopService

WINDOW = 2_000


def long_history(rounds: int, calls: int = 3, text: str = "word " * 40) -> list[ChatMessage]:
    """A system prompt, then rounds of user turn, parallel calls, results and an answer."""
    history = [ChatMessage.system("You are helpful.")]
    for r in range(rounds):
        history.append(ChatMessage.user(f"question {r}: {text}"))
        batch = [ToolCall(f"c{r}_{i}", "lookup", {"q": f"{r}-{i}"}) for i in range(calls)]
        history.append(ChatMessage.assistant_tool_calls(batch))
        history.extend(ChatMessage.tool_result(c.id, f"result {c.id}: {text}") for c in batch)
        history.append(ChatMessage.assistant(f"answer {r}: {text}"))
    return history


def assert_valid(sent: list[ChatMessage]) -> None:
    """No split call/result group, no leading tool result after the system messages."""
    body = [m for m in sent if m.role is not Role.SYSTEM]
    assert body[0].role is Role.USER
    open_calls: set[str] = set()
    for message in body:
        if message.role is Role.TOOL:
            assert message.tool_call_id in open_calls
            open_calls.remove(message.tool_call_id)
        else:
            assert not open_calls
            open_calls = {c.id for c in message.tool_calls or ()}


# The pure fitter ---------------------------------------------------------------


def test_whole_conversation_when_it_fits() -> None:
    history = long_history(2)
    fitter = ContextFitter(10_000)
    fitter.extend(history)
    cut = fitter.fit(10, strategy=ContextStrategy.TRUNCATE)
    assert cut.start == 0
    assert cut.messages(history) == history
    assert cut.estimated == fitter.sent_tokens(0, 10)


@pytest.mark.parametrize("rounds", [5, 40, 300])
def test_truncate_keeps_groups_whole_and_fits(rounds: int) -> None:
    history = long_history(rounds, calls=5)
    fitter = ContextFitter(WINDOW)
    fitter.extend(history)
    cut = fitter.fit(50, strategy=ContextStrategy.TRUNCATE)
    sent = cut.messages(history)
    assert_valid(sent)
    assert sent[0] == history[0]  # the system message is kept
    assert cut.estimated <= WINDOW
    # The earliest start that fits: one user turn earlier does not.
    earlier = [i for i in fitter.starts() if i < cut.start]
    if earlier:
        assert fitter.sent_tokens(earlier[-1], 50) > WINDOW
    latest_user = max(i for i, m in enumerate(history) if m.role is Role.USER)
    assert cut.start <= latest_user


def test_error_strategy_refuses() -> None:
    history = long_history(30)
    fitter = ContextFitter(WINDOW)
    fitter.extend(history)
    with pytest.raises(ContextOverflow) as caught:
        fitter.fit(0, strategy=ContextStrategy.ERROR)
    assert caught.value.code == "context_overflow"


def test_latest_turn_alone_too_large_overflows_with_every_strategy() -> None:
    history = [ChatMessage.user("word " * 5_000)]
    fitter = ContextFitter(WINDOW)
    fitter.extend(history)
    for strategy in set(ContextStrategy) - {ContextStrategy.COMPACT}:
        with pytest.raises(ContextOverflow):
            fitter.fit(0, strategy=strategy, summary_budget=100)


def test_compact_starts_at_the_compacted_turn_and_leaves_the_rest_to_the_provider() -> None:
    history = long_history(30)
    fitter = ContextFitter(WINDOW)
    fitter.extend(history)
    # No compacted state yet: the whole conversation; the provider compacts it.
    assert fitter.fit(0, strategy=ContextStrategy.COMPACT).start == 0
    user = fitter.starts()[20]
    cut = fitter.fit(0, strategy=ContextStrategy.COMPACT, compacted=user)
    assert (cut.start, cut.summary_end) == (user, None)
    sent = cut.messages(history)
    assert sent[0] == history[0]  # the system prompt survives
    assert sent[1:] == history[user:]


def test_summary_is_reused_until_more_must_be_dropped() -> None:
    history = long_history(30)
    fitter = ContextFitter(WINDOW)
    fitter.extend(history)
    first = fitter.fit(0, strategy=ContextStrategy.SUMMARIZE, summary_budget=100)
    assert first.summary_end == first.start > 0
    # Half the window is left for later rounds: the same summary fits again.
    history += long_history(1)[1:]
    fitter.extend(history)
    again = fitter.fit(
        0,
        strategy=ContextStrategy.SUMMARIZE,
        summary_end=first.start,
        summary_tokens=100,
        summary_budget=100,
    )
    assert again.start == first.start
    assert_valid(again.messages(history, ChatMessage.system("summary")))


def test_extend_counts_only_new_messages() -> None:
    counted: list[str] = []

    def count(text: str) -> int:
        counted.append(text)
        return len(text)

    history = long_history(3)
    fitter = ContextFitter(WINDOW, count)
    fitter.extend(history)
    before = len(counted)
    fitter.extend(history)
    assert len(counted) == before
    history.append(ChatMessage.user("more"))
    fitter.extend(history)
    assert counted[before:] == ["more"]


# The loop ------------------------------------------------------------------------


class RecordingEcho(EchoProvider):
    """The echo backend, remembering what each call sent."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sent: list[tuple[ChatMessage, ...]] = []

    def send(self, request: CompletionRequest) -> CompletionResponse:
        self.sent.append(request.messages)
        return super().send(request)

    def send_stream(self, request: CompletionRequest) -> Iterator[Any]:
        self.sent.append(request.messages)
        return super().send_stream(request)


class StubSummarizer(EchoProvider):
    """Answers every call with a short summary and counts the calls."""

    calls: ClassVar[list[str]] = []

    def send(self, request: CompletionRequest) -> CompletionResponse:
        StubSummarizer.calls.append(request.messages[-1].content)
        return self.completion(
            content=f"summary #{len(StubSummarizer.calls)}",
            tool_calls=(),
            finish_reason=FinishReason.STOP,
            usage=Usage(input_tokens=1000, output_tokens=5),
            model=self.model,
            raw={},
            raw_finish_reason="stop",
        )


def providers(strategy: str | None, window: int = WINDOW) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "BACKEND": "tests.runs.test_context.RecordingEcho",
        "MODEL": "echo",
        "MODEL_INFO": {"echo": {"context_window": window}},
    }
    if strategy is not None:
        entry["CONTEXT_STRATEGY"] = strategy
    return {
        "PROVIDERS": {
            "default": entry,
            "summarizer": {"BACKEND": "tests.runs.test_context.StubSummarizer", "MODEL": "stub"},
        },
        "SUMMARY_PROVIDER": "summarizer",
    }


@pytest.fixture(autouse=True)
def _reset_summaries() -> None:
    StubSummarizer.calls.clear()


def conversation_of(rounds: int) -> Any:
    conversation = create_conversation()
    append_messages(conversation, long_history(rounds))
    return conversation


@pytest.mark.django_db
@pytest.mark.parametrize("strategy", ["truncate", "summarize"])
def test_loop_fits_long_conversations(strategy: str) -> None:
    with override_settings(LLM_CONVERSATIONS=providers(strategy)):
        conversation = conversation_of(60)
        stored = load_messages(conversation.pk)
        run = ToolLoopService().send(conversation, "and now?")
        provider = get_provider("default")
        assert isinstance(provider, RecordingEcho)
    assert run.termination_reason == TerminationReason.COMPLETED
    sent = list(provider.sent[-1])
    assert_valid(sent)
    assert sent[-1] == ChatMessage.user("and now?")
    assert run.context_first_position is not None
    assert run.context_first_position > 0
    assert (
        sent[-1 - (len(stored) - run.context_first_position)] == stored[run.context_first_position]
    )
    assert run.context_estimated_tokens is not None
    assert run.context_estimated_tokens <= WINDOW
    assert run.context_reported_tokens == sum(len(m.content) for m in sent)
    # The stored conversation is whole.
    assert load_messages(conversation.pk)[: len(stored)] == stored
    if strategy == "summarize":
        summary = ConversationSummary.objects.get()
        assert run.context_summary_id == summary.pk
        assert summary.end_position == run.context_first_position
        assert sent[1] == ChatMessage.system(
            f"Summary of the first {summary.end_position} messages of this conversation:\n"
            "summary #1"
        )
        assert len(StubSummarizer.calls) == 1
    else:
        assert run.context_summary_id is None
        assert not ConversationSummary.objects.exists()


@pytest.mark.django_db
def test_error_strategy_ends_the_run_before_calling() -> None:
    with override_settings(LLM_CONVERSATIONS=providers("error")):
        conversation = conversation_of(60)
        run = ToolLoopService().send(conversation, "and now?")
        provider = get_provider("default")
        assert isinstance(provider, RecordingEcho)
    assert provider.sent == []
    assert run.termination_reason == TerminationReason.CONTEXT_OVERFLOW
    assert run.error_type == "ContextOverflow"
    assert "context window" in run.error_message


@pytest.mark.django_db
def test_run_strategy_overrides_the_entry() -> None:
    with override_settings(LLM_CONVERSATIONS=providers(None)):
        conversation = conversation_of(60)
        run = ToolLoopService().send(conversation, "and now?", context_strategy="error")
        assert run.context_strategy == "error"
        assert run.termination_reason == TerminationReason.CONTEXT_OVERFLOW
        with pytest.raises(RunStateError) as caught:
            ToolLoopService().start(conversation, "x", context_strategy="shrink")
        assert (caught.value.code, caught.value.field) == (
            "invalid_context_strategy",
            "context_strategy",
        )


@pytest.mark.django_db
def test_no_strategy_sends_everything() -> None:
    with override_settings(LLM_CONVERSATIONS=providers(None)):
        conversation = conversation_of(60)
        run = ToolLoopService().send(conversation, "and now?")
        provider = get_provider("default")
        assert isinstance(provider, RecordingEcho)
    assert len(provider.sent[-1]) == Message.objects.filter(conversation=conversation).count() - 1
    assert run.context_first_position is None


@pytest.mark.django_db
def test_summary_reused_across_rounds_and_runs() -> None:
    settings = providers("summarize")
    with override_settings(LLM_CONVERSATIONS=settings):
        conversation = conversation_of(60)
        service = ToolLoopService()
        # A tool round: the summary made for the first call serves the second.
        calls = json.dumps({"tool_calls": [{"function": {"name": "missing", "arguments": "{}"}}]})
        first = service.send(conversation, calls)
        assert first.iterations == 2
        assert len(StubSummarizer.calls) == 1
        for _ in range(3):
            later = service.send(conversation, "short question")
        assert len(StubSummarizer.calls) == 1
        assert later.context_summary_id == first.context_summary_id
        # Enough new turns that the kept part no longer fits: the summary is extended
        # from the previous one, once.
        append_messages(conversation, long_history(40)[1:])
        extended = service.send(conversation, "and now?")
    assert len(StubSummarizer.calls) == 2
    assert StubSummarizer.calls[1].startswith("Summary so far:\nsummary #1")
    assert ConversationSummary.objects.count() == 2
    assert extended.context_first_position > first.context_first_position  # type: ignore[operator]


@pytest.mark.django_db
def test_a_spent_budget_stops_the_run_before_the_summary_is_asked_for() -> None:
    user = get_user_model().objects.create_user("summarized")
    settings = {**providers("summarize"), "CONVERSATION_BUDGET": {"tokens": 1000}}
    with override_settings(LLM_CONVERSATIONS=settings):
        conversation = create_conversation(owner=user)
        append_messages(conversation, long_history(60))
        run = ToolLoopService().start(conversation, "short question")
        # Spent meanwhile (another run): the budget is now reached.
        Message.objects.filter(conversation=conversation, role="assistant").update(input_tokens=600)
        ended = ToolLoopService().execute(run)
    assert (ended.status, ended.termination_reason) == ("failed", "budget_exceeded")
    assert StubSummarizer.calls == []
    assert ConversationSummary.objects.count() == 0


@pytest.mark.django_db
def test_run_api_takes_a_context_strategy() -> None:
    user = get_user_model().objects.create_user("fitting-user")
    client = Client()
    client.force_login(user)
    with override_settings(LLM_CONVERSATIONS=providers(None)):
        conversation = create_conversation(owner=user)
        append_messages(conversation, long_history(60))
        response = client.post(
            f"/api/conversations/{conversation.pk}/runs/",
            {"message": "hi", "context_strategy": "truncate"},
            content_type="application/json",
        )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["fitting"]["strategy"] == "truncate"
    assert body["fitting"]["first_position"] > 0
    assert Run.objects.get().context_strategy == "truncate"


@pytest.mark.django_db
def test_summarize_needs_a_summary_provider() -> None:
    settings = {**providers(None), "SUMMARY_PROVIDER": None}
    with override_settings(LLM_CONVERSATIONS=settings), pytest.raises(RunStateError) as caught:
        ToolLoopService().start(create_conversation(), "x", context_strategy="summarize")
    assert (caught.value.code, caught.value.field) == (
        "summary_provider_missing",
        "context_strategy",
    )
    assert not Run.objects.exists()


@pytest.mark.django_db
def test_a_run_strategy_needs_a_known_context_window() -> None:
    settings = providers(None)
    del settings["PROVIDERS"]["default"]["MODEL_INFO"]
    with override_settings(LLM_CONVERSATIONS=settings), pytest.raises(RunStateError) as caught:
        ToolLoopService().start(create_conversation(), "x", context_strategy="truncate")
    assert (caught.value.code, caught.value.field) == (
        "context_window_unknown",
        "context_strategy",
    )
    assert not Run.objects.exists()


@pytest.mark.django_db
def test_streamed_runs_are_fitted_too() -> None:
    with override_settings(LLM_CONVERSATIONS=providers("truncate")):
        conversation = conversation_of(60)
        service = ToolLoopService()
        events = list(service.events(service.start(conversation, "and now?")))
        provider = get_provider("default")
        assert isinstance(provider, RecordingEcho)
    run = Run.objects.get()
    assert type(events[-1]).__name__ == "RunCompleted"
    sent = list(provider.sent[-1])
    assert_valid(sent)
    assert run.context_first_position
    assert len(sent) < len(load_messages(conversation.pk))


@pytest.mark.django_db
def test_the_stored_summary_and_the_anchor_are_read_once_per_execution(
    django_assert_num_queries: Any,
) -> None:
    from llm_conversations.core.parameters import RunParameters
    from llm_conversations.runs.context_window import ContextWindow

    with override_settings(LLM_CONVERSATIONS=providers("summarize")):
        conversation = conversation_of(60)
        run = ToolLoopService().send(conversation, "first")
        assert len(StubSummarizer.calls) == 1
        history = load_messages(conversation.pk)
        window = ContextWindow.for_run(run, "echo", RunParameters())
        assert window is not None
        with django_assert_num_queries(2):  # the summary, the earlier call's usage
            window.messages(history, [], RunParameters())
        history.append(ChatMessage.assistant("more"))
        history.append(ChatMessage.user("again"))
        with django_assert_num_queries(0):
            window.messages(history, [], RunParameters())
    assert len(StubSummarizer.calls) == 1


@pytest.mark.django_db
def test_the_first_call_of_a_run_is_anchored_on_the_conversations_last_call() -> None:
    from llm_conversations.conversations import append_completion
    from llm_conversations.core.completions import CompletionResponse as Reply
    from llm_conversations.core.parameters import RunParameters
    from llm_conversations.runs.context_window import ContextWindow

    with override_settings(LLM_CONVERSATIONS=providers("truncate", window=100_000)):
        conversation = create_conversation(messages=long_history(5))
        history = load_messages(conversation.pk)
        fitter = ContextFitter(100_000)
        fitter.extend(history)
        sent_then = fitter.sent_tokens(0, 3)  # REPLY_OVERHEAD: no tools, no instructions
        reported = sent_then + 40  # the provider counted 40 more than estimated
        append_completion(conversation, Reply(content="ok", usage=Usage(reported, 2)))
        run = ToolLoopService().start(conversation, "next question")
        history = load_messages(conversation.pk)
        window = ContextWindow.for_run(run, "echo", RunParameters())
        assert window is not None
        window.messages(history, [], RunParameters())
    assert window.cut is not None
    fitter.extend(history)
    # The report plus the estimate of what came after the call it answered.
    assert window.cut.estimated == reported + fitter.tokens(len(history) - 2)
    assert window.cut.raw == fitter.sent_tokens(0, 3)


@pytest.mark.django_db
def test_compact_on_a_protocol_that_cannot_compact_summarizes() -> None:
    with override_settings(LLM_CONVERSATIONS=providers("compact")):
        conversation = conversation_of(60)
        run = ToolLoopService().send(conversation, "and now?")
    assert run.termination_reason == TerminationReason.COMPLETED
    summary = ConversationSummary.objects.get()
    assert run.context_summary_id == summary.pk
    assert len(StubSummarizer.calls) == 1


@pytest.mark.django_db
def test_a_run_cannot_choose_compact() -> None:
    with (
        override_settings(LLM_CONVERSATIONS=providers(None)),
        pytest.raises(RunStateError) as caught,
    ):
        ToolLoopService().start(conversation_of(1), "hi", context_strategy="compact")
    assert caught.value.code == "invalid_context_strategy"
