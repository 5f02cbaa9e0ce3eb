"""``manage.py chat``: lines from stdin become stored turns; pauses are decided on stdin."""

from __future__ import annotations

import json
import logging
from decimal import Decimal
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import override_settings

from llm_conversations.conversations import load_messages
from llm_conversations.models import Conversation, Message, Run

pytestmark = pytest.mark.django_db

TOOLS = [
    "tests.support.loop_tools.get_weather",
    "tests.support.loop_tools.get_time",
    "tests.support.loop_tools.fail",
    "tests.support.loop_tools.delete_file",
]


@pytest.fixture(autouse=True)
def echo_settings() -> Any:
    config = {
        "DEFAULT_PROVIDER": "echo",
        "PROVIDERS": {"echo": {"BACKEND": "echo", "MODEL": "echo-1"}},
        "TOOLS": TOOLS,
    }
    with override_settings(LLM_CONVERSATIONS=config):
        yield


def calls(*items: tuple[str, dict[str, Any]]) -> str:
    return json.dumps(
        {
            "tool_calls": [
                {"type": "function", "function": {"name": name, "arguments": arguments}}
                for name, arguments in items
            ]
        }
    )


@pytest.fixture(autouse=True)
def terminal_user(db: None) -> User:
    return User.objects.create_user("terminal")


def chat(*lines: str, **options: Any) -> tuple[str, str]:
    """Run the command on ``lines``; a new conversation is the ``terminal`` user's."""
    if "conversation" not in options:
        options.setdefault("user", "terminal")
    out, err = StringIO(), StringIO()
    stdin = StringIO("".join(line + "\n" for line in lines))
    call_command("chat", stdin=stdin, stdout=out, stderr=err, **options)
    return out.getvalue(), err.getvalue()


def test_new_conversation_stores_every_turn_and_prints_the_transcript() -> None:
    weather = calls(("get_weather", {"city": "Paris"}), ("fail", {}))
    out, err = chat("Hello there", "", weather, "/quit", "never sent")
    conversation = Conversation.objects.get()
    assert f"New conversation {conversation.pk}" in out
    assert "tools: get_weather, get_time, fail, delete_file" in out
    assert "you> Hello there\nassistant> Hello there\n" in out
    assert '  tool call get_weather({"city":"Paris"})' in out
    assert "  result of get_weather [" in out
    assert '"city": "Paris"' in out
    assert "  error of fail [" in out
    assert "RuntimeError: disk on fire" in out
    assert "assistant> Tool results: get_weather returned" in out
    assert f"Conversation {conversation.pk}: 7 message(s) stored." in out
    assert err == ""
    history = load_messages(conversation)
    assert [m.role for m in history] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    assert history[0].content == "Hello there"
    assert history[5].is_error
    assert not Message.objects.filter(content="never sent").exists()
    assert Run.objects.filter(conversation=conversation, status="completed").count() == 2
    assert set(Message.objects.filter(role="assistant").values_list("model", flat=True)) == {
        "echo-1"
    }


def test_eof_ends_the_chat() -> None:
    out, _ = chat("one", "two")
    assert out.count("assistant> ") == 2
    assert Conversation.objects.get().message_count == 4


def test_approval_on_stdin_runs_the_tool() -> None:
    delete = calls(("delete_file", {"path": "/tmp/report.txt"}))
    out, _ = chat(delete, "maybe", "y", "/quit")
    assert "delete_file needs approval" in out
    assert out.count("approve? [y/n] ") == 2  # an unclear answer asks again
    assert "result of delete_file" in out
    assert "deleted /tmp/report.txt" in out
    run = Run.objects.get()
    assert (run.status, list(run.decisions.values())) == ("completed", ["approved"])
    assert [m.role for m in load_messages(run.conversation_id)] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]


def test_denial_on_stdin_answers_with_an_error() -> None:
    delete = calls(("delete_file", {"path": "/tmp/report.txt"}))
    out, _ = chat(delete, "n")
    assert "error of delete_file" in out
    assert "denied" in out
    tool_turn = Message.objects.get(role="tool")
    assert tool_turn.is_error
    assert Run.objects.get().status == "completed"


