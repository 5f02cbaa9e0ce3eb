"""Per-run parameters and structured output through the tool loop.

Runs go through the OpenAI adapter at the HTTP boundary (every request body is
recorded) or the echo backend; parameters are kept on the run, so background
execution and retries use them too.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from django.test import override_settings

from llm_conversations.conversations import create_conversation, load_messages
from llm_conversations.core.messages import ChatMessage, Role
from llm_conversations.exceptions import ParameterError
from llm_conversations.models import Message, Run
from llm_conversations.providers import OllamaProvider, OpenAIProvider
from llm_conversations.runs import ToolLoopService
from llm_conversations.runs.events import MessageStored, RunFailed
from llm_conversations.runs.service import enqueue_run
from tests.runs.test_loop import openai_reply
from tests.support import loop_tools

pytestmark = pytest.mark.django_db

CITY = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
    "required": ["city", "celsius"],
}
Handler = Callable[[dict[str, Any]], dict[str, Any]]


def service(handler: Handler, bodies: list[dict[str, Any]], **options: Any) -> ToolLoopService:
    def transport(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        bodies.append(body)
        return httpx.Response(200, json=handler(body))

    provider = OpenAIProvider(
        model="gpt-test",
        api_key="sk-test",
        models=["gpt-big"],
        http_client=httpx.Client(transport=httpx.MockTransport(transport)),
        streams=False,  # the transport answers whole replies
        **options,
    )
    return ToolLoopService(provider, tools=loop_tools.registry())


def answers(*texts: str, calls_first: int = 0) -> Handler:
    """A model that calls get_time ``calls_first`` times, then answers ``texts`` in turn."""

    def handler(body: dict[str, Any]) -> dict[str, Any]:
        made = sum(1 for m in body["messages"] if m["role"] == "assistant" and m.get("tool_calls"))
        if made < calls_first:
            call = {
                "id": f"c{made}",
                "type": "function",
                "function": {"name": "get_time", "arguments": "{}"},
            }
            return openai_reply(
                {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
            )
        said = sum(1 for m in body["messages"] if m["role"] == "assistant" and m["content"])
        return openai_reply({"role": "assistant", "content": texts[said]}, "stop")

    return handler


def rows(run: Run) -> list[Message]:
    return list(Message.objects.filter(conversation=run.conversation_id).order_by("position"))


# Parameters ----------------------------------------------------------------------


def test_parameters_are_kept_on_the_run_and_sent_on_every_call() -> None:
    bodies: list[dict[str, Any]] = []
    loop = service(answers("It is 09:00.", calls_first=1), bodies, temperature=0.9, max_tokens=9)
    conversation = create_conversation(messages=[ChatMessage.system("Stored rule.")])
    run = loop.send(
        conversation,
        "Time?",
        instructions="Answer in French.",
        model="gpt-big",
        temperature=0.2,
        max_output_tokens=64,
        stop="###",
        seed=11,
        tool_choice="required",
        parallel_tool_calls=False,
    )
    assert (run.status, run.iterations, run.model) == ("completed", 2, "gpt-big")
    assert run.instructions == "Answer in French."
    assert run.parameters == {
        "model": "gpt-big",
        "temperature": 0.2,
        "max_output_tokens": 64,
        "stop": ["###"],
        "seed": 11,
        "tool_choice": "required",
        "parallel_tool_calls": False,
    }
    for body in bodies:
        assert body["model"] == "gpt-big"
        assert body["messages"][:2] == [
            {"role": "system", "content": "Answer in French."},
            {"role": "system", "content": "Stored rule."},
        ]
        assert (body["temperature"], body["max_completion_tokens"], body["seed"]) == (0.2, 64, 11)
        assert (body["stop"], body["parallel_tool_calls"]) == (["###"], False)
        assert "max_tokens" not in body
    # A forced call applies to the first model call only; the model may then answer.
    assert [body.get("tool_choice") for body in bodies] == ["required", None]
    # The instructions are not part of the conversation.
    assert [m.role for m in load_messages(conversation)] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]


def test_a_closing_call_offered_no_tools_sends_no_tool_choice() -> None:
    bodies: list[dict[str, Any]] = []
    loop = service(answers("Done."), bodies)
    loop.send(create_conversation(), "hi", max_iterations=1, tool_choice="none")
    assert "tools" not in bodies[0]
    assert "tool_choice" not in bodies[0]


@pytest.mark.parametrize(
    ("parameters", "code", "field"),
    [
        ({"temperature": 3}, "invalid_parameter", "temperature"),
        ({"model": "gpt-5"}, "model_not_allowed", "model"),
        ({"tool_choice": {"name": "get_weather"}}, "tool_not_offered", "tool_choice.name"),
        ({"response_format": {"type": "array"}}, "invalid_response_format", "response_format"),
        ({"temprature": 1}, "unknown_parameter", "temprature"),
    ],
)
def test_refused_parameters_store_nothing(
    parameters: dict[str, Any], code: str, field: str
) -> None:
    bodies: list[dict[str, Any]] = []
    conversation = create_conversation()
    with pytest.raises(ParameterError) as info:
        service(answers("x"), bodies).start(conversation, "hi", tools=["get_time"], **parameters)
    assert (info.value.code, info.value.field) == (code, field)
    assert not Run.objects.exists()
    assert not Message.objects.exists()
    assert bodies == []


def test_a_parameter_the_provider_cannot_honour_is_refused_naming_both() -> None:
    ollama = OllamaProvider(
        model="llama3.2",
        http_client=httpx.Client(
            transport=httpx.MockTransport(lambda request: httpx.Response(500))
        ),
    )
    loop = ToolLoopService(ollama, tools=loop_tools.registry())
    with pytest.raises(ParameterError) as info:
        loop.start(create_conversation(), "hi", tool_choice="required")
    assert info.value.code == "unsupported_parameter"
    assert info.value.message == (
        "provider 'ollama' cannot honour tool_choice 'required' (it takes auto, none)."
    )
    assert not Message.objects.exists()


# Structured output ------------------------------------------------------------------


def test_a_structured_answer_after_tools_is_parsed_and_stored() -> None:
    bodies: list[dict[str, Any]] = []
    loop = service(answers('{"city": "Paris", "celsius": 18}', calls_first=1), bodies)
    run = loop.send(create_conversation(), "Weather?", response_format=CITY)
    assert (run.status, run.termination_reason) == ("completed", "completed")
    stored = rows(run)
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[-1].parsed == {"city": "Paris", "celsius": 18}
    assert stored[1].parsed is None  # the tool-call turn is not an answer
    for body in bodies:
        assert body["response_format"]["json_schema"]["schema"] == CITY
        assert body["tools"]


def test_an_invalid_answer_gets_a_repair_round() -> None:
    bodies: list[dict[str, Any]] = []
    loop = service(answers('{"city": "Paris"}', '{"city": "Paris", "celsius": 18}'), bodies)
    run = loop.send(create_conversation(), "Weather?", response_format=CITY, max_iterations=1)
    # The repaired answer completes the run: the repair was not tool work cut short.
    assert (run.status, run.termination_reason, run.iterations) == ("completed", "completed", 2)
    _user, wrong, repair, right = rows(run)
    assert (wrong.parsed, wrong.metadata) == (
        None,
        {"invalid_output": "at the top level: 'celsius' is a required property."},
    )
    assert (repair.role, repair.metadata) == ("user", {"repair": True})
    assert "'celsius' is a required property" in repair.content
    assert right.parsed == {"city": "Paris", "celsius": 18}
    assert bodies[1]["messages"][-1] == {"role": "user", "content": repair.content}


def test_an_answer_still_invalid_after_the_repair_fails_the_run() -> None:
    loop = service(answers("Paris, 18 degrees", "Sunny in Paris"), [])
    conversation = create_conversation()
    run = loop.start(conversation, "Weather?", response_format=CITY)
    events = list(loop.events(run))
    run = events[-1].run
    assert isinstance(events[-1], RunFailed)
    assert (run.status, run.termination_reason, run.error_type) == (
        "failed",
        "invalid_output",
        "InvalidOutput",
    )
    assert run.error_message.startswith(
        "the answer did not match the response_format after 1 repair round(s): "
        "the answer is not valid JSON"
    )
    stored = [e.message.role for e in events if isinstance(e, MessageStored)]
    assert stored == ["assistant", "user", "assistant"]
    # The conversation stays usable.
    again = service(answers("", "", '{"city": "Oslo", "celsius": 1}'), [])
    assert again.send(conversation, "Again?", response_format=CITY).status == "completed"


@pytest.mark.parametrize(("repairs", "calls"), [(0, 1), (2, 3)])
def test_the_number_of_repair_rounds_is_a_setting(repairs: int, calls: int) -> None:
    bodies: list[dict[str, Any]] = []
    loop = service(answers("a", "b", "c", "d"), bodies)
    with override_settings(LLM_CONVERSATIONS={"STRUCTURED_OUTPUT_REPAIRS": repairs}):
        run = loop.send(create_conversation(), "Weather?", response_format=CITY)
    assert (run.termination_reason, len(bodies)) == ("invalid_output", calls)


def test_retrying_an_invalid_output_run_asks_for_one_more_repair() -> None:
    bodies: list[dict[str, Any]] = []
    texts = ["no", "still no", '{"city": "Rome", "celsius": 25}']
    loop = service(answers(*texts), bodies)
    failed = loop.send(create_conversation(), "Weather?", response_format=CITY)
    assert failed.termination_reason == "invalid_output"
    retried = loop.retry(failed.pk)
    assert (retried.status, retried.termination_reason) == ("completed", "completed")
    assert [m.role for m in rows(retried)] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    assert rows(retried)[-1].parsed == {"city": "Rome", "celsius": 25}
    assert len(bodies) == 3


def test_a_reply_cut_at_the_output_limit_is_not_judged() -> None:
    def cut(body: dict[str, Any]) -> dict[str, Any]:
        return openai_reply({"role": "assistant", "content": '{"city": "Par'}, "length")

    run = service(cut, []).send(create_conversation(), "Weather?", response_format=CITY)
    assert (run.status, run.termination_reason) == ("completed", "length")
    assert rows(run)[-1].parsed is None


def test_a_background_run_uses_its_stored_parameters(
    django_capture_on_commit_callbacks: Any,
) -> None:
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run = ToolLoopService().start(
            create_conversation(),
            '{"city": "Paris", "celsius": 18} trailing words',
            stop=" trailing",
            response_format=CITY,
            background=True,
        )
    (enqueue,) = [c for c in callbacks if getattr(c, "func", None) is enqueue_run]
    enqueue()  # another executor, which reads the run by its id
    run.refresh_from_db()
    assert (run.status, run.termination_reason) == ("completed", "completed")
    answer = rows(run)[-1]
    assert (answer.role, answer.content) == (Role.ASSISTANT, '{"city": "Paris", "celsius": 18}')
    assert answer.parsed == {"city": "Paris", "celsius": 18}


def test_a_run_asks_for_a_model_only_when_it_chose_one(settings: Any) -> None:
    def entry(model: str) -> dict[str, Any]:
        echo = {"BACKEND": "echo", "MODEL": model, "MODELS": ["two"]}
        return {"DEFAULT_PROVIDER": "e", "PROVIDERS": {"e": echo}}

    settings.LLM_CONVERSATIONS = entry("one")
    default = ToolLoopService().start(create_conversation(), "hi")
    chosen = ToolLoopService().start(create_conversation(), "hi", model="two")
    assert (default.model, chosen.model) == ("one", "two")
    settings.LLM_CONVERSATIONS = entry("three")  # MODEL changed while they were queued
    for run in (default, chosen):
        ToolLoopService().execute(run.pk)
    assert [rows(run)[-1].model for run in (default, chosen)] == ["three", "two"]
