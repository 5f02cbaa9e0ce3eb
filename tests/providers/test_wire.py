from llm_conversations.messages import ChatMessage, ToolCall
from llm_conversations.providers._wire import CallIds, iter_ndjson, iter_sse


def test_sse_fields_comments_and_multiline_data():
    lines = [": keep-alive", "event: a", "data: 1", "data: 2", "", "data:3", "", "", "data: tail"]
    assert [(e.event, e.data) for e in iter_sse(lines)] == [
        ("a", "1\n2"),
        ("message", "3"),
        ("message", "tail"),
    ]


def test_ndjson_skips_blank_lines():
    assert list(iter_ndjson(['{"a": 1}', "", '{"b": 2}'])) == [{"a": 1}, {"b": 2}]


def test_call_ids_avoid_every_id_of_the_conversation():
    messages = [
        ChatMessage.user("u"),
        ChatMessage.assistant_tool_calls([ToolCall("call_1", "f", {})]),
        ChatMessage.tool_result("call_1", "r"),
    ]
    ids = CallIds(messages)
    assert ids.take("call_1") != "call_1"
    assert ids.take("new") == "new"
    assert ids.take("new") != "new"
    made = {ids.take() for _ in range(50)}
    assert len(made) == 50
