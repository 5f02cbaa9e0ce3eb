"""Export (fine-tuning and full-fidelity forms), import, and the per-user data commands."""

from __future__ import annotations

import copy
import json
from datetime import timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from llm_conversations.conversations import append_messages, create_conversation
from llm_conversations.conversations.feedback import rate_message
from llm_conversations.conversations.lifecycle import hide_message
from llm_conversations.conversations.transfer.export import (
    FORMAT,
    FeedbackSelection,
    FinetuneExport,
    full_records,
    select_conversations,
)
from llm_conversations.conversations.transfer.importing import Importer
from llm_conversations.core.messages import ChatMessage, Reasoning, ReasoningKind
from llm_conversations.exceptions import LLMConversationsError
from llm_conversations.models import Conversation, Feedback, Message, Rating, Run, RunStatus
from llm_conversations.runs import ToolLoopService
from llm_conversations.runs.forks import fork
from tests.runs.test_loop import calls_text, echo_service

pytestmark = pytest.mark.django_db

User = get_user_model()


def call(*args: str, **options: Any) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(*args, stdout=out, stderr=err, **options)
    return out.getvalue(), err.getvalue()


def with_tools(owner: Any, title: str = "") -> Conversation:
    """A conversation whose run called two tools and answered."""
    conversation = create_conversation(owner=owner, title=title, metadata={"k": ["v", 1.5]})
    text = calls_text(("c1", "get_weather", {"city": "Paris"}), ("c2", "get_time", {}))
    echo_service().send(conversation, ChatMessage.user(text))
    return conversation


def last_answer(conversation: Conversation) -> Message:
    return Message.objects.filter(conversation=conversation, role="assistant").last()  # type: ignore[return-value]


@pytest.fixture
def alice() -> Any:
    return User.objects.create_user("alice")


@pytest.fixture
def bob() -> Any:
    return User.objects.create_user("bob")


@pytest.fixture
def corpus(alice: Any, bob: Any) -> list[Conversation]:
    """Three conversations: rated +1 (alice), rated -1 (bob), plain text (alice)."""
    good = with_tools(alice, "good")
    rate_message(last_answer(good), alice, Rating.UP, "nice")
    bad = with_tools(bob, "bad")
    rate_message(last_answer(bad), bob, Rating.DOWN)
    plain = create_conversation(
        owner=alice,
        messages=[
            ChatMessage.system("Be brief."),
            ChatMessage.user("hi"),
            ChatMessage.assistant("hello"),
        ],
    )
    return [good, bad, plain]


def export(*args: str) -> list[dict[str, Any]]:
    out, _ = call("export_conversations", *args)
    return [json.loads(line) for line in out.splitlines()]