def test_eof_during_approval_leaves_the_run_waiting_and_continue_resumes_it() -> None:
    delete = calls(("delete_file", {"path": "/tmp/report.txt"}))
    out, _ = chat(delete)
    conversation = Conversation.objects.get()
    assert f"chat --conversation {conversation.pk}" in out
    assert Run.objects.get().status == "requires_action"
    out, _ = chat("yes", "/quit", conversation=str(conversation.pk))
    assert f"Continuing conversation {conversation.pk} (2 message(s) stored)" in out
    assert "The last run is waiting for a decision." in out
    assert "result of delete_file" in out
    assert Run.objects.get().status == "completed"
    assert Conversation.objects.count() == 1


def test_a_new_conversation_needs_a_user_and_nothing_is_stored_without_one() -> None:
    with pytest.raises(CommandError, match="--user is required for a new conversation"):
        chat("hello", user=None)
    assert not Conversation.objects.exists()
    chat("hello")
    conversation = Conversation.objects.get()
    assert conversation.owner is not None
    assert conversation.owner.get_username() == "terminal"


def test_continuing_without_user_chats_as_the_owner_and_their_policy_applies(
    terminal_user: User,
) -> None:
    chat("first")
    conversation = Conversation.objects.get()
    config = {
        "DEFAULT_PROVIDER": "echo",
        "PROVIDERS": {"echo": {"BACKEND": "echo", "MODEL": "echo"}},
        "TOOLS": TOOLS,
        "RUN_POLICY": "tests.runs.test_policy.OnlyEcho",
    }
    with override_settings(LLM_CONVERSATIONS=config):
        chat("second", conversation=str(conversation.pk))
    latest = Run.objects.latest("created_at")
    # OnlyEcho's tools and limit: the owner's policy, as with --user.
    assert (latest.offered_tool_names, latest.max_iterations) == (["get_weather", "get_time"], 4)
    assert Conversation.objects.get().owner == terminal_user


def test_continue_appends_to_the_given_conversation() -> None:
    out, _ = chat("first")
    conversation = Conversation.objects.get()
    out, _ = chat("second", conversation=str(conversation.pk))
    assert "New conversation" not in out
    assert [m.content for m in load_messages(conversation)] == [
        "first",
        "first",
        "second",
        "second",
    ]


def test_failed_run_is_reported_and_the_chat_goes_on() -> None:
    out, err = chat(calls(("", {})), "still here")
    assert "Run failed: InvalidRequestError" in err
    assert "assistant> still here" in out
    assert list(Run.objects.order_by("created_at").values_list("status", flat=True)) == [
        "failed",
        "completed",
    ]


def test_bad_options_are_command_errors() -> None:
    with pytest.raises(CommandError, match="No provider named 'nope'"):
        chat("x", provider="nope")
    with pytest.raises(CommandError, match="No conversation with id 'abc'"):
        chat("x", conversation="abc")
    assert not Message.objects.exists()


def test_provider_option_picks_a_configured_provider() -> None:
    config = {
        "DEFAULT_PROVIDER": "echo",
        "PROVIDERS": {
            "echo": {"BACKEND": "echo", "MODEL": "echo-1"},
            "other": {"BACKEND": "echo", "MODEL": "echo-2"},
        },
        "TOOLS": TOOLS,
    }
    with override_settings(LLM_CONVERSATIONS=config):
        out, _ = chat("hi", provider="other")
    assert "Provider: other (echo, model echo-2)" in out
    run = Run.objects.get()
    assert (run.provider, run.model) == ("other", "echo-2")
    reply = Message.objects.get(role="assistant")
    assert reply.model == "echo-2"


def test_busy_conversation_is_refused_without_ending() -> None:
    chat("first")
    conversation = Conversation.objects.get()
    # Another process's run is still executing.
    Run.objects.create(conversation=conversation, status="running")
    _out, err = chat("second", "third", conversation=str(conversation.pk))
    assert err.count("Not sent: another run of this conversation is still active.") == 2
    assert [m.content for m in load_messages(conversation)] == ["first", "first"]


