"""Budgets: limits per user (day, month) and per conversation, checked before each model call."""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal
from typing import Any

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.test import Client, override_settings
from django.utils import timezone

from llm_conversations.conversations import append_completion, create_conversation
from llm_conversations.core.completions import CompletionResponse, Usage
from llm_conversations.core.limits import Limit, Limits, Spent, limit_problems, parse_limit
from llm_conversations.exceptions import BudgetExceeded
from llm_conversations.models import ConversationSummary, Message, Run, TerminationReason
from llm_conversations.providers import OpenAIProvider
from llm_conversations.runs import ToolLoopService
from llm_conversations.runs.budgets import limits_for, spent

pytestmark = pytest.mark.django_db

REPLY = {
    "id": "chatcmpl-1",
    "model": "gpt-4o-mini",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 20, "completion_tokens": 2, "total_tokens": 22},
}


class Transport:
    """An httpx.MockTransport that records every request and answers REPLY."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return httpx.Response(200, json=REPLY)


@pytest.fixture
def transport() -> Transport:
    return Transport()


@pytest.fixture
def service(transport: Transport) -> ToolLoopService:
    client = httpx.Client(transport=httpx.MockTransport(transport))
    provider = OpenAIProvider(
        model="gpt-4o-mini", api_key="sk-test", http_client=client, streams=False
    )
    return ToolLoopService(provider)


@pytest.fixture
def user() -> Any:
    return get_user_model().objects.create_user("spender")


def spend(conversation: Any, tokens_in: int, tokens_out: int, days_ago: int = 0) -> Message:
    """Store an assistant turn that spent these tokens (priced as gpt-4o-mini)."""
    from llm_conversations.conversations import append_messages

    append_messages(conversation, [{"role": "user", "content": "q"}])
    response = CompletionResponse(
        content="a", model="gpt-4o-mini", usage=Usage(tokens_in, tokens_out)
    )
    row = append_completion(conversation, response, cost=Decimal("0.5"))
    if days_ago:
        Message.objects.filter(pk=row.pk).update(
            created_at=timezone.now() - timedelta(days=days_ago)
        )
    return row


# Limits (pure) ------------------------------------------------------------------------


def test_limit_rules() -> None:
    assert limit_problems(None, "X") == []
    assert limit_problems({"tokens": 10, "cost": "1.50"}, "X") == []
    assert limit_problems({"tokens": -1}, "X") == [
        "X['tokens'] must be a non-negative integer; got -1."
    ]
    assert limit_problems({"cost": 1.5}, "X") == [
        "X['cost'] must be a non-negative decimal in a string, e.g. '5.00'; got 1.5."
    ]
    assert limit_problems({"token": 1}, "X") == ["X has an unknown key 'token'."]
    assert limit_problems({}, "X") == [
        "X must be None or a dict with 'tokens' and/or 'cost'; got {}."
    ]
    assert parse_limit({"tokens": 5, "cost": "2"}) == Limit(5, Decimal(2))


def test_limits_judge_spent_plus_the_next_call() -> None:
    limits = Limits(daily=Limit(tokens=100), conversation=Limit(cost=Decimal("1")))
    assert limits.exceeded({"daily": Spent(90)}, Spent(10)) is None
    error = limits.exceeded({"daily": Spent(90)}, Spent(11))
    assert error is not None
    assert error.code == "budget_exceeded"
    assert error.message == (
        "the daily budget of 100 tokens would be exceeded (90 spent, about 11 more for "
        "the next call)."
    )
    assert limits.exceeded({"daily": Spent(100)}, starting=True) is not None
    assert limits.exceeded({"daily": Spent(99)}, starting=True) is None
    cost = limits.exceeded({"conversation": Spent(0, Decimal("1.0000000000"))}, starting=True)
    assert cost is not None
    assert cost.message == "the conversation's budget of 1 USD would be exceeded (1 USD spent)."


# Spent: one aggregate query ------------------------------------------------------------


def test_spent_is_one_query_for_turns_and_one_for_summaries(
    user: Any, django_assert_num_queries: Any
) -> None:
    mine = create_conversation(owner=user)
    other = create_conversation(owner=user)
    spend(mine, 100, 10)
    spend(other, 50, 5)
    spend(other, 1000, 0, days_ago=40)  # neither today nor this month
    # A summary made for the summarize strategy was a model call too.
    ConversationSummary.objects.create(
        conversation=mine,
        end_position=2,
        content="s",
        input_tokens=300,
        output_tokens=20,
        cost=Decimal("0.25"),
    )
    limits = Limits(daily=Limit(1), monthly=Limit(1), conversation=Limit(1))
    with django_assert_num_queries(2):
        used = spent(limits, user.pk, mine.pk)
    assert used["daily"] == Spent(485, Decimal("1.25"))
    assert used["monthly"].tokens == 485
    assert used["conversation"] == Spent(430, Decimal("0.75"))


# Before the provider is called ----------------------------------------------------------


@override_settings(LLM_CONVERSATIONS={"USER_DAILY_BUDGET": {"tokens": 100}})
def test_a_user_over_budget_cannot_start_a_run(
    user: Any, service: ToolLoopService, transport: Transport
) -> None:
    conversation = create_conversation(owner=user)
    spend(conversation, 90, 10)
    with pytest.raises(BudgetExceeded) as caught:
        service.start(conversation, "hello")
    assert caught.value.code == "budget_exceeded"
    assert transport.requests == []
    assert not Run.objects.exists()


@override_settings(LLM_CONVERSATIONS={"USER_DAILY_BUDGET": {"tokens": 100}})
def test_a_run_that_would_exceed_the_budget_ends_before_the_call(
    user: Any, service: ToolLoopService, transport: Transport
) -> None:
    conversation = create_conversation(owner=user)
    spend(conversation, 80, 10)  # 90 of 100: the next call's estimate goes past
    run = service.send(conversation, "hello " * 20)
    assert transport.requests == []
    assert run.status == "failed"
    assert run.termination_reason == TerminationReason.BUDGET_EXCEEDED
    assert run.error_type == "BudgetExceeded"
    assert run.error_message.startswith("the daily budget of 100 tokens would be exceeded")


def test_a_failed_run_over_budget_cannot_be_retried(
    user: Any, service: ToolLoopService, transport: Transport
) -> None:
    conversation = create_conversation(owner=user)
    with override_settings(LLM_CONVERSATIONS={"USER_DAILY_BUDGET": {"tokens": 100}}):
        spend(conversation, 80, 10)
        failed = service.send(conversation, "hello " * 20)
        assert failed.termination_reason == TerminationReason.BUDGET_EXCEEDED
        spend(conversation, 10, 0)  # now spent whole
        with pytest.raises(BudgetExceeded):
            service.retry(failed)
    failed.refresh_from_db()
    assert failed.status == "failed"
    assert failed.attempts == 1  # its first execution only
    assert transport.requests == []
    # Without the budget the same retry runs.
    assert service.retry(failed).termination_reason == TerminationReason.COMPLETED
    assert len(transport.requests) == 1


@override_settings(LLM_CONVERSATIONS={"CONVERSATION_BUDGET": {"cost": "10"}})
def test_within_budget_the_call_is_made(
    user: Any, service: ToolLoopService, transport: Transport
) -> None:
    conversation = create_conversation(owner=user)
    spend(conversation, 80, 10)
    run = service.send(conversation, "hello")
    assert len(transport.requests) == 1
    assert json.loads(transport.requests[0].content)["messages"][-1] == {
        "role": "user",
        "content": "hello",
    }
    assert run.termination_reason == TerminationReason.COMPLETED


def own_limits(user: Any) -> dict[str, Any]:
    """A BUDGET_HOOK: the user "rich" has no daily limit, others 1 token a month."""
    if user.username == "rich":
        return {"daily": None}
    return {"monthly": {"tokens": 1}}


HOOKED = {"USER_DAILY_BUDGET": {"tokens": 10}, "BUDGET_HOOK": "tests.runs.test_budgets.own_limits"}


@override_settings(LLM_CONVERSATIONS=HOOKED)
def test_the_hook_gives_each_user_their_limits(
    user: Any, service: ToolLoopService, transport: Transport
) -> None:
    rich = get_user_model().objects.create_user("rich")
    assert limits_for(rich) == Limits()
    assert limits_for(user) == Limits(daily=Limit(tokens=10), monthly=Limit(tokens=1))
    run = service.send(create_conversation(owner=rich), "hello")
    assert run.termination_reason == TerminationReason.COMPLETED
    assert len(transport.requests) == 1
    poor = service.send(create_conversation(owner=user), "hello")
    assert poor.termination_reason == TerminationReason.BUDGET_EXCEEDED
    assert len(transport.requests) == 1


def bad_hook(user: Any) -> dict[str, Any]:
    return {"weekly": {"tokens": 1}}


@override_settings(LLM_CONVERSATIONS={"BUDGET_HOOK": "tests.runs.test_budgets.bad_hook"})
def test_a_hook_returning_unknown_keys_is_a_configuration_error(user: Any) -> None:
    with pytest.raises(ImproperlyConfigured, match="unknown key 'weekly'"):
        limits_for(user)


def test_no_budget_no_query(user: Any, service: ToolLoopService) -> None:
    conversation = create_conversation(owner=user)
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        service.send(conversation, "hello")
    assert not any("SUM(" in q["sql"].upper() for q in queries.captured_queries)


@override_settings(LLM_CONVERSATIONS={"USER_MONTHLY_BUDGET": {"cost": "0.5"}})
def test_the_api_refuses_a_run_over_budget(user: Any) -> None:
    conversation = create_conversation(owner=user)
    spend(conversation, 1, 1)  # 0.5 dollars: the month's budget is spent
    client = Client()
    client.force_login(user)
    response = client.post(
        f"/api/conversations/{conversation.pk}/runs/",
        {"message": "hello"},
        content_type="application/json",
    )
    assert response.status_code == 429
    assert response.json()["error"]["code"] == "budget_exceeded"
    assert response.json()["error"]["message"] == (
        "the monthly budget of 0.5 USD would be exceeded (0.5 USD spent)."
    )
