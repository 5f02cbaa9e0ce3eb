"""The admin: a chat-like transcript at a constant query count, search, filters, read-only history."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client, RequestFactory, override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from llm_conversations.admin import ConversationAdmin
from llm_conversations.conversations import append_completion, create_conversation
from llm_conversations.core.completions import CompletionResponse, FinishReason
from llm_conversations.core.messages import ChatMessage, Reasoning, ReasoningKind, ToolCall
from llm_conversations.models import Conversation, Message, Run
from llm_conversations.providers import EchoProvider
from llm_conversations.runs import ToolLoopService
from tests.runs.test_context import long_history, providers
from tests.support import loop_tools

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:llm_conversations_conversation_changelist"
# Login session row, user, conversation (with its run count), its forks, messages, their feedback,
# runs, and the owner shown by the autocomplete widget; whatever the number of
# messages, runs and ratings.
CHANGE_PAGE_QUERIES = 8


@pytest.fixture
def staff_client() -> Client:
    user = get_user_model().objects.create_superuser("staff", "staff@example.com", "pw")
    client = Client()
    client.force_login(user)
    return client


def calls_text(*calls: tuple[str, dict[str, Any]]) -> str:
    """A user message that makes the echo backend call these tools."""
    return json.dumps(
        {
            "tool_calls": [
                {"type": "function", "function": {"name": name, "arguments": arguments}}
                for name, arguments in calls
            ]
        }
    )


def run_turns(conversation: Conversation, *texts: str) -> list[Run]:
    """Send each text through the tool loop with the echo backend and test tools."""
    service = ToolLoopService(EchoProvider(), tools=loop_tools.registry())
    return [service.send(conversation, ChatMessage.user(text)) for text in texts]


def change_url(conversation: Conversation) -> str:
    return reverse("admin:llm_conversations_conversation_change", args=[conversation.pk])


def listed(client: Client, **params: str) -> set[str]:
    """Titles of the conversations the changelist shows for these parameters."""
    response = client.get(reverse(CHANGELIST), params)
    assert response.status_code == 200
    assert not response.context.get("ERRORS")
    return {c.title for c in response.context["cl"].result_list}


def test_changelist_queries_do_not_grow_with_rows(staff_client: Client) -> None:
    owner = get_user_model().objects.create_user("owner")
    url = reverse(CHANGELIST)

    def count() -> int:
        with CaptureQueriesContext(connection) as queries:
            response = staff_client.get(url, {"q": "x", "run": "failed"})
        assert response.status_code == 200
        return len(queries)

    first = create_conversation(owner=owner, title="one")
    run_turns(first, calls_text(("", {})))
    few = count()
    for i in range(10):
        conversation = create_conversation(owner=owner, title=f"c{i}")
        run_turns(conversation, calls_text(("", {})), "x")
    assert count() == few


def test_changelist_shows_run_count_and_last_status(staff_client: Client) -> None:
    conversation = create_conversation(title="runs")
    run_turns(conversation, "hello", calls_text(("", {})))
    response = staff_client.get(reverse(CHANGELIST))
    (row,) = response.context["cl"].result_list
    assert row.run_count == 2
    assert row.last_run_status == "failed"
    assert 'llmconv-status-failed">Failed</span>' in response.content.decode()
    # Facet counts work with the custom filters too.
    facets = staff_client.get(reverse(CHANGELIST), {"_facets": "True"})
    assert facets.status_code == 200
    assert "with a failed run (1)" in facets.content.decode()


def test_change_page_query_count_is_constant(staff_client: Client) -> None:
    owner = get_user_model().objects.create_user("owner")

    def count(conversation: Conversation) -> int:
        staff_client.get(change_url(conversation))  # fills the content type cache
        with CaptureQueriesContext(connection) as queries:
            response = staff_client.get(change_url(conversation))
        assert response.status_code == 200
        return len(queries)

    small = create_conversation(owner=owner, title="small")
    run_turns(small, "hi")
    big = create_conversation(owner=owner, title="big")
    weather = calls_text(("get_weather", {"city": "Paris"}), ("get_time", {}))
    run_turns(big, *[weather, "plain", calls_text(("fail", {}))] * 5)
    run_turns(big, calls_text(("delete_file", {"path": "/tmp/x"})))
    assert Message.objects.filter(conversation=big).count() > 40
    assert count(small) == count(big) == CHANGE_PAGE_QUERIES


def test_transcript_pairs_each_result_with_its_call(staff_client: Client) -> None:
    conversation = create_conversation(
        title="tools",
        messages=[
            ChatMessage.user("Weather?"),
            ChatMessage.assistant_tool_calls(
                [
                    ToolCall("call_1", "get_weather", {"city": "<Paris>"}),
                    ToolCall("call_2", "get_time", {}),
                ]
            ),
            ChatMessage.tool_result("call_2", "09:00"),
            ChatMessage.tool_result("call_1", "rain & wind", is_error=True),
        ],
    )
    html = staff_client.get(change_url(conversation)).content.decode()
    card_1 = html[html.index('id="call-call_1"') : html.index('id="call-call_2"')]
    card_2 = html[html.index('id="call-call_2"') :]
    assert "get_weather" in card_1
    assert (
        "{\n  &quot;city&quot;: &quot;&lt;Paris&gt;&quot;\n}" in card_1
    )  # pretty-printed, escaped
    assert "rain &amp; wind" in card_1
    assert 'class="llmconv-result llmconv-error" id="result-call_1"' in card_1
    assert 'id="result-call_2"' in card_2
    assert "09:00" in card_2[: card_2.index("</pre>", card_2.index('id="result-call_2"'))]
    # Paired results are shown under their call, not again as rows.
    assert 'id="message-2"' not in html
    assert 'id="message-3"' not in html
    assert "No runs" in html


def test_unanswered_result_and_unpaired_rows(staff_client: Client) -> None:
    conversation = create_conversation(
        messages=[
            ChatMessage.user("Go"),
            ChatMessage.assistant_tool_calls([ToolCall("call_1", "get_time", {})]),
        ]
    )
    html = staff_client.get(change_url(conversation)).content.decode()
    assert "no result yet" in html


def test_transcript_shows_roles_model_usage_and_escapes(staff_client: Client) -> None:
    conversation = create_conversation(
        messages=[ChatMessage.system("Be brief."), ChatMessage.user("<script>x</script>")]
    )
    html = staff_client.get(change_url(conversation)).content.decode()
    assert "<script>x</script>" not in html
    assert "&lt;script&gt;x&lt;/script&gt;" in html
    other = create_conversation()
    run_turns(other, "hello")
    html = staff_client.get(change_url(other)).content.decode()
    assert 'class="llmconv-msg llmconv-user"' in html
    reply = html[html.index('class="llmconv-msg llmconv-assistant"') :]
    assert '<span class="llmconv-model">echo (echo)</span>' in reply
    assert "5 in / 5 out / 10 total" in reply


def test_the_timeline_and_the_transcript_name_a_model_alike(staff_client: Client) -> None:
    config = {"PROVIDERS": {"oai": {"BACKEND": "echo", "MODEL": "echo-1"}}}
    with override_settings(LLM_CONVERSATIONS=config):
        conversation = create_conversation()
        ToolLoopService("oai").send(conversation, "hello")
        html = staff_client.get(change_url(conversation)).content.decode()
    labels = re.findall(r'<span class="llmconv-model">([^<]*)</span>', html)
    # Once in the timeline, once on the reply: the backend, not the entry's name.
    assert labels == ["echo-1 (echo)", "echo-1 (echo)"]
    assert '<span class="llmconv-entry">entry oai</span>' in html
    assert "oai ·" not in html


def test_run_timeline_shows_status_reason_usage_error_and_pending(staff_client: Client) -> None:
    conversation = create_conversation(title="timeline")
    completed, failed, paused = run_turns(
        conversation,
        calls_text(("get_time", {})),
        calls_text(("", {})),
        calls_text(("delete_file", {"path": "/etc/passwd"})),
    )
    html = staff_client.get(change_url(conversation)).content.decode()
    timeline = html[html.index('id="llmconv-runs"') : html.index('id="llmconv-transcript"')]
    first = timeline[
        timeline.index(f'id="run-{completed.pk}"') : timeline.index(f'id="run-{failed.pk}"')
    ]
    assert "Run 1" in first
    assert 'llmconv-status-completed">Completed' in first
    assert "ended: completed" in first
    assert "2 of 8" in first  # iterations
    assert (
        f"{completed.input_tokens} in / {completed.output_tokens} out / {completed.total_tokens} total"
        in first
    )
    second = timeline[
        timeline.index(f'id="run-{failed.pk}"') : timeline.index(f'id="run-{paused.pk}"')
    ]
    assert "llmconv-run-failed llmconv-error" in second
    assert "ended: provider_error" in second
    assert "InvalidRequestError" in second
    assert "non-empty string" in second
    third = timeline[timeline.index(f'id="run-{paused.pk}"') :]
    assert "llmconv-waiting" in third
    assert "Waiting for:" in third
    assert "<code>delete_file</code>" in third
    assert "&quot;path&quot;: &quot;/etc/passwd&quot;" in third
    assert "needs approval" in third
    # In the transcript the paused call says what it waits for; each run is marked.
    call_id = paused.waiting_calls[0].call.id
    card = html[html.index(f'id="call-{call_id}"') :]
    assert "waiting: needs approval" in card[1:].split('id="call-', 1)[0]
    assert html.count('class="llmconv-run-marker"') == 3


def test_denied_call_shows_decision_and_error_result(staff_client: Client) -> None:
    conversation = create_conversation()
    (run,) = run_turns(conversation, calls_text(("delete_file", {"path": "x"})))
    ToolLoopService(EchoProvider(), tools=loop_tools.registry()).deny(run.pk)
    html = staff_client.get(change_url(conversation)).content.decode()
    call_id = run.waiting_calls[0].call.id
    card = html[html.index(f'id="call-{call_id}"') :]
    assert 'llmconv-decision-denied">denied' in card
    assert f'class="llmconv-result llmconv-error" id="result-{call_id}"' in card


def test_transcript_limit_shows_latest_messages(staff_client: Client) -> None:
    conversation = create_conversation(
        messages=[
            ChatMessage.user(f"m{i}") if i % 2 == 0 else ChatMessage.assistant(f"m{i}")
            for i in range(6)
        ]
    )

    class Limited(ConversationAdmin):
        transcript_limit = 2

    request = RequestFactory().get("/")
    context = Limited(Conversation, admin.site).transcript_context(request, conversation)
    assert [e.message.content for e in context["entries"]] == ["m4", "m5"]
    assert context["hidden_messages"] == 4
    assert context["messages_url"].endswith(f"?conversation__exact={conversation.pk}")


def test_search_by_content_tool_name_title_and_owner(staff_client: Client) -> None:
    alice = get_user_model().objects.create_user("alice")
    create_conversation(owner=alice, title="Holiday plans", messages=[ChatMessage.user("hi")])
    create_conversation(
        title="Weather",
        messages=[
            ChatMessage.user("Is it raining in Oslo?"),
            ChatMessage.assistant_tool_calls([ToolCall("c1", "get_weather", {"city": "Oslo"})]),
            ChatMessage.tool_result("c1", "rain"),
        ],
    )
    create_conversation(
        title="Money",
        messages=[
            ChatMessage.user("100% sure? Convert it"),
            ChatMessage.assistant_tool_calls([ToolCall("c1", "convert_currency", {"amount": 1})]),
            ChatMessage.tool_result("c1", "0.92 EUR"),
        ],
    )
    create_conversation(title="Empty")
    assert listed(staff_client, q="holiday") == {"Holiday plans"}
    assert listed(staff_client, q="alice") == {"Holiday plans"}
    assert listed(staff_client, q="RAINING") == {"Weather"}  # message content, any case
    assert listed(staff_client, q="get_weather") == {"Weather"}  # tool name
    assert listed(staff_client, q="currency") == {"Money"}  # part of a tool name
    assert listed(staff_client, q="EUR") == {"Money"}  # a tool result
    assert listed(staff_client, q="weather oslo") == {"Weather"}  # every word must match
    assert listed(staff_client, q="holiday oslo") == set()
    assert listed(staff_client, q='"in oslo"') == {"Weather"}  # a quoted phrase
    assert listed(staff_client, q="100%") == {"Money"}  # wildcards are literal
    assert listed(staff_client, q="_weather") == {"Weather"}
    assert listed(staff_client, q="nothing-like-this") == set()


def test_search_without_message_search_uses_fields_only(staff_client: Client) -> None:
    conversation = create_conversation(title="Title", messages=[ChatMessage.user("needle")])
    request = RequestFactory().get("/")
    request.user = get_user_model().objects.get(username="staff")

    class FieldsOnly(ConversationAdmin):
        search_messages = False

    model_admin = FieldsOnly(Conversation, admin.site)
    found, _ = model_admin.get_search_results(request, Conversation.objects.all(), "needle")
    assert not found.exists()
    found, _ = ConversationAdmin(Conversation, admin.site).get_search_results(
        request, Conversation.objects.all(), "needle"
    )
    assert list(found) == [conversation]


@pytest.fixture
def filter_data() -> None:
    create_conversation(title="plain", messages=[ChatMessage.system("s"), ChatMessage.user("u")])
    run_turns(create_conversation(title="tools"), calls_text(("get_time", {})))
    run_turns(create_conversation(title="tool error"), calls_text(("fail", {})))
    run_turns(create_conversation(title="failed"), calls_text(("", {})))
    run_turns(create_conversation(title="paused"), calls_text(("delete_file", {"path": "x"})))


@pytest.mark.usefixtures("filter_data")
@pytest.mark.parametrize(
    ("params", "titles"),
    [
        ({}, {"plain", "tools", "tool error", "failed", "paused"}),
        ({"role": "system"}, {"plain"}),
        ({"role": "tool"}, {"tools", "tool error"}),
        ({"role": "assistant"}, {"tools", "tool error", "paused"}),
        ({"tool_calls": "yes"}, {"tools", "tool error", "paused"}),
        ({"tool_calls": "no"}, {"plain", "failed"}),
        ({"tool_errors": "yes"}, {"tool error"}),
        ({"run": "failed"}, {"failed"}),
        ({"run": "paused"}, {"paused"}),
        ({"run": "active"}, {"paused"}),
        ({"run": "none"}, {"plain"}),
        ({"run": "failed", "role": "system"}, set()),
        (
            {"created_at__gte": "2000-01-01T00:00:00+00:00"},
            {"plain", "tools", "tool error", "failed", "paused"},
        ),
        ({"created_at__lt": "2000-01-01T00:00:00+00:00"}, set()),
        ({"q": "delete_file", "run": "paused"}, {"paused"}),
    ],
)
def test_filters(staff_client: Client, params: dict[str, str], titles: set[str]) -> None:
    assert listed(staff_client, **params) == titles


def test_owner_is_autocomplete_only_when_user_admin_can_search() -> None:
    request = RequestFactory().get("/")
    assert ConversationAdmin(Conversation, admin.site).get_autocomplete_fields(request) == (
        "owner",
    )
    bare_site = admin.AdminSite(name="bare")
    assert ConversationAdmin(Conversation, bare_site).get_autocomplete_fields(request) == ()


def test_owner_widget_is_autocomplete(staff_client: Client) -> None:
    owner = get_user_model().objects.create_user("bob")
    conversation = create_conversation(owner=owner)
    html = staff_client.get(change_url(conversation)).content.decode()
    widget = html[html.index('<select name="owner"') :]
    widget = widget[: widget.index("</select>")]
    assert 'class="admin-autocomplete"' in widget
    assert f'<option value="{owner.pk}" selected>bob</option>' in widget


def test_transcript_template_can_be_overridden(staff_client: Client, tmp_path: Path) -> None:
    override = tmp_path / "llm_conversations" / "admin" / "transcript.html"
    override.parent.mkdir(parents=True)
    override.write_text("<p id='custom'>{{ entries|length }} entries</p>")
    templates = [{**settings.TEMPLATES[0], "DIRS": [tmp_path]}]
    conversation = create_conversation(messages=[ChatMessage.user("x")])
    with override_settings(TEMPLATES=templates):
        html = staff_client.get(change_url(conversation)).content.decode()
    assert "<p id='custom'>1 entries</p>" in html
    assert 'id="llmconv-runs"' in html  # the other parts stay


def test_message_admin_is_read_only(staff_client: Client) -> None:
    conversation = create_conversation(messages=[ChatMessage.user("hello there")])
    message = Message.objects.get(conversation=conversation)
    changelist = reverse("admin:llm_conversations_message_changelist")
    assert "hello there" in staff_client.get(changelist, {"role__exact": "user"}).content.decode()
    assert (
        "hello there" not in staff_client.get(changelist, {"role__exact": "tool"}).content.decode()
    )
    assert staff_client.get(reverse("admin:llm_conversations_message_add")).status_code == 403
    change = reverse("admin:llm_conversations_message_change", args=[message.pk])
    page = staff_client.get(change)
    assert page.status_code == 200
    assert "Delete" not in page.content.decode().split('id="message_form"')[1]
    assert staff_client.post(change, {"content": "rewritten"}).status_code == 403
    delete = reverse("admin:llm_conversations_message_delete", args=[message.pk])
    assert staff_client.post(delete, {"post": "yes"}).status_code == 403
    response = staff_client.post(
        changelist, {"action": "delete_selected", "_selected_action": [message.pk], "post": "yes"}
    )
    assert response.status_code in (200, 302)
    message.refresh_from_db()
    assert message.content == "hello there"


def test_message_search_by_tool_name_and_conversation_link(staff_client: Client) -> None:
    changelist = reverse("admin:llm_conversations_message_changelist")
    create_conversation(
        messages=[
            ChatMessage.user("What time is it?"),
            ChatMessage.assistant_tool_calls([ToolCall("c1", "get_time", {})]),
            ChatMessage.tool_result("c1", "09:00"),
        ]
    )
    response = staff_client.get(changelist, {"q": "get_time"})
    assert [m.role for m in response.context["cl"].result_list] == ["assistant"]
    other = create_conversation(messages=[ChatMessage.user("x")])
    response = staff_client.get(changelist, {"conversation__exact": str(other.pk)})
    assert [m.content for m in response.context["cl"].result_list] == ["x"]


def test_run_admin_is_read_only_with_status_filter(staff_client: Client) -> None:
    conversation = create_conversation()
    _completed, failed = run_turns(conversation, "hello", calls_text(("", {})))
    changelist = reverse("admin:llm_conversations_run_changelist")
    response = staff_client.get(changelist, {"status__exact": "failed"})
    assert [r.pk for r in response.context["cl"].result_list] == [failed.pk]
    change = reverse("admin:llm_conversations_run_change", args=[failed.pk])
    html = staff_client.get(change).content.decode()
    assert "InvalidRequestError" in html
    assert change_url(conversation) in html
    assert staff_client.post(change, {"status": "completed"}).status_code == 403
    assert staff_client.get(reverse("admin:llm_conversations_run_add")).status_code == 403
    failed.refresh_from_db()
    assert failed.status == "failed"


def test_conversation_delete_cascades(staff_client: Client) -> None:
    conversation = create_conversation(messages=[ChatMessage.system("x")])
    run_turns(conversation, "hello")
    url = reverse("admin:llm_conversations_conversation_delete", args=[conversation.pk])
    assert staff_client.post(url, {"post": "yes"}).status_code == 302
    assert not Conversation.objects.exists()
    assert not Message.objects.exists()
    assert not Run.objects.exists()


def test_transcript_marks_empty_replies_stop_reasons_and_sanitized_turns(
    staff_client: Client,
) -> None:
    conversation = create_conversation(title="marks", messages=[ChatMessage.user("hi")])
    append_completion(
        conversation,
        CompletionResponse("", finish_reason=FinishReason.CONTENT_FILTER, sanitized=True),
    )
    page = staff_client.get(change_url(conversation)).content.decode()
    assert "(empty reply)" in page
    assert "stopped: content_filter" in page
    assert 'class="llmconv-bad llmconv-sanitized"' in page


# Login session row, user, the run with its conversation, its events.
RUN_PAGE_QUERIES = 4


def run_change_url(run: Run) -> str:
    return reverse("admin:llm_conversations_run_change", args=[run.pk])


def test_run_page_lists_tools_offered_by_name_with_schemas_folded(staff_client: Client) -> None:
    (run,) = run_turns(create_conversation(), "hello")
    html = staff_client.get(run_change_url(run)).content.decode()
    names = run.offered_tool_names
    assert len(names) > 3
    assert f"{len(names)} tools" in html
    for name in names:
        assert f"<li><details><summary><code>{name}</code>" in html
    # Each schema sits inside its closed <details>, none printed open on the page.
    section = html.split('class="llmconv-tools"', 1)[1].split("</ul>", 1)[0]
    assert section.count("<details>") == section.count("<pre>") == len(names)
    assert "<details open" not in section


def test_run_page_shows_the_worker_and_events_at_a_constant_query_count(
    staff_client: Client,
) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from llm_conversations.models import RunEvent

    (run,) = run_turns(create_conversation(), "hello")
    expires = timezone.now() + timedelta(seconds=30)
    Run.objects.filter(pk=run.pk).update(
        attempts=2, lease_owner="worker-7:4242:abcd", lease_expires_at=expires
    )

    def page() -> tuple[str, int]:
        with CaptureQueriesContext(connection) as queries:
            response = staff_client.get(run_change_url(run))
        assert response.status_code == 200
        return response.content.decode(), len(queries)

    page()  # content types are cached from here on
    html, few = page()
    assert "worker-7:4242:abcd" in html
    assert ">2<" in html.replace(" ", "").replace("\n", "")  # attempts
    types = list(RunEvent.objects.filter(run=run).values_list("type", flat=True))
    assert types[0] == "run.running"
    assert types[-1] == "run.completed"
    # Oldest first: the first event appears before the last.
    assert html.index("run.running") < html.index("run.completed")
    assert "Only the latest" not in html

    RunEvent.objects.bulk_create(
        RunEvent(run=run, type="text.delta", data={"delta": f"piece {n}"}) for n in range(250)
    )
    html, many = page()
    assert few == many == RUN_PAGE_QUERIES
    assert "Only the latest 200 events are shown." in html
    assert "piece 249" in html
    assert "piece 49<" not in html  # beyond the limit
    assert html.count("<tr><td>") == 200


def test_run_timeline_shows_attempts_and_the_worker(staff_client: Client) -> None:
    conversation = create_conversation()
    (run,) = run_turns(conversation, "hello")
    Run.objects.filter(pk=run.pk).update(attempts=3, lease_owner="host-a:99:ff")
    html = staff_client.get(change_url(conversation)).content.decode()
    assert "Attempts</dt><dd>3" in html
    assert "held by host-a:99:ff" in html


def _post_action(client: Client, action: str, runs: list[Run]) -> Any:
    return client.post(
        reverse("admin:llm_conversations_run_changelist"),
        {"action": action, "_selected_action": [str(r.pk) for r in runs]},
        follow=True,
    )


def test_cancel_action_cancels_active_runs_only(staff_client: Client) -> None:
    waiting = ToolLoopService(tools=loop_tools.registry()).start(create_conversation(), "hi")
    (done,) = run_turns(create_conversation(), "hello")
    response = _post_action(staff_client, "cancel_runs", [waiting, done])
    notes = [str(m) for m in response.context["messages"]]
    assert notes == ["Cancelled 1 run. 1 run was left alone: not active."]
    waiting.refresh_from_db()
    done.refresh_from_db()
    assert (waiting.status, done.status) == ("cancelled", "completed")


def test_requeue_action_queues_failed_runs_for_a_worker(
    staff_client: Client, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from tests.conftest import task_backend

    settings.TASKS = {"default": {"BACKEND": task_backend("dummy.DummyBackend")}}
    _ok, failed = run_turns(create_conversation(), "hello", calls_text(("", {})))
    busy_conversation = create_conversation()
    (other_failed,) = run_turns(busy_conversation, calls_text(("", {})))
    ToolLoopService(tools=loop_tools.registry()).start(busy_conversation, "again")
    assert (failed.status, other_failed.status) == ("failed", "failed")
    with django_capture_on_commit_callbacks(execute=True):
        response = _post_action(staff_client, "requeue_runs", [failed, other_failed, _ok])
    notes = [str(m) for m in response.context["messages"]]
    assert notes == [
        "Requeued 1 run. 2 runs were left alone: not failed, or their conversation "
        "has another active run."
    ]
    failed.refresh_from_db()
    other_failed.refresh_from_db()
    assert (failed.status, other_failed.status) == ("queued", "failed")


def test_run_actions_need_the_change_permission(staff_client: Client) -> None:
    from django.contrib.auth.models import Permission

    run_turns(create_conversation(), "hello")  # actions are offered when runs are listed
    viewer = get_user_model().objects.create_user("viewer", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_run"))
    client = Client()
    client.force_login(viewer)
    response = client.get(reverse("admin:llm_conversations_run_changelist"))
    assert response.status_code == 200
    assert "cancel_runs" not in response.content.decode()
    html = staff_client.get(reverse("admin:llm_conversations_run_changelist")).content.decode()
    assert "cancel_runs" in html
    assert "requeue_runs" in html
    assert "delete_selected" not in html


def test_change_pages_show_the_lineage_both_ways(staff_client: Client) -> None:
    from llm_conversations.runs.forks import fork

    source = create_conversation(title="Source <b>", messages=[ChatMessage.user("hi")])
    copies = [fork(source, title=f"Copy {n}") for n in range(3)]
    page = staff_client.get(change_url(source)).content.decode()
    for copy in copies:
        assert f'<a href="{change_url(copy)}">Copy' in page
    assert "Source &lt;b&gt;" in page
    child = staff_client.get(change_url(copies[0])).content.decode()
    assert f'<a href="{change_url(source)}">Source &lt;b&gt;</a>, its first 1 messages' in child
    assert listed(staff_client, forked_from__isempty="0") == {"Copy 0", "Copy 1", "Copy 2"}
    assert listed(staff_client, forked_from__exact=str(source.pk)) == {
        "Copy 0",
        "Copy 1",
        "Copy 2",
    }
    Conversation.objects.filter(pk=source.pk).delete()
    orphan = staff_client.get(change_url(copies[0])).content.decode()
    assert "a deleted conversation, its first 1 messages" in orphan


def test_the_change_page_links_a_limited_number_of_forks(
    staff_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    from llm_conversations.admin import ConversationAdmin
    from llm_conversations.runs.forks import fork

    monkeypatch.setattr(ConversationAdmin, "forks_limit", 2)
    source = create_conversation(title="Source")
    for n in range(3):
        fork(source, title=f"Copy {n}")
    page = staff_client.get(change_url(source)).content.decode()
    assert page.count('">Copy ') == 2
    assert f"?forked_from__exact={source.pk}" in page


PRICED = {
    **settings.LLM_CONVERSATIONS,
    "PROVIDERS": {
        "echo": {
            "BACKEND": "echo",
            "MODEL": "echo",
            "MODEL_INFO": {"echo": {"prices": {"input": "1000", "output": "3000"}}},
        }
    },
}


@override_settings(LLM_CONVERSATIONS=PRICED)
def test_costs_in_the_lists_the_run_timeline_and_the_transcript(staff_client: Client) -> None:
    conversation = create_conversation(title="priced")
    (run,) = run_turns(conversation, "hello")
    run.refresh_from_db()
    turn = Message.objects.get(role="assistant")
    # 5 characters in and out at 1000 and 3000 dollars per million.
    assert turn.cost == run.cost == Decimal("0.02")
    response = staff_client.get(reverse(CHANGELIST))
    (row,) = response.context["cl"].result_list
    assert row.cost == Decimal("0.02")
    # Shown to a millionth, not the ten places a cost is stored to.
    assert '<td class="field-cost">0.02</td>' in response.content.decode()
    html = staff_client.get(change_url(conversation)).content.decode()
    timeline = html[html.index('id="llmconv-runs"') : html.index('id="llmconv-transcript"')]
    assert '<dd class="llmconv-cost">0.02 USD</dd>' in timeline
    transcript = html[html.index('class="llmconv-msg llmconv-assistant"') :]
    assert '<span class="llmconv-cost">0.02 USD</span>' in transcript
    runs = staff_client.get(reverse("admin:llm_conversations_run_changelist"))
    assert '<td class="field-cost_usd">0.02</td>' in runs.content.decode()
    for page in (
        reverse("admin:llm_conversations_run_change", args=[run.pk]),
        reverse("admin:llm_conversations_message_change", args=[turn.pk]),
    ):
        assert '<div class="readonly">0.02</div>' in staff_client.get(page).content.decode()
    assert "0.0200000000" not in html + runs.content.decode()


def test_transcript_marks_where_a_fitted_run_cut_the_history(staff_client: Client) -> None:
    with override_settings(LLM_CONVERSATIONS=providers("truncate")):
        conversation = create_conversation(title="long", messages=long_history(60))
        run = ToolLoopService().send(conversation, "and now?")
        html = staff_client.get(change_url(conversation)).content.decode()
    first = run.context_first_position
    assert first
    marker = (
        '<div class="llmconv-cut-marker">Run 1 left out the messages above (context window) '
        "and sent the messages from here on</div>"
    )
    assert html.count('class="llmconv-cut-marker"') == 1
    # The marker stands right before the first message sent.
    after = html[html.index(marker) :]
    next_message = after[after.index('id="message-') :]
    assert next_message.startswith(f'id="message-{first}"')


def test_transcript_marks_a_compacted_turn_and_folds_its_state(staff_client: Client) -> None:
    state = Reasoning("anthropic", ReasoningKind.COMPACTION, "The user said <hello>.")
    opaque = Reasoning("openai_responses", ReasoningKind.COMPACTION, data='{"id": "cmp_1"}')
    conversation = create_conversation(messages=[ChatMessage.user("q")])
    append_completion(conversation, CompletionResponse("a", reasoning=(state,)))
    append_completion(conversation, CompletionResponse("b", reasoning=(opaque,)))
    html = staff_client.get(change_url(conversation)).content.decode()
    assert html.count('class="llmconv-compaction"') == 2
    assert "Compacted by anthropic: its later calls read" in html
    assert "Compacted by openai_responses" in html
    assert "The user said &lt;hello&gt;." in html
    assert "cmp_1" not in html
    assert "llmconv-reasoning" not in html  # a compacted state is not reasoning


def test_a_waiting_run_shows_the_run_ahead_and_can_be_cancelled(staff_client: Client) -> None:
    service = ToolLoopService(tools=loop_tools.registry())
    conversation = create_conversation()
    active = service.start(conversation, "first")
    waiting = service.start(conversation, "second", if_busy="enqueue")
    changelist = staff_client.get("/admin/llm_conversations/run/").content.decode()
    assert "llmconv-status-waiting" in changelist
    assert f"run {active.pk}" in changelist
    page = staff_client.get(f"/admin/llm_conversations/run/{waiting.pk}/change/").content.decode()
    assert f'/admin/llm_conversations/run/{active.pk}/change/">{active.pk}</a>' in page
    assert "second" in page  # the user turn it will store once it starts
    response = _post_action(staff_client, "cancel_runs", [waiting])
    assert [str(m) for m in response.context["messages"]] == ["Cancelled 1 run."]
    waiting.refresh_from_db()
    assert (waiting.status, waiting.termination_reason) == ("cancelled", "cancelled")


def test_an_interrupting_run_names_the_run_it_replaced(staff_client: Client) -> None:
    service = ToolLoopService(tools=loop_tools.registry())
    conversation = create_conversation()
    old = service.start(conversation, "first")
    new = service.start(conversation, "second", if_busy="rollback")
    page = staff_client.get(
        f"/admin/{conversation._meta.app_label}/conversation/{conversation.pk}/change/"
    ).content.decode()
    assert f"interrupted run {old.pk}" in page
    assert "ended: rolled_back" in page
    assert new.replaced_id == old.pk