class TestFinetuneForm:
    def test_messages_in_wire_form_with_the_tools_offered(self, corpus: list[Conversation]) -> None:
        lines = export("--format", "finetune")
        assert len(lines) == 3
        first = lines[0]
        assert set(first) == {"messages", "tools"}
        roles = [m["role"] for m in first["messages"]]
        assert roles == ["user", "assistant", "tool", "tool", "assistant"]
        call_turn = first["messages"][1]
        assert call_turn["content"] is None
        assert call_turn["tool_calls"][0] == {
            "id": "c1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
        }
        assert [m.get("tool_call_id") for m in first["messages"][2:4]] == ["c1", "c2"]
        names = [t["function"]["name"] for t in first["tools"]]
        assert {"get_weather", "get_time"} <= set(names)
        assert all(t["type"] == "function" for t in first["tools"])
        # Every call is answered and named among the tools.
        for line in lines:
            called = [c["id"] for m in line["messages"] for c in m.get("tool_calls") or ()]
            answered = [m["tool_call_id"] for m in line["messages"] if m["role"] == "tool"]
            assert called == answered
            assert line["messages"][-1]["role"] == "assistant"
        assert lines[2] == {
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "hello"},
            ],
            "tools": [],
        }

    def test_filters_by_user_feedback_and_dates(self, corpus: list[Conversation]) -> None:
        assert len(export("--format", "finetune", "--user", "alice")) == 2
        assert len(export("--format", "finetune", "--user", "alice", "--user", "bob")) == 3
        positive = export("--format", "finetune", "--feedback", "positive")
        assert len(positive) == 1
        assert positive[0]["messages"][0]["content"].startswith("{")
        assert len(export("--feedback", "negative")) == 1
        assert [c["title"] for c in export("--feedback", "any")] == ["good", "bad"]
        tomorrow = (timezone.now() + timedelta(days=1)).date().isoformat()
        assert export("--since", tomorrow) == []
        assert len(export("--until", tomorrow)) == 3
        Conversation.objects.filter(pk=corpus[0].pk).update(
            created_at=timezone.now() - timedelta(days=10)
        )
        since = (timezone.now() - timedelta(days=5)).isoformat()
        assert [c["title"] for c in export("--since", since)] == ["bad", ""]

    def test_a_conversation_without_a_final_answer_is_skipped(self, alice: Any) -> None:
        create_conversation(owner=alice, messages=[ChatMessage.user("alone")])
        out, err = call("export_conversations", "--format", "finetune")
        assert out == ""
        assert "Exported 0 conversation(s); 1 without a final answer" in err

    def test_a_call_to_a_tool_no_run_offered_is_skipped(self, alice: Any) -> None:
        conversation = create_conversation(owner=alice, messages=[ChatMessage.user("x")])
        call_turn = ChatMessage.from_dict(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "a",
                        "type": "function",
                        "function": {"name": "lookup", "arguments": "{}"},
                    }
                ],
            }
        )
        append_messages(
            conversation,
            [call_turn, ChatMessage.tool_result("a", "42"), ChatMessage.assistant("42")],
        )
        export_ = FinetuneExport()
        assert list(export_.records(select_conversations())) == []
        assert export_.skipped == 1

    def test_unknown_user_is_refused(self) -> None:
        with pytest.raises(CommandError, match="No user is named 'nobody'"):
            call("export_conversations", "--user", "nobody")


class TestFullForm:
    def test_every_stored_field(self, corpus: list[Conversation]) -> None:
        good = export("--user", "alice")[0]
        assert (good["format"], good["version"], good["owner"]) == (FORMAT, 5, "alice")
        assert {message["reasoning"] for message in good["messages"]} == {None}
        assert good["metadata"] == {"k": ["v", 1.5]}
        run = good["runs"][0]
        assert run["status"] == "completed"
        assert run["termination_reason"] == "completed"
        assert run["usage"]["total_tokens"] > 0
        assert {t["name"] for t in run["tools"]} >= {"get_weather", "get_time"}
        answer = good["messages"][-1]
        assert answer["run"] == run["id"]
        assert answer["provider"] == "echo"
        assert answer["finish_reason"] == "stop"
        assert answer["usage"]["total_tokens"] > 0
        assert answer["feedback"] == [
            {
                "user": "alice",
                "rating": 1,
                "comment": "nice",
                "created_at": answer["feedback"][0]["created_at"],
                "updated_at": answer["feedback"][0]["updated_at"],
            }
        ]
        assert good["messages"][0]["usage"] is None
        assert good["messages"][2]["tool_call_id"] == "c1"

    def test_queries_grow_with_chunks_not_rows(self, alice: Any) -> None:
        for n in range(6):
            create_conversation(
                owner=alice, messages=[ChatMessage.user(f"q{n}"), ChatMessage.assistant("a")]
            )

        def queries(chunk_size: int) -> int:
            with CaptureQueriesContext(connection) as captured:
                lines = list(full_records(select_conversations(), chunk_size=chunk_size))
            assert len(lines) == 6
            return len(captured)

        # The conversations' query, then messages, runs, attachments and feedback once a chunk.
        assert queries(6) == 1 + 4
        assert queries(3) == 1 + 4 * 2
        assert queries(2) == 1 + 4 * 3
        for n in range(6):
            create_conversation(owner=alice, messages=[ChatMessage.user(f"more{n}")])
        with CaptureQueriesContext(connection) as captured:
            assert len(list(full_records(select_conversations(), chunk_size=12))) == 12
        assert len(captured) == 1 + 4


