import pytest

from llm_conversations.core.messages import ChatMessage, InvalidMessage, ToolCall
from llm_conversations.core.tool_specs import ToolSpec
from llm_conversations.providers._wire import CallIds, as_tool_specs, iter_ndjson, iter_sse


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


def test_tool_specs_read_both_dict_forms_and_name_the_index():
    spec = ToolSpec("f", "d")
    assert as_tool_specs([spec, spec.to_wire(), spec.to_stored()]) == [spec, spec, spec]
    with pytest.raises(InvalidMessage) as info:
        as_tool_specs([spec, {"type": "function", "function": {"name": "bad name"}}])
    assert info.value.field == "tools[1].function.name"
    with pytest.raises(InvalidMessage) as info:
        as_tool_specs(["f"])
    assert (info.value.code, info.value.field) == ("invalid_tool", "tools[0]")