def test_run_parameter_flags_apply_to_every_run(tmp_path: Any) -> None:
    schema = tmp_path / "city.json"
    schema.write_text(json.dumps({"type": "object", "properties": {"city": {"type": "string"}}}))
    settings = {
        "DEFAULT_PROVIDER": "echo",
        "PROVIDERS": {"echo": {"BACKEND": "echo", "MODEL": "echo-1", "MODELS": ["echo-2"]}},
    }
    with override_settings(LLM_CONVERSATIONS=settings):
        out, err = chat(
            '{"city": "Oslo"}',
            model="echo-2",
            instructions="Answer in JSON.",
            temperature=0.3,
            max_output_tokens=40,
            reasoning_effort="low",
            response_format=str(schema),
        )
    assert err == ""
    assert "(echo, model echo-2)" in out
    assert 'parsed: {"city": "Oslo"}' in out
    run = Run.objects.get()
    assert (run.model, run.instructions) == ("echo-2", "Answer in JSON.")
    assert run.parameters == {
        "model": "echo-2",
        "temperature": 0.3,
        "max_output_tokens": 40,
        "reasoning_effort": "low",
        "response_format": json.loads(schema.read_text()),
    }


def test_bad_run_parameter_flags_are_command_errors(tmp_path: Any) -> None:
    with pytest.raises(CommandError, match=r"^--model: provider 'echo' does not allow model 'x'"):
        chat("hi", model="x")
    with pytest.raises(CommandError, match=r"^--temperature: temperature must be between 0 and 2"):
        chat("hi", temperature=3.0)
    missing = tmp_path / "missing.json"
    with pytest.raises(CommandError, match=r"^--response-format: cannot read"):
        chat("hi", response_format=str(missing))
    (tmp_path / "list.json").write_text("[]")
    with pytest.raises(CommandError, match=r"^--response-format: response_format must be"):
        chat("hi", response_format=str(tmp_path / "list.json"))
    assert not Run.objects.exists()


def test_a_priced_run_prints_its_cost_and_an_unpriced_one_does_not() -> None:
    out, _ = chat("Hello", "/quit")
    assert "cost" not in out
    priced = {
        "DEFAULT_PROVIDER": "echo",
        "PROVIDERS": {
            "echo": {
                "BACKEND": "echo",
                "MODEL": "echo-1",
                "MODEL_INFO": {"echo-1": {"prices": {"input": "1000", "output": "3000"}}},
            }
        },
        "TOOLS": TOOLS,
    }
    with override_settings(LLM_CONVERSATIONS=priced):
        out, _ = chat("Hello", "/quit")
    # 5 characters in and out at 1000 and 3000 dollars per million.
    assert "(run cost: 0.02 USD)" in out
    assert Run.objects.latest("created_at").cost == Decimal("0.02")


def test_user_option_owns_the_conversation_and_applies_the_run_policy() -> None:
    alice = User.objects.create_user("alice")
    User.objects.create_user("bob")
    config = {
        "DEFAULT_PROVIDER": "echo",
        "PROVIDERS": {
            "echo": {"BACKEND": "echo", "MODEL": "echo"},
            "other": {"BACKEND": "echo", "MODEL": "other"},
        },
        "TOOLS": TOOLS,
        "RUN_POLICY": "tests.runs.test_policy.OnlyEcho",
    }
    with override_settings(LLM_CONVERSATIONS=config):
        chat("hi", user="alice")
        conversation = Conversation.objects.get()
        assert conversation.owner == alice
        run = Run.objects.get()
        # The policy's tools and limit, not every configured one.
        assert (run.offered_tool_names, run.max_iterations) == (["get_weather", "get_time"], 4)
        _out, err = chat("again", user="alice", provider="other")
        assert "Not sent: you may not run with provider 'other'." in err
        assert Run.objects.count() == 1
        with pytest.raises(CommandError, match="is not bob's"):
            chat("x", user="bob", conversation=str(conversation.pk))
        with pytest.raises(CommandError, match="No user 'carol'"):
            chat("x", user="carol")
    assert Message.objects.filter(conversation=conversation).count() == 2


@pytest.fixture
def app_log() -> Any:
    """The app's log as the demo project shows it: INFO and up, on a console stream."""
    stream = StringIO()
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger("llm_conversations")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield stream
    logger.removeHandler(handler)
    logger.setLevel(level)


def test_the_apps_info_lines_stay_out_of_the_conversation(app_log: StringIO) -> None:
    out, _ = chat("Hello", "/quit")
    assert "assistant> Hello" in out
    assert app_log.getvalue() == ""
    # Asked for, they show; the command leaves the logger as it found it.
    chat("Again", "/quit", verbosity=2)
    assert "claimed by" in app_log.getvalue()
    assert logging.getLogger("llm_conversations").level == logging.INFO