class TestRoundTrip:
    def test_export_import_export_is_byte_identical(
        self, corpus: list[Conversation], tmp_path: Path
    ) -> None:
        first = tmp_path / "first.jsonl"
        call("export_conversations", "--output", str(first))
        counts = (Conversation.objects.count(), Message.objects.count(), Run.objects.count())
        Conversation.objects.all().delete()
        assert not Feedback.objects.exists()

        out, _ = call("import_conversations", str(first))
        assert "Imported 3 conversation(s)" in out
        assert (
            Conversation.objects.count(),
            Message.objects.count(),
            Run.objects.count(),
        ) == counts
        assert Feedback.objects.count() == 2
        second = tmp_path / "second.jsonl"
        call("export_conversations", "--output", str(second))
        assert second.read_bytes() == first.read_bytes()
        # The imported history is whole: the store appends after it.
        conversation = Conversation.objects.get(title="good")
        append_messages(conversation, [ChatMessage.user("again")])
        assert conversation.message_count == 6

    def test_parameters_parsed_answers_costs_and_forks_survive_it(
        self, alice: Any, tmp_path: Path, settings: Any
    ) -> None:
        settings.LLM_CONVERSATIONS = {
            **settings.LLM_CONVERSATIONS,
            "DEFAULT_PROVIDER": "echo",
            "PROVIDERS": {
                "echo": {
                    "BACKEND": "echo",
                    "MODEL": "echo",
                    "MODEL_INFO": {"echo": {"prices": {"input": "1000", "output": "3000"}}},
                }
            },
        }
        source = create_conversation(owner=alice, title="source")
        schema = {"type": "object", "properties": {"city": {"type": "string"}}}
        run = ToolLoopService().send(
            source, '{"city": "Oslo"}', instructions="Answer in JSON.", response_format=schema
        )
        answer = last_answer(source)
        assert answer.parsed == {"city": "Oslo"}
        assert answer.cost is not None
        assert answer.cost > 0
        assert run.cost == answer.cost
        copy = fork(source, title="copy")
        first = tmp_path / "first.jsonl"
        call("export_conversations", "--output", str(first))
        lines = [json.loads(line) for line in first.read_text().splitlines()]
        exported_run = lines[0]["runs"][0]
        assert exported_run["instructions"] == "Answer in JSON."
        assert exported_run["parameters"]["response_format"] == schema
        assert exported_run["cost"] == str(run.cost)
        assert lines[0]["messages"][-1]["parsed"] == {"city": "Oslo"}
        assert lines[1]["forked_from"] == str(source.pk)
        Conversation.objects.all().delete()

        call("import_conversations", str(first))
        assert Conversation.objects.get(pk=copy.pk).forked_from_id == source.pk
        assert last_answer(source).cost == answer.cost
        assert Run.objects.get(pk=run.pk).run_parameters.response_format is not None
        second = tmp_path / "second.jsonl"
        call("export_conversations", "--output", str(second))
        assert second.read_bytes() == first.read_bytes()

    def test_reasoning_survives_it_byte_for_byte(self, alice: Any, tmp_path: Path) -> None:
        reasoning = [
            Reasoning("anthropic", ReasoningKind.THINKING, "Think.", "sig=="),
            Reasoning("anthropic", ReasoningKind.REDACTED, data="opaque"),
        ]
        conversation = create_conversation(
            owner=alice,
            messages=[ChatMessage.user("q"), ChatMessage.assistant("a", reasoning=reasoning)],
        )
        first = tmp_path / "first.jsonl"
        call("export_conversations", "--output", str(first))
        line = json.loads(first.read_text())
        assert line["messages"][1]["reasoning"] == [part.to_stored() for part in reasoning]
        conversation.delete()
        call("import_conversations", str(first))
        assert Message.objects.get(position=1).to_chat_message().reasoning == tuple(reasoning)
        second = tmp_path / "second.jsonl"
        call("export_conversations", "--output", str(second))
        assert second.read_bytes() == first.read_bytes()

    def test_hidden_messages_stay_hidden(self, alice: Any, tmp_path: Path) -> None:
        conversation = with_tools(alice)
        calls = Message.objects.get(conversation=conversation, role="assistant", position=1)
        hidden = [row.position for row in hide_message(conversation, calls, reason="wrong city")]
        assert hidden == [1, 2, 3]
        first = tmp_path / "first.jsonl"
        call("export_conversations", "--output", str(first))
        line = json.loads(first.read_text())
        assert [m["hidden_reason"] for m in line["messages"]] == ["", *["wrong city"] * 3, ""]
        conversation.delete()
        call("import_conversations", str(first))
        rows = Message.objects.order_by("position")
        assert [row.position for row in rows if row.hidden_at is not None] == hidden
        second = tmp_path / "second.jsonl"
        call("export_conversations", "--output", str(second))
        assert second.read_bytes() == first.read_bytes()

    def test_existing_ids_are_refused_or_skipped(
        self, corpus: list[Conversation], tmp_path: Path
    ) -> None:
        path = tmp_path / "all.jsonl"
        call("export_conversations", "--output", str(path))
        with pytest.raises(CommandError, match="line 1: conversation_exists"):
            call("import_conversations", str(path), "--strict")
        with pytest.raises(CommandError, match=r"Imported 0 conversation.*refused 3"):
            call("import_conversations", str(path))
        out, _ = call("import_conversations", str(path), "--skip-existing")
        assert "Imported 0 conversation(s) (0 message(s), 0 run(s), 0 attachment(s)); " in out
        assert "skipped 3 existing; refused 0." in out

    def test_owners_map_by_username_with_a_default(
        self, corpus: list[Conversation], tmp_path: Path
    ) -> None:
        path = tmp_path / "bob.jsonl"
        call("export_conversations", "--user", "bob", "--output", str(path))
        Conversation.objects.all().delete()
        Feedback.objects.all().delete()
        User.objects.filter(username="bob").delete()
        with pytest.raises(CommandError, match="unknown_user at owner"):
            call("import_conversations", str(path), "--strict")
        carol = User.objects.create_user("carol")
        with pytest.raises(
            CommandError, match=r"unknown_user at messages\[4\]\.feedback\[0\]\.user"
        ):
            call("import_conversations", str(path), "--default-owner", "carol", "--strict")
        assert not Conversation.objects.exists()  # nothing of a refused conversation stays
        User.objects.create_user("bob")
        line = json.loads(path.read_text())
        line["owner"] = "dave"
        path.write_text(json.dumps(line) + "\n")
        call("import_conversations", str(path), "--default-owner", "carol")
        assert Conversation.objects.get().owner == carol


