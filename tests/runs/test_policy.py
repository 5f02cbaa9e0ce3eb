"""The run policy (RUN_POLICY) and MAX_ACTIVE_RUNS_PER_USER at the service seam."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser, User

from llm_conversations.conversations import create_conversation
from llm_conversations.exceptions import RunNotPermitted, TooManyActiveRuns
from llm_conversations.models import Conversation, Message, Run, RunStatus
from llm_conversations.runs import ToolLoopService
from llm_conversations.runs.policy import RunPolicy, permitted_providers, permitted_tools
from tests.conftest import requires_postgresql, run_together

pytestmark = pytest.mark.django_db

TOOLS = [
    "tests.support.loop_tools.get_weather",
    "tests.support.loop_tools.get_time",
    "tests.support.loop_tools.delete_file",
    "tests.support.loop_tools.pick_color",
]


class OnlyEcho(RunPolicy):
    """Provider ``echo`` with its model ``echo``, two tools, at most 4 model calls."""

    def allowed_providers(self, user: Any) -> Collection[str] | None:
        return ["echo"] if user.is_authenticated else ()

    def allowed_models(self, user: Any, provider: str) -> Collection[str] | None:
        return ["echo"]

    def allowed_tools(self, user: Any) -> Collection[str] | None:
        return ["get_weather", "get_time"]

    def max_iterations(self, user: Any) -> int | None:
        return 4


SETTINGS: dict[str, Any] = {
    "DEFAULT_PROVIDER": "echo",
    "PROVIDERS": {
        "echo": {"BACKEND": "echo", "MODEL": "echo", "MODELS": ["echo-large"]},
        "other": {"BACKEND": "echo", "MODEL": "other"},
    },
    "TOOLS": TOOLS,
}


@pytest.fixture(autouse=True)
def policy_settings(settings: Any) -> None:
    settings.LLM_CONVERSATIONS = {**SETTINGS, "RUN_POLICY": "tests.runs.test_policy.OnlyEcho"}


@pytest.fixture
def user(db: None) -> User:
    return User.objects.create_user("alice")


@pytest.fixture
def conversation(user: User) -> Conversation:
    return create_conversation(owner=user, title="Trip")


@pytest.mark.parametrize(
    ("asked", "code", "field"),
    [
        ({"provider": "other"}, "provider_not_permitted", "provider"),
        ({"model": "echo-large"}, "model_not_permitted", "model"),
        ({"tools": ["get_time", "delete_file"]}, "tool_not_permitted", "tools[1]"),
        ({"max_iterations": 5}, "max_iterations_not_permitted", "max_iterations"),
    ],
)
def test_a_start_asking_beyond_the_policy_is_refused_and_stores_nothing(
    user: User, conversation: Conversation, asked: dict[str, Any], code: str, field: str
) -> None:
    with pytest.raises(RunNotPermitted) as caught:
        ToolLoopService().start(conversation, "hello", user=user, **asked)
    assert (caught.value.code, caught.value.field) == (code, field)
    assert not Run.objects.exists()
    assert not Message.objects.exists()


def test_omitted_tools_and_limit_default_to_what_the_policy_permits(
    user: User, conversation: Conversation
) -> None:
    run = ToolLoopService().start(conversation, "hello", user=user)
    assert run.offered_tool_names == ["get_weather", "get_time"]
    assert run.max_iterations == 4
    assert (run.provider, run.model) == ("echo", "echo")


def test_what_the_policy_permits_is_started(user: User, conversation: Conversation) -> None:
    run = ToolLoopService().send(
        conversation, "hello", user=user, tools=["get_time"], max_iterations=4, model="echo"
    )
    assert run.status == RunStatus.COMPLETED


def test_without_a_user_no_policy_applies(conversation: Conversation) -> None:
    # Python callers that pass no user are trusted, as before.
    run = ToolLoopService().start(conversation, "hello", provider="other", max_iterations=20)
    assert run.offered_tool_names == [name.rsplit(".", 1)[1] for name in TOOLS]


def test_the_default_policy_allows_everything_to_authenticated_users(
    settings: Any, user: User, conversation: Conversation
) -> None:
    settings.LLM_CONVERSATIONS = SETTINGS
    run = ToolLoopService().start(
        conversation, "hi", user=user, provider="other", tools=["delete_file"], max_iterations=32
    )
    assert run.max_iterations == 32
    assert [p.name for p in permitted_providers(user)] == ["echo", "other"]
    assert permitted_tools(user, ["a", "b"]) == ["a", "b"]


def test_the_default_policy_allows_nothing_to_anonymous_users(
    settings: Any, conversation: Conversation
) -> None:
    settings.LLM_CONVERSATIONS = SETTINGS
    with pytest.raises(RunNotPermitted, match="provider 'echo'"):
        ToolLoopService().start(conversation, "hello", user=AnonymousUser())
    assert permitted_providers(AnonymousUser()) == []
    assert permitted_tools(AnonymousUser(), ["a"]) == []
    assert not Run.objects.exists()


def test_permitted_providers_show_permitted_models_and_what_each_honours(user: User) -> None:
    (echo,) = permitted_providers(user)
    assert (echo.name, echo.backend, echo.model, echo.models, echo.default) == (
        "echo",
        "echo",
        "echo",
        ("echo",),
        True,
    )
    assert echo.support.response_format is True


def test_a_retry_is_refused_when_the_policy_no_longer_permits_the_run(
    settings: Any, user: User, conversation: Conversation
) -> None:
    settings.LLM_CONVERSATIONS = SETTINGS
    run = ToolLoopService().start(conversation, "hello", user=user, provider="other")
    Run.objects.filter(pk=run.pk).update(status=RunStatus.FAILED, termination_reason="error")
    settings.LLM_CONVERSATIONS = {**SETTINGS, "RUN_POLICY": "tests.runs.test_policy.OnlyEcho"}
    with pytest.raises(RunNotPermitted) as caught:
        ToolLoopService().retry(run.pk, user=user)
    assert caught.value.code == "provider_not_permitted"
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED


# MAX_ACTIVE_RUNS_PER_USER ------------------------------------------------------


def test_a_start_over_the_active_run_limit_is_refused(settings: Any, user: User) -> None:
    settings.LLM_CONVERSATIONS = {**SETTINGS, "MAX_ACTIVE_RUNS_PER_USER": 1}
    first = create_conversation(owner=user)
    second = create_conversation(owner=user)
    ToolLoopService().start(first, "hello", user=user)  # queued: active
    with pytest.raises(TooManyActiveRuns) as caught:
        ToolLoopService().start(second, "hello", user=user)
    assert caught.value.code == "too_many_active_runs"
    assert Run.objects.count() == 1
    assert not second.messages.exists()
    # Another user's runs do not count, nor do runs started without a user.
    bob = User.objects.create_user("bob")
    ToolLoopService().start(create_conversation(owner=bob), "hi", user=bob)
    ToolLoopService().start(second, "hello")


def test_a_finished_run_frees_its_place(settings: Any, user: User) -> None:
    settings.LLM_CONVERSATIONS = {**SETTINGS, "MAX_ACTIVE_RUNS_PER_USER": 1}
    service = ToolLoopService()
    service.send(create_conversation(owner=user), "hello", user=user)
    assert service.start(create_conversation(owner=user), "hello", user=user).is_active


def test_a_retry_over_the_active_run_limit_is_refused(settings: Any, user: User) -> None:
    settings.LLM_CONVERSATIONS = {**SETTINGS, "MAX_ACTIVE_RUNS_PER_USER": 1}
    service = ToolLoopService()
    failed = service.start(create_conversation(owner=user), "hello", user=user)
    Run.objects.filter(pk=failed.pk).update(status=RunStatus.FAILED, termination_reason="error")
    service.start(create_conversation(owner=user), "hello", user=user)
    with pytest.raises(TooManyActiveRuns):
        service.retry(failed.pk, user=user)
    failed.refresh_from_db()
    assert failed.status == RunStatus.FAILED


@requires_postgresql
@pytest.mark.parametrize("round_", range(3))
def test_simultaneous_starts_of_one_user_respect_the_limit(
    transactional_db: None, settings: Any, round_: int
) -> None:
    settings.LLM_CONVERSATIONS = {**SETTINGS, "MAX_ACTIVE_RUNS_PER_USER": 2}
    user = User.objects.create_user(f"alice{round_}")
    conversations = [create_conversation(owner=user) for _ in range(12)]

    def work(n: int) -> Run:
        return ToolLoopService().start(conversations[n], "hello", user=user)

    outcomes = run_together(len(conversations), work)
    started = [o for o in outcomes if isinstance(o, Run)]
    refused = [o for o in outcomes if isinstance(o, TooManyActiveRuns)]
    assert (len(started), len(refused)) == (2, 10), outcomes
    assert Run.objects.filter(conversation__owner=user).count() == 2
    assert Message.objects.filter(conversation__owner=user).count() == 2
