"""The message rules of messages.py: every rule, the exact wire form, round-trips."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llm_conversations.core.completions import CompletionResponse, Usage
from llm_conversations.core.messages import (
    ChatMessage,
    InvalidMessage,
    Role,
    ToolCall,
    as_chat_messages,
)
from llm_conversations.core.sequence import check_sequence, unanswered_tool_call_ids
from llm_conversations.core.tool_specs import ToolSpec

# Exact wire dicts -----------------------------------------------------------


def test_plain_messages_serialise_to_exactly_role_and_content() -> None:
    assert ChatMessage.system("s").to_wire() == {"role": "system", "content": "s"}
    assert ChatMessage.user("u").to_wire() == {"role": "user", "content": "u"}
    assert ChatMessage.assistant("a").to_wire() == {"role": "assistant", "content": "a"}


def test_assistant_tool_call_turn_with_empty_arguments_wire_form() -> None:
    message = ChatMessage.assistant_tool_calls(
        [ToolCall("call_1", "get_weather", {"city": "Paris"}), ToolCall("call_2", "get_time", {})]
    )
    assert message.content == ""
    assert message.to_wire() == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
            },
            {
                "id": "call_2",
                "type": "function",
                "function": {"name": "get_time", "arguments": "{}"},
            },
        ],
    }


def test_assistant_text_beside_tool_calls_is_kept() -> None:
    message = ChatMessage.assistant_tool_calls([ToolCall("c", "f")], "Checking.")
    assert message.to_wire()["content"] == "Checking."


def test_tool_result_wire_form_never_carries_is_error() -> None:
    message = ChatMessage.tool_result("call_2", "boom", is_error=True)
    assert message.is_error is True
    assert message.to_wire() == {"role": "tool", "content": "boom", "tool_call_id": "call_2"}


def test_tool_call_stored_form_keeps_decoded_arguments() -> None:
    call = ToolCall("c", "f", {"n": 1})
    assert call.to_stored() == {
        "id": "c",
        "type": "function",
        "function": {"name": "f", "arguments": {"n": 1}},
    }
    assert call.to_wire()["function"]["arguments"] == '{"n":1}'
    assert ToolCall("c", "f").arguments_json == "{}"


def test_non_ascii_arguments_stay_readable() -> None:
    assert ToolCall("c", "f", {"city": "Zürich"}).arguments_json == '{"city":"Zürich"}'


# from_dict -------------------------------------------------------------------


def test_from_dict_accepts_json_string_and_object_arguments() -> None:
    as_text = ChatMessage.from_dict(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}
            ],
        }
    )
    as_object = ChatMessage.from_dict(
        {
            "role": "assistant",
            "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": {"x": 1}}}],
        }
    )
    assert as_text == as_object == ChatMessage.assistant_tool_calls([ToolCall("a", "f", {"x": 1})])


@pytest.mark.parametrize("empty", ["", None, "{}", {}])
def test_empty_arguments_in_any_form_mean_no_arguments(empty: object) -> None:
    call = ToolCall.from_dict({"id": "a", "function": {"name": "f", "arguments": empty}})
    assert call.arguments == {}
    assert not call.malformed


@pytest.mark.parametrize(
    ("raw", "expected_raw"),
    [('{"city": "Par', '{"city": "Par'), ("[1, 2]", "[1, 2]"), ("42", "42"), ([1, 2], "[1, 2]")],
)
def test_arguments_that_are_not_an_object_are_kept_raw_and_flagged(
    raw: object, expected_raw: str
) -> None:
    call = ToolCall.from_dict({"id": "a", "function": {"name": "f", "arguments": raw}})
    assert call.malformed
    assert call.raw_arguments == expected_raw
    assert call.arguments == {}
    assert call.arguments_json == expected_raw
    message = ChatMessage.assistant_tool_calls([call])
    assert ChatMessage.from_dict(message.to_wire()) == message


def test_from_dict_reads_is_error_for_tool_messages() -> None:
    data = {"role": "tool", "content": "x", "tool_call_id": "a", "is_error": True}
    assert ChatMessage.from_dict(data) == ChatMessage.tool_result("a", "x", is_error=True)


# Rule violations --------------------------------------------------------------

VIOLATIONS = [
    ({"role": "boss", "content": "x"}, "invalid_role", "role"),
    ({"content": "x"}, "invalid_role", "role"),
    ({"role": "user"}, "missing_content", "content"),
    ({"role": "user", "content": ""}, "missing_content", "content"),
    ({"role": "system", "content": ""}, "missing_content", "content"),
    ({"role": "user", "content": 5}, "invalid_content", "content"),
    (
        {"role": "user", "content": "x", "tool_calls": [{"id": "a", "function": {"name": "f"}}]},
        "tool_calls_not_allowed",
        "tool_calls",
    ),
    ({"role": "assistant", "content": "x", "tool_calls": []}, "empty_tool_calls", "tool_calls"),
    ({"role": "assistant", "content": "x", "tool_calls": "no"}, "invalid_tool_call", "tool_calls"),
    (
        {"role": "user", "content": "x", "tool_call_id": "a"},
        "tool_call_id_not_allowed",
        "tool_call_id",
    ),
    ({"role": "tool", "content": "x"}, "missing_tool_call_id", "tool_call_id"),
    ({"role": "tool", "content": "x", "tool_call_id": ""}, "missing_tool_call_id", "tool_call_id"),
    ({"role": "user", "content": "x", "is_error": True}, "is_error_not_allowed", "is_error"),
    (
        {"role": "tool", "content": "x", "tool_call_id": "a", "is_error": "yes"},
        "invalid_is_error",
        "is_error",
    ),
    ({"role": "user", "content": "x", "name": "bob"}, "unknown_field", "name"),
    (
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "a", "function": {"name": "f"}},
                {"id": "a", "function": {"name": "g"}},
            ],
        },
        "duplicate_tool_call_id",
        "tool_calls[1].id",
    ),
    (
        {"role": "assistant", "tool_calls": [{"id": "", "function": {"name": "f"}}]},
        "invalid_tool_call_id",
        "tool_calls[0].id",
    ),
    (
        {"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": ""}}]},
        "invalid_tool_name",
        "tool_calls[0].function.name",
    ),
    (
        {"role": "assistant", "tool_calls": [{"id": "a", "type": "x", "function": {"name": "f"}}]},
        "invalid_tool_call_type",
        "tool_calls[0].type",
    ),
    (
        {"role": "assistant", "tool_calls": [{"id": "a"}]},
        "invalid_tool_call",
        "tool_calls[0].function",
    ),
    (
        {"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f", "x": 1}}]},
        "unknown_field",
        "tool_calls[0].function.x",
    ),
]


@pytest.mark.parametrize(("data", "code", "field"), VIOLATIONS)
def test_every_violation_has_a_code_and_names_the_field(data: dict, code: str, field: str) -> None:
    with pytest.raises(InvalidMessage) as info:
        ChatMessage.from_dict(data)
    assert info.value.code == code
    assert info.value.field == field
    assert str(info.value)


def test_invalid_message_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="must not be empty"):
        ChatMessage.user("")


def test_constructor_enforces_the_rules_too() -> None:
    with pytest.raises(InvalidMessage) as info:
        ChatMessage(Role.USER, "x", tool_calls=(ToolCall("a", "f"),))
    assert info.value.code == "tool_calls_not_allowed"
    with pytest.raises(InvalidMessage) as info:
        ChatMessage(Role.ASSISTANT, "x", tool_calls=({"id": "a"},))  # type: ignore[arg-type]
    assert info.value.code == "invalid_tool_call"
    with pytest.raises(InvalidMessage) as info:
        ToolCall("a", "f", "{}")  # type: ignore[arg-type]
    assert info.value.code == "invalid_arguments"


def test_string_roles_become_the_enum() -> None:
    assert ChatMessage("user", "x").role is Role.USER  # type: ignore[arg-type]


def test_tool_result_content_may_be_empty() -> None:
    assert ChatMessage.tool_result("a", "").content == ""


def test_as_chat_messages_passes_instances_and_names_the_index() -> None:
    instance = ChatMessage.user("x")
    result = as_chat_messages([instance, {"role": "assistant", "content": "y"}])
    assert result[0] is instance
    assert result[1] == ChatMessage.assistant("y")
    with pytest.raises(InvalidMessage) as info:
        as_chat_messages([instance, {"role": "user", "content": ""}])
    assert info.value.field == "messages[1].content"


# Property-based round-trips --------------------------------------------------

# Arguments a database can store: no NUL, no lone surrogate (those are kept raw,
# as malformed calls; see test_arguments_text_whose_object_no_database_stores_stays_raw).
storable = st.characters(exclude_characters="\x00", exclude_categories=("Cs",))
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(storable, max_size=10),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.text(storable, max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)
ids = st.text(min_size=1, max_size=12)
tool_calls = st.builds(
    ToolCall,
    id=ids,
    name=st.from_regex(r"[A-Za-z0-9_-]{1,20}", fullmatch=True),
    arguments=st.dictionaries(st.text(storable, max_size=8), json_values, max_size=4),
)
malformed_calls = st.builds(
    lambda i, raw: ToolCall.parse(id=i, name="f", arguments=raw),
    ids,
    st.sampled_from(['{"a":', "[]", "1", "null", "not json"]),
)
text = st.text(min_size=1, max_size=40)
messages = st.one_of(
    st.builds(ChatMessage.system, text),
    st.builds(ChatMessage.user, text),
    st.builds(ChatMessage.assistant, text),
    st.builds(
        ChatMessage.assistant_tool_calls,
        st.lists(tool_calls | malformed_calls, min_size=1, max_size=4, unique_by=lambda c: c.id),
        st.none() | st.text(max_size=20),
    ),
    st.builds(ChatMessage.tool_result, ids, st.text(max_size=40)),
)


@given(messages)
def test_from_dict_of_to_wire_is_exact(message: ChatMessage) -> None:
    assert ChatMessage.from_dict(message.to_wire()) == message
    # And through real JSON text, as a request body carries it.
    assert ChatMessage.from_dict(json.loads(json.dumps(message.to_wire()))) == message


@given(st.lists(tool_calls | malformed_calls, min_size=1, max_size=4))
def test_tool_call_round_trips_in_both_forms(calls: list[ToolCall]) -> None:
    for call in calls:
        assert ToolCall.from_dict(call.to_stored()) == call
        assert ToolCall.from_dict(call.to_wire()) == call


@given(ids, st.text(max_size=40))
def test_tool_error_round_trips_with_is_error_added(call_id: str, content: str) -> None:
    message = ChatMessage.tool_result(call_id, content, is_error=True)
    assert ChatMessage.from_dict({**message.to_wire(), "is_error": True}) == message


stored_messages = messages | st.builds(
    lambda call_id, content: ChatMessage.tool_result(call_id, content, is_error=True),
    ids,
    st.text(max_size=40),
)


@given(stored_messages)
def test_from_dict_of_to_stored_is_exact(message: ChatMessage) -> None:
    stored = message.to_stored()
    assert list(stored) == ["role", "content", "tool_calls", "tool_call_id", "is_error"]
    assert ChatMessage.from_dict(stored) == message
    # And through a JSON column.
    assert ChatMessage.from_dict(json.loads(json.dumps(stored))) == message


schemas = st.fixed_dictionaries(
    {"type": st.just("object")},
    optional={
        "properties": st.dictionaries(
            st.text(max_size=5),
            st.fixed_dictionaries({"type": st.sampled_from(["string", "integer"])}),
            max_size=3,
        ),
        "required": st.lists(st.text(max_size=5), max_size=2),
    },
)
tool_specs = st.builds(
    ToolSpec,
    name=st.from_regex(r"[A-Za-z0-9_-]{1,64}", fullmatch=True),
    description=st.text(max_size=20),
    parameters=schemas,
)


@given(tool_specs)
def test_tool_spec_round_trips_in_both_forms(spec: ToolSpec) -> None:
    assert list(spec.to_stored()) == ["name", "description", "parameters"]
    assert ToolSpec.from_dict(spec.to_stored()) == spec
    from_wire = ToolSpec.from_dict(spec.to_wire())
    assert from_wire.to_wire() == spec.to_wire()
    # The wire form always names properties, so only a spec without them changes.
    if "properties" in spec.parameters:
        assert from_wire == spec


def test_to_stored_examples() -> None:
    assert ChatMessage.tool_result("a", "boom", is_error=True).to_stored() == {
        "role": "tool",
        "content": "boom",
        "tool_calls": None,
        "tool_call_id": "a",
        "is_error": True,
    }
    turn = ChatMessage.assistant_tool_calls([ToolCall.parse(id="c", name="f", arguments="[1]")])
    assert turn.to_stored() == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": "[1]"}}
        ],
        "tool_call_id": None,
        "is_error": False,
    }
    assert ToolSpec("t", "d").to_stored() == {
        "name": "t",
        "description": "d",
        "parameters": {"type": "object", "properties": {}},
    }


@pytest.mark.parametrize(
    ("data", "code", "field"),
    [
        ("get_time", "invalid_tool", None),
        ({"function": 3}, "invalid_tool", "function"),
        ({"type": "other", "function": {"name": "f"}}, "invalid_tool", "type"),
        (
            {"type": "function", "function": {"name": "bad name"}},
            "invalid_tool_name",
            "function.name",
        ),
        ({"description": "no name"}, "invalid_tool_name", "name"),
        ({"name": "f", "description": 3}, "invalid_tool_description", "description"),
        ({"name": "f", "parameters": "{}"}, "invalid_tool_schema", "parameters"),
        (
            {"function": {"name": "f", "parameters": {"type": "string"}}},
            "invalid_tool_schema",
            "function.parameters",
        ),
    ],
)
def test_tool_spec_from_dict_names_the_field(data: Any, code: str, field: str | None) -> None:
    with pytest.raises(InvalidMessage) as info:
        ToolSpec.from_dict(data)
    assert (info.value.code, info.value.field) == (code, field)


def test_tool_spec_from_dict_fills_defaults_and_ignores_extra_keys() -> None:
    expected = ToolSpec("f")
    assert ToolSpec.from_dict({"name": "f"}) == expected
    assert ToolSpec.from_dict({"function": {"name": "f", "description": None}}) == expected
    assert (
        ToolSpec.from_dict({"type": "function", "function": {"name": "f", "strict": True}})
        == expected
    )


# Conversation-level rules ------------------------------------------------------


def test_a_full_parallel_call_history_is_valid(history: list[ChatMessage]) -> None:
    assert check_sequence(history) == ()


def test_results_may_come_in_any_order() -> None:
    turn = ChatMessage.assistant_tool_calls([ToolCall("a", "f"), ToolCall("b", "g")])
    assert check_sequence([turn, ChatMessage.tool_result("b", "2")]) == ("a",)
    assert (
        check_sequence([turn, ChatMessage.tool_result("b", "2"), ChatMessage.tool_result("a", "1")])
        == ()
    )


@pytest.mark.parametrize(
    ("sequence", "code", "field"),
    [
        ([ChatMessage.tool_result("a", "x")], "unexpected_tool_result", "messages[0].tool_call_id"),
        (
            [
                ChatMessage.assistant_tool_calls([ToolCall("a", "f")]),
                ChatMessage.tool_result("b", "x"),
            ],
            "unexpected_tool_result",
            "messages[1].tool_call_id",
        ),
        (
            [
                ChatMessage.assistant_tool_calls([ToolCall("a", "f")]),
                ChatMessage.tool_result("a", "x"),
                ChatMessage.tool_result("a", "again"),
            ],
            "unexpected_tool_result",
            "messages[2].tool_call_id",
        ),
        (
            [ChatMessage.assistant_tool_calls([ToolCall("a", "f")]), ChatMessage.user("hi")],
            "unanswered_tool_calls",
            "messages[1]",
        ),
        (
            [
                ChatMessage.assistant_tool_calls([ToolCall("a", "f")]),
                ChatMessage.assistant("done"),
            ],
            "unanswered_tool_calls",
            "messages[1]",
        ),
        (
            [
                ChatMessage.assistant_tool_calls([ToolCall("a", "f")]),
                ChatMessage.tool_result("a", "x"),
                ChatMessage.assistant("ok"),
                ChatMessage.tool_result("a", "late"),
            ],
            "unexpected_tool_result",
            "messages[3].tool_call_id",
        ),
    ],
)
def test_sequence_violations(sequence: list[ChatMessage], code: str, field: str) -> None:
    with pytest.raises(InvalidMessage) as info:
        check_sequence(sequence)
    assert (info.value.code, info.value.field) == (code, field)


def test_check_sequence_continues_from_pending_calls() -> None:
    assert check_sequence([ChatMessage.tool_result("a", "x")], pending=("a", "b")) == ("b",)


def test_unanswered_ids_come_from_the_last_assistant_turn(history: list[ChatMessage]) -> None:
    assert unanswered_tool_call_ids(history[:3]) == ("call_1", "call_2")
    assert unanswered_tool_call_ids(history[:4]) == ("call_2",)
    assert unanswered_tool_call_ids(history) == ()


# Provider results -------------------------------------------------------------------


def test_usage_totals_and_sums() -> None:
    assert Usage(3, 4).total_tokens == 7
    total = Usage(3, 4) + Usage(1, 1, cached_tokens=2)
    assert total == Usage(4, 5, 9, 2)
    assert (Usage(1, 1) + Usage(1, 1)).cached_tokens is None


def test_completion_response_becomes_the_assistant_turn() -> None:
    call = ToolCall("a", "f")
    assert CompletionResponse("", (call,)).to_message() == ChatMessage.assistant_tool_calls([call])
    assert CompletionResponse("hi").to_message() == ChatMessage.assistant("hi")
    with pytest.raises(InvalidMessage) as info:
        CompletionResponse("", (call, call))
    assert info.value.code == "duplicate_tool_call_id"


def test_tool_spec_wire_form_and_rules() -> None:
    assert ToolSpec("get_time", "Current time.").to_wire() == {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "Current time.",
            "parameters": {"type": "object", "properties": {}},
        },
    }
    assert ToolSpec("t", parameters={"type": "object"}).to_wire()["function"]["parameters"] == {
        "type": "object",
        "properties": {},
    }
    with pytest.raises(InvalidMessage) as info:
        ToolSpec("bad name")
    assert info.value.code == "invalid_tool_name"
    with pytest.raises(InvalidMessage) as info:
        ToolSpec("ok", parameters={"type": "string"})
    assert info.value.code == "invalid_tool_schema"


def test_an_assistant_turn_may_be_empty_an_empty_reply() -> None:
    # A refusal or an output limit reached before any text: kept, with nothing to say.
    message = ChatMessage.assistant("")
    assert message.to_wire() == {"role": "assistant", "content": ""}
    assert ChatMessage.from_dict(message.to_stored()) == message


@pytest.mark.parametrize(
    "text", ['{"city": "Pa\\u0000ris"}', '{"city": "\\ud800"}', '{"n": 1e400}', '{"n": NaN}']
)
def test_arguments_text_whose_object_no_database_stores_stays_raw(text: str) -> None:
    call = ToolCall.parse(id="c", name="f", arguments=text)
    assert call.malformed
    assert call.raw_arguments == text
    # Read back from its stored form, it is malformed again.
    assert ToolCall.from_dict(call.to_stored()) == call