def record(corpus: list[Conversation]) -> dict[str, Any]:
    return next(full_records(select_conversations().filter(pk=corpus[0].pk)))


class TestImportValidation:
    """Each line is checked by the store's rules; a refused one stores nothing."""

    def refused(self, data: dict[str, Any]) -> LLMConversationsError:
        Conversation.objects.all().delete()
        with pytest.raises(LLMConversationsError) as caught:
            Importer().import_record(data)
        assert not Conversation.objects.exists()
        assert not Message.objects.exists()
        return caught.value

    def test_sequence_rules(self, corpus: list[Conversation]) -> None:
        data = record(corpus)
        del data["messages"][3]  # one call left unanswered
        error = self.refused(data)
        assert error.code == "unanswered_tool_calls" or error.code.startswith("unanswered")

    def test_message_rules_name_the_field(self, corpus: list[Conversation]) -> None:
        data = record(corpus)
        data["messages"][0]["content"] = ""
        error = self.refused(data)
        assert error.field is not None
        assert error.field.startswith("messages[0]")

    def test_usage_only_on_assistant_turns(self, corpus: list[Conversation]) -> None:
        data = record(corpus)
        data["messages"][0]["usage"] = {
            "input_tokens": 1,
            "output_tokens": 1,
            "total_tokens": 2,
            "cached_tokens": None,
        }
        assert self.refused(data).field == "messages[0]"

    def test_unstorable_text(self, corpus: list[Conversation]) -> None:
        data = record(corpus)
        data["messages"][0]["metadata"] = {"x": "a\x00b"}
        assert self.refused(data).code == "invalid_text"

    def test_ratings_only_on_assistant_turns(self, corpus: list[Conversation]) -> None:
        data = record(corpus)
        data["messages"][0]["feedback"] = data["messages"][-1]["feedback"]
        assert self.refused(data).code == "not_an_assistant_message"

    def test_unknown_runs_and_shapes(self, corpus: list[Conversation]) -> None:
        base = record(corpus)
        data = copy.deepcopy(base)
        data["runs"][0]["status"] = "paused"
        assert self.refused(data).field == "runs[0].status"
        data = copy.deepcopy(base)
        data["runs"] = []
        assert self.refused(data).field == "messages[0].run"
        data = copy.deepcopy(base)
        del data["messages"][0]["attachments"]
        assert "missing keys (attachments)" in self.refused(data).message
        data = copy.deepcopy(base)
        data["version"] = 1
        assert (
            "unknown keys (attachments, hidden_at, hidden_reason, reasoning)"
            in self.refused(data).message
        )
        data = copy.deepcopy(base)
        data["version"] = 2
        assert "unknown keys (hidden_at, hidden_reason, reasoning)" in self.refused(data).message
        data = copy.deepcopy(base)
        data["version"] = 6
        assert self.refused(data).code == "unsupported_version"
        data = copy.deepcopy(base)
        data["created_at"] = "2026-01-01T00:00:00"
        assert self.refused(data).field == "created_at"

    def test_reasoning_follows_the_message_rules(self, corpus: list[Conversation]) -> None:
        base = record(corpus)
        data = copy.deepcopy(base)
        data["messages"][0]["reasoning"] = [{"provider": "anthropic", "kind": "redacted"}]
        refused = self.refused(data)
        assert (refused.code, refused.field) == ("reasoning_not_allowed", "messages[0].reasoning")
        data = copy.deepcopy(base)
        data["messages"][-1]["reasoning"] = [{"provider": "anthropic", "kind": "redacted"}]
        refused = self.refused(data)
        last = len(data["messages"]) - 1
        assert (refused.code, refused.field) == (
            "invalid_reasoning",
            f"messages[{last}].reasoning[0].data",
        )

    def test_a_tool_group_is_hidden_whole(self, corpus: list[Conversation]) -> None:
        data = record(corpus)
        at = next(i for i, m in enumerate(data["messages"]) if m["tool_calls"])
        data["messages"][at]["hidden_at"] = "2026-12-01T10:00:00.000000+00:00"
        data["messages"][at]["hidden_reason"] = "only the calls"
        refused = self.refused(data)
        assert (refused.code, refused.field) == ("invalid_import", f"messages[{at}].hidden_at")

    def test_a_version_2_line_is_read_without_reasoning(self, corpus: list[Conversation]) -> None:
        data = record(corpus)
        data["version"] = 2
        for message in data["messages"]:
            del message["reasoning"], message["hidden_at"], message["hidden_reason"]
        Conversation.objects.all().delete()
        assert Importer().import_record(data) is not None
        assert not Message.objects.filter(reasoning__isnull=False).exists()

    def test_not_json(self, tmp_path: Path) -> None:
        path = tmp_path / "bad.jsonl"
        path.write_text("\n{oops\n")
        with pytest.raises(CommandError, match="line 2: invalid_import"):
            call("import_conversations", str(path), "--strict")


class TestUserData:
    def test_export_user_data_is_the_full_form_of_their_conversations(
        self, corpus: list[Conversation]
    ) -> None:
        out, err = call("export_user_data", "alice")
        lines = [json.loads(line) for line in out.splitlines()]
        assert [line["title"] for line in lines] == ["good", ""]
        assert {line["owner"] for line in lines} == {"alice"}
        assert "Exported 2 conversation(s) of alice" in err

    def test_delete_user_data_needs_yes_and_spares_others(
        self, corpus: list[Conversation], alice: Any
    ) -> None:
        out, _ = call("delete_user_data", "alice")
        assert out.startswith("Would delete 2 conversation(s) (8 message(s)) and 1 rating(s)")
        assert Conversation.objects.count() == 3
        out, _ = call("delete_user_data", "alice", "--yes")
        assert "Deleted 2 conversation(s) (8 message(s)) and 1 rating(s) of alice" in out
        assert list(Conversation.objects.values_list("title", flat=True)) == ["bad"]
        assert Feedback.objects.count() == 1
        assert User.objects.filter(username="alice").exists()

    def test_refused_while_a_run_is_active(self, corpus: list[Conversation]) -> None:
        Run.objects.create(conversation=corpus[2], status=RunStatus.REQUIRES_ACTION)
        with pytest.raises(CommandError, match="Nothing deleted: a conversation of this user"):
            call("delete_user_data", "alice", "--yes")
        assert Conversation.objects.count() == 3
        assert Feedback.objects.count() == 2

    def test_filters_compose(self, corpus: list[Conversation], alice: Any) -> None:
        assert (
            select_conversations(owners=[alice], feedback=FeedbackSelection.NEGATIVE).count() == 0
        )
